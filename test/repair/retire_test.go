package repair_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/repair"
)

// TestSubscriptionRetired: a DURABLE subscription removed from the
// application keeps its state through the grace period, then dlq-repair
// retires it (watermark, backfill cursor, quarantine, start; its dead
// letter resolved into the history as retired), loudly and once; a
// subscription still declared but not bound in dlq-repair is never touched.
func TestSubscriptionRetired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rg := newRig(t)
	const tenant = "tenant-1"
	w := &welcomer{runs: map[string][]int64{}}
	v1, v2 := rg.build(t, nil), rg.build(t, w)
	placeN(t, rg, tenant, 4)
	rg.consume(t, v2, tenant, 1, 3)
	e4 := rg.event(t, tenant, 4)
	k := delivery.Key{EventID: e4.ID, Subscription: welcomeSub}
	t0 := time.Now().UTC().Truncate(time.Second)
	if c, err := rg.claimStore.Claim(ctx, delivery.ClaimRequest{Key: k, Tenant: tenant, Type: e4.Type, Seq: 4, SchemaVersion: 1, Token: "d",
		Now: t0, LeaseUntil: t0.Add(time.Minute), ExpiresAt: t0.Add(time.Hour)}); err != nil || !c.Acquired {
		t.Fatal(c, err)
	}
	if err := rg.claimStore.Kill(ctx, k, "d", delivery.DeadLetter{Tenant: tenant, EventID: e4.ID, Subscription: welcomeSub, Type: e4.Type, Seq: 4,
		SchemaVersion: 1, Error: "welcome failed", DeadAt: t0}, false); err != nil {
		t.Fatal(err)
	}
	if err := rg.claimStore.Quarantine(ctx, delivery.Quarantined{Tenant: tenant, Subscription: welcomeSub, EventID: e4.ID, Seq: 4, Reason: "cap", At: t0}); err != nil {
		t.Fatal(err)
	}
	if err := rg.claimStore.SaveBackfill(ctx, delivery.Backfill{Tenant: tenant, Subscription: welcomeSub, From: 1, To: 3, Position: 1,
		Status: keys.BackfillRunning, UpdatedAt: t0}); err != nil {
		t.Fatal(err)
	}

	retire := func(b build, declared []string, at time.Time) repair.Report {
		t.Helper()
		cfg := rg.cfg
		cfg.Deliverer, cfg.Backfills, cfg.Subscriptions = b.d, rg.claimStore, b.reg
		cfg.Retirer, cfg.Declared, cfg.Now = rg.claimStore, declared, func() time.Time { return at }
		old := rg.cfg
		rg.cfg = cfg
		defer func() { rg.cfg = old }()
		return rg.run(t, repair.Request{Sources: []string{repair.SourceRetire}})
	}
	state := func() (mark, backfill bool, quarantined, dead int, started bool) {
		t.Helper()
		marks, err := rg.claimStore.Watermarks(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		bfs, err := rg.claimStore.Backfills(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		q, err := rg.claimStore.QuarantineList(ctx, tenant, welcomeSub)
		if err != nil {
			t.Fatal(err)
		}
		dls, _, err := rg.claimStore.DeadLetters(ctx, tenant, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, dl := range dls {
			if dl.Subscription == welcomeSub {
				dead++
			}
		}
		_, started, err = rg.claimStore.SubscriptionStart(ctx, welcomeSub)
		if err != nil {
			t.Fatal(err)
		}
		_, mark = marks[welcomeSub]
		_, backfill = bfs[welcomeSub]
		return mark, backfill, len(q), dead, started
	}
	kept := func(when string) {
		t.Helper()
		if m, b, q, d, s := state(); !m || !b || q != 1 || d != 1 || !s {
			t.Fatalf("%s: watermark %v, backfill %v, quarantined %d, dead letters %d, start %v; want all kept", when, m, b, q, d, s)
		}
	}
	kept("before any run")

	// Declared in the catalog, though this dlq-repair (v1) does not bind it:
	// never retired, nor recorded undeclared.
	declaredAll := delivery.DurableSubscriptions(v2.reg.Catalog())
	rep := retire(v1, declaredAll, t0.Add(72*time.Hour))
	kept("declared but unbound")
	if len(rep.Retiring) != 0 || rep.Sources[repair.SourceRetire].Fixed != 0 {
		t.Errorf("declared but unbound: retiring %+v; want nothing", rep.Retiring)
	}

	// Removed from the catalog: recorded, kept through the grace period.
	declaredV1 := append([]string{}, delivery.DurableSubscriptions(v1.reg.Catalog())...)
	rep = retire(v1, declaredV1, t0)
	if len(rep.Retiring) != 1 || rep.Retiring[0].Subscription != welcomeSub || rep.Retiring[0].RetiredAt != "" {
		t.Fatalf("first run after the removal: retiring %+v; want %s in its grace period", rep.Retiring, welcomeSub)
	}
	kept("first run after the removal")
	retire(v1, declaredV1, t0.Add(23*time.Hour))
	kept("23 h after the removal")

	// A rollback cancels it; removed again, the grace period starts anew.
	retire(v2, declaredAll, t0.Add(23*time.Hour))
	if u, err := rg.claimStore.Undeclared(ctx); err != nil || len(u) != 0 {
		t.Fatalf("after the rollback: undeclared %v, %v; want none", u, err)
	}
	t1 := t0.Add(24 * time.Hour)
	retire(v1, declaredV1, t1)
	retire(v1, declaredV1, t1.Add(23*time.Hour))
	kept("23 h after the second removal")

	rep = retire(v1, declaredV1, t1.Add(25*time.Hour))
	if m, b, q, d, s := state(); m || b || q != 0 || d != 0 || s {
		t.Errorf("after the grace period: watermark %v, backfill %v, quarantined %d, dead letters %d, start %v; want all gone", m, b, q, d, s)
	}
	if sr := rep.Sources[repair.SourceRetire]; sr.Fixed != 1 || sr.Open != 0 || !sr.Complete || len(rep.Retiring) != 1 || rep.Retiring[0].RetiredAt == "" ||
		rep.Retiring[0].Tenants != 1 {
		t.Errorf("retiring run: %+v, retiring %+v; want one tenant retired and the subscription retired", sr, rep.Retiring)
	}
	hist, _, err := rg.claimStore.ResolvedDeadLetters(ctx, tenant, "", 100)
	if err != nil || len(hist) != 1 || hist[0].How != keys.ResolvedRetired || hist[0].EventID != e4.ID {
		t.Errorf("history: %+v, %v; want the dead letter of %s resolved as %s", hist, err, e4.ID, keys.ResolvedRetired)
	}
	if !strings.Contains(rg.metrics.String(), `"`+keys.MetricSubscriptionRetired+`"`) || !strings.Contains(rg.logs.String(), "retired a subscription's state of a tenant") {
		t.Errorf("retirement not loud: want the %s metric and an INFO line", keys.MetricSubscriptionRetired)
	}

	// Idempotent: the next run removes nothing more.
	rep = retire(v1, declaredV1, t1.Add(26*time.Hour))
	if sr := rep.Sources[repair.SourceRetire]; sr.Fixed != 0 || sr.Open != 0 || len(rep.Retiring) != 1 || rep.Retiring[0].RetiredAt == "" {
		t.Errorf("run after the retirement: %+v, retiring %+v; want nothing done, reported retired", sr, rep.Retiring)
	}
}

// scanCountingDB is the state table's client of a Retirer, counting Scans.
type scanCountingDB struct {
	*dynamodb.Client
	scans atomic.Int32
}

func (c *scanCountingDB) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	c.scans.Add(1)
	return c.Client.Scan(ctx, in, o...)
}

// TestRetireFindsStateWithoutWatermark: a removed subscription that left
// only its start row (it went live, never delivered), and one that left
// only dead letters (no watermark), are found by dlq-repair, through the
// start rows' partition and the dead-letter index with no Scan, kept through
// the grace period and then retired: the start deleted, the dead letter
// resolved into the history as retired. Declared again later, the first
// has a new start, not the old one (which would replay everything since).
func TestRetireFindsStateWithoutWatermark(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rg := newRig(t)
	const tenant = "tenant-1"
	const onlyStart, onlyDead = "gone.only-start", "gone.only-dead"
	placeN(t, rg, tenant, 2)
	counting := &scanCountingDB{Client: rg.db}
	store := delivery.NewDynamoStore(counting, rg.stateTbl)
	scans := &countingScanner{Scanner: rg.cfg.DB}
	t0 := time.Now().UTC().Truncate(time.Second)
	if _, err := store.BeginSubscription(ctx, delivery.SubStart{Subscription: onlyStart, StartedAt: t0.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	e1 := rg.event(t, tenant, 1)
	k := delivery.Key{EventID: e1.ID, Subscription: onlyDead}
	if c, err := store.Claim(ctx, delivery.ClaimRequest{Key: k, Tenant: tenant, Type: e1.Type, Seq: 1, SchemaVersion: 1, Token: "d",
		Now: t0, LeaseUntil: t0.Add(time.Minute), ExpiresAt: t0.Add(time.Hour)}); err != nil || !c.Acquired {
		t.Fatal(c, err)
	}
	if err := store.Kill(ctx, k, "d", delivery.DeadLetter{Tenant: tenant, EventID: e1.ID, Subscription: onlyDead, Type: e1.Type, Seq: 1,
		SchemaVersion: 1, Error: "handler failed", DeadAt: t0}, false); err != nil {
		t.Fatal(err)
	}
	if marks, err := store.Watermarks(ctx, tenant); err != nil || len(marks) != 0 {
		t.Fatalf("watermarks %v, %v; want none: the test is of state without one", marks, err)
	}
	declared := append([]string{}, delivery.DurableSubscriptions(rg.build(t, nil).reg.Catalog())...)
	retire := func(at time.Time) repair.Report {
		t.Helper()
		old := rg.cfg
		defer func() { rg.cfg = old }()
		rg.cfg.DB, rg.cfg.Retirer, rg.cfg.Declared, rg.cfg.Now = scans, store, declared, func() time.Time { return at }
		return rg.run(t, repair.Request{Sources: []string{repair.SourceRetire}})
	}
	state := func() (started bool, dead, retired int) {
		t.Helper()
		_, started, err := store.SubscriptionStart(ctx, onlyStart)
		if err != nil {
			t.Fatal(err)
		}
		dls, _, err := store.DeadLetters(ctx, tenant, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		hist, _, err := store.ResolvedDeadLetters(ctx, tenant, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hist {
			if h.Subscription == onlyDead && h.How == keys.ResolvedRetired && h.EventID == e1.ID {
				retired++
			}
		}
		return started, len(dls), retired
	}
	retiring := func(rep repair.Report) map[string]repair.Retiring {
		out := map[string]repair.Retiring{}
		for _, r := range rep.Retiring {
			out[r.Subscription] = r
		}
		return out
	}

	rep := retire(t0)
	got := retiring(rep)
	if len(got) != 2 || got[onlyStart].RetiredAt != "" || got[onlyDead].RetiredAt != "" {
		t.Fatalf("first run: retiring %+v; want %s and %s found, in their grace period", rep.Retiring, onlyStart, onlyDead)
	}
	if s, d, _ := state(); !s || d != 1 {
		t.Fatalf("first run: start %v, dead letters %d; want both kept through the grace period", s, d)
	}
	warned := 0
	for _, l := range rg.logs.Lines() {
		var f map[string]any
		if json.Unmarshal([]byte(l), &f) == nil && f["level"] == "WARN" && f["subscription"] == onlyDead && f["found"] == "its dead letters" {
			warned++
		}
	}
	if warned != 1 {
		t.Errorf("%d WARN lines naming %s found by its dead letters, want 1", warned, onlyDead)
	}

	rep = retire(t0.Add(25 * time.Hour))
	got = retiring(rep)
	if got[onlyStart].RetiredAt == "" || got[onlyDead].RetiredAt == "" {
		t.Errorf("after the grace period: retiring %+v; want both retired", rep.Retiring)
	}
	if s, d, r := state(); s || d != 0 || r != 1 {
		t.Errorf("after the grace period: start %v, open dead letters %d, retired in the history %d; want no start, none open, 1 retired", s, d, r)
	}
	if sr := rep.Sources[repair.SourceRetire]; sr.Fixed != 1 || sr.Open != 0 || !sr.Complete {
		t.Errorf("retiring run: %+v; want the tenant's dead letter fixed, complete", sr)
	}
	if n := counting.scans.Load() + int32(scans.count()); n != 0 {
		t.Errorf("retirement issued %d Scans, want none", n)
	}

	// Declared again: it goes live anew, not from its old start.
	t2 := t0.Add(26 * time.Hour)
	st, err := store.BeginSubscription(ctx, delivery.SubStart{Subscription: onlyStart, StartedAt: t2})
	if err != nil || !st.StartedAt.Equal(t2) {
		t.Errorf("declared again: start %+v, %v; want live since %s", st, err, t2)
	}
}
