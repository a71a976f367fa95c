package repair_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	example "github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/examples/orders/notifications"
	"github.com/fourlanes/fourlanes/examples/orders/search"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
	"github.com/fourlanes/fourlanes/pkg/repair"
)

const welcomeSub = "welcome.new-customer"

// welcomer is the subscription a team adds to a stack with history: a
// welcome email per new order, which must never reach last month's
// customers. It records each seq it ran for, and when.
type welcomer struct {
	mu   sync.Mutex
	runs map[string][]int64 // tenant → seqs, in the order they ran
	at   []time.Time
	fail map[int64]bool // seqs whose handler fails
}

func (w *welcomer) OnPlaced(_ context.Context, e envelope.Envelope) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail[e.Seq] {
		return errors.New("welcome: the mail service refused it")
	}
	w.runs[e.TenantID] = append(w.runs[e.TenantID], e.Seq)
	w.at = append(w.at, time.Now())
	return nil
}

func (w *welcomer) seqs(tenant string) []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int64(nil), w.runs[tenant]...)
}

var welcomeModule = catalog.Module[*welcomer]{
	Name: "welcome",
	Subscribes: []catalog.Subscription[*welcomer]{
		{Name: welcomeSub, Types: "order.placed", Lane: catalog.Durable, Reads: []int{1, 2}, Handler: (*welcomer).OnPlaced},
	},
}

// build is one build of the application: the orders example's, or the
// next one with the welcome module added.
type build struct {
	reg *catalog.Registry
	d   *delivery.Deliverer
}

func (rg *rig) build(t *testing.T, w *welcomer) build {
	t.Helper()
	cat, err := example.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	bindings := []catalog.Binding{notifications.Module.Bind(&notifications.Notifier{Mailer: rg.mail}), search.Module.Bind(rg.proj)}
	if w != nil {
		if cat, err = catalog.New(append(cat.Modules(), welcomeModule.Spec())...); err != nil {
			t.Fatal(err)
		}
		bindings = append(bindings, welcomeModule.Bind(w))
	}
	reg, err := catalog.NewRegistry(cat, bindings...)
	if err != nil {
		t.Fatal(err)
	}
	// As the consumer and dlq-repair are wired: the state table's store
	// reads the log, so subscriptions have starts.
	d, err := delivery.New(reg, delivery.Config{Store: rg.claimStore.WithLog(rg.eventsTbl), Effects: rg.effects,
		Logger: obs.NewLogger(rg.logs, "debug"), Metrics: obs.NewMetrics(rg.metrics), Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return build{reg: reg, d: d}
}

// consume delivers tenant's events from..to as the consumer does: each
// delivered, then the batch settled.
func (rg *rig) consume(t *testing.T, b build, tenant string, from, to int64) {
	t.Helper()
	var seqs []int64
	for q := from; q <= to; q++ {
		res, err := b.d.Deliver(context.Background(), rg.event(t, tenant, q))
		if err != nil || res.RetryLater() {
			t.Fatalf("deliver %s/%d: %v %+v", tenant, q, err, res)
		}
		seqs = append(seqs, q)
	}
	if _, err := b.d.Settled(context.Background(), tenant, seqs); err != nil {
		t.Fatal(err)
	}
}

func (rg *rig) repairWith(t *testing.T, b build, req repair.Request) repair.Report {
	t.Helper()
	cfg := rg.cfg
	cfg.Deliverer, cfg.Backfills, cfg.Subscriptions = b.d, rg.claimStore, b.reg
	old := rg.cfg
	rg.cfg = cfg
	defer func() { rg.cfg = old }()
	return rg.run(t, req)
}

func placeN(t *testing.T, rg *rig, tenant string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		rg.place(t, tenant, "c@example.com")
	}
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for q := from; q <= to; q++ {
		out = append(out, q)
	}
	return out
}

func sameSeqs(got, want []int64) bool {
	if len(got) != len(want) {
		return false
	}
	seen := map[int64]int{}
	for _, q := range got {
		seen[q]++
	}
	for _, q := range want {
		if seen[q] != 1 {
			return false
		}
	}
	return true
}

// TestSubscriptionAddedToLiveStack: a stack with history gains a DURABLE
// subscription. Nothing committed before it went live reaches it, neither
// through the consumer nor through dlq-repair's sweep, which leaves nothing
// open; reconcile reports its start. A backfill from seq 5 at 4 events/s,
// cut short by its budget, resumes where it stopped and delivers exactly
// 5..head once, spaced by the rate.
func TestSubscriptionAddedToLiveStack(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	const tenant = "tenant-1"
	v1 := rg.build(t, nil)
	placeN(t, rg, tenant, 12)
	rg.consume(t, v1, tenant, 1, 12)
	// Another tenant's history, none of which reaches the new build: its
	// watermark begins at the start when repair first looks.
	placeN(t, rg, "tenant-2", 3)
	rg.consume(t, v1, "tenant-2", 1, 3)

	w := &welcomer{runs: map[string][]int64{}}
	v2 := rg.build(t, w)
	placeN(t, rg, tenant, 2)
	rg.consume(t, v2, tenant, 13, 14)
	if got := w.seqs(tenant); !sameSeqs(got, []int64{13, 14}) {
		t.Fatalf("after going live: welcome ran for %v, want 13 and 14 only", got)
	}
	marks, err := rg.claimStore.Watermarks(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	if m := marks[welcomeSub]; m.StartSeq != 12 || m.Seq != 14 {
		t.Errorf("welcome's watermark %+v, want begun at 12 and moved to 14", m)
	}

	// dlq-repair's sweep: nothing old is delivered, nothing is left open.
	rep := rg.repairWith(t, v2, repair.Request{Sources: []string{repair.SourceUnsettled, repair.SourceDeadLetters}, UnsettledAfterSeconds: after(0)})
	if rep.Open != 0 || !rep.Complete {
		t.Errorf("repair after the subscription was added: open %d, complete %v; want nothing open", rep.Open, rep.Complete)
	}
	if got := w.seqs(tenant); len(got) != 2 {
		t.Errorf("repair delivered history to the new subscription: %v", got)
	}
	if strings.Contains(rg.metrics.String(), `"`+keys.MetricRepairOpen+`"`) {
		t.Errorf("%s emitted:\n%s", keys.MetricRepairOpen, rg.metrics.String())
	}

	if got := w.seqs("tenant-2"); len(got) != 0 {
		t.Errorf("tenant-2: welcome ran for %v, want nothing", got)
	}
	if marks, err := rg.claimStore.Watermarks(context.Background(), "tenant-2"); err != nil || marks[welcomeSub].StartSeq != 3 || marks[welcomeSub].Seq != 3 {
		t.Errorf("tenant-2: welcome's watermark %+v (%v), want begun at 3 by repair", marks[welcomeSub], err)
	}

	rec := rg.reconciler(t, v2.reg)
	got := rg.delivery(t, rec, tenant, welcomeSub)
	if !strings.HasPrefix(got.Start, "live since ") || got.StartSeq != 12 || got.Watermark != 14 || got.Unsettled != 0 {
		t.Errorf("reconcile: %+v, want live since the build, start seq 12, watermark 14, nothing unsettled", got)
	}

	// The backfill: 4 events/s, a budget of 1 s, so the first run stops
	// short and the second resumes.
	req := repair.Request{Backfill: &repair.BackfillRequest{Subscription: welcomeSub, Tenants: []string{tenant}, From: "5", Rate: 4}}
	rg.cfg.Budget = time.Second
	rep = rg.repairWith(t, v2, req)
	rg.cfg.Budget = 20 * time.Second
	first := rep.Backfill
	if first == nil || first.Done || len(first.Tenants) != 1 || first.Tenants[0].Position < 5 || first.Tenants[0].Position >= 12 || rep.Open != 0 {
		t.Fatalf("first backfill run: %+v (open %d), want it stopped between seq 5 and 12 on its budget", first, rep.Open)
	}
	if p := rg.delivery(t, rec, tenant, welcomeSub).Backfill; p == nil || p.Position != first.Tenants[0].Position || p.Status != keys.BackfillRunning {
		t.Errorf("reconcile during the backfill: %+v, want position %d running", p, first.Tenants[0].Position)
	}
	rep = rg.repairWith(t, v2, req)
	if b := rep.Backfill; b == nil || !b.Done || b.Tenants[0].Position != 12 || b.Tenants[0].Delivered != 8 || b.Tenants[0].From != 5 || b.Tenants[0].To != 12 {
		t.Fatalf("second backfill run: %+v, want done at 12, 8 delivered over both runs, range 5..12", b)
	}
	if got := w.seqs(tenant); !sameSeqs(got, seqRange(5, 14)) {
		t.Errorf("welcome ran for %v, want exactly 5..14 once each", got)
	}
	w.mu.Lock()
	at := append([]time.Time(nil), w.at[2:]...) // the backfill's runs
	w.mu.Unlock()
	if n := len(at); n != 8 {
		t.Fatalf("%d backfill runs, want 8", n)
	}
	// Each run is paced on a grid of 250 ms (each handler run then adds its
	// own latency, so single gaps vary; the span of a run does not).
	cut := int(first.Tenants[0].Position - 4) // the second run's first
	for _, run := range [][]time.Time{at[:cut], at[cut:]} {
		if n := len(run); n > 1 {
			if span, want := run[n-1].Sub(run[0]), time.Duration(n-1)*240*time.Millisecond; span < want {
				t.Errorf("a backfill run delivered %d events in %v, want at least %v at 4 events/s", n, span, want)
			}
			t.Logf("backfill run: %d events in %v at 4 events/s", n, run[n-1].Sub(run[0]))
		}
	}
	if p := rg.delivery(t, rec, tenant, welcomeSub).Backfill; p == nil || p.Status != keys.BackfillDone || p.Position != 12 || p.Delivered != 8 {
		t.Errorf("reconcile after the backfill: %+v, want done at 12 with 8 delivered", p)
	}
	// Done is done: running it again delivers nothing.
	if rep := rg.repairWith(t, v2, req); rep.Backfill == nil || !rep.Backfill.Done || len(w.seqs(tenant)) != 10 {
		t.Errorf("backfill again: %+v, welcome ran %d times; want done and nothing more", rep.Backfill, len(w.seqs(tenant)))
	}
}

// TestBackfillQuarantineAndFailures: a backfill passes over the
// subscription's quarantined events and says so; a handler that fails
// dead-letters that event alone and the backfill goes on; a claim store
// that fails stops the backfill, loudly (open, RepairOpen, a log line),
// and the next run resumes there; a request for no DURABLE subscription is
// refused before anything is read.
func TestBackfillQuarantineAndFailures(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	const tenant = "tenant-q"
	v1 := rg.build(t, nil)
	placeN(t, rg, tenant, 6)
	rg.consume(t, v1, tenant, 1, 6)
	w := &welcomer{runs: map[string][]int64{}, fail: map[int64]bool{4: true}}
	v2 := rg.build(t, w)
	if err := rg.claimStore.Quarantine(context.Background(), delivery.Quarantined{Tenant: tenant, Subscription: welcomeSub,
		EventID: rg.event(t, tenant, 2).ID, Seq: 2, Reason: "mails a customer who asked not to be", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	rg.claims.set(rg.event(t, tenant, 5).ID)
	req := repair.Request{Backfill: &repair.BackfillRequest{Subscription: welcomeSub, Tenants: []string{tenant}, Rate: 1000}}
	rep := rg.repairWith(t, v2, req)
	b := rep.Backfill
	if b == nil || b.Done || rep.Open != 1 || b.Tenants[0].Position != 4 || b.Tenants[0].Skipped != 1 || b.Tenants[0].Dead != 1 ||
		!strings.Contains(b.Tenants[0].Reason, "seq 5: delivery failed on infrastructure") {
		t.Fatalf("backfill with seq 5's claim failing: %+v (open %d), want stopped open at 4 naming seq 5, 1 skipped, 1 dead", b, rep.Open)
	}
	if !strings.Contains(rg.metrics.String(), `"`+keys.MetricRepairOpen+`"`) || !strings.Contains(rg.logs.String(), `"left open"`) ||
		!strings.Contains(rg.logs.String(), "backfill passed over a quarantined event") {
		t.Errorf("the stop and the quarantine are not loud:\n%s", rg.logs.String())
	}
	if got := w.seqs(tenant); !sameSeqs(got, []int64{1, 3}) {
		t.Errorf("welcome ran for %v, want 1 and 3 (2 quarantined, 4 failing, 5 not reached)", got)
	}
	if dls, _, err := rg.claimStore.DeadLetters(context.Background(), tenant, "", 10); err != nil || len(dls) != 1 || dls[0].Seq != 4 || dls[0].Subscription != welcomeSub {
		t.Errorf("dead letters %+v %v, want seq 4 of %s", dls, err, welcomeSub)
	}
	rg.claims.set()
	rep = rg.repairWith(t, v2, req)
	if b := rep.Backfill; b == nil || !b.Done || rep.Open != 0 || b.Tenants[0].Position != 6 {
		t.Fatalf("resumed backfill: %+v (open %d), want done at 6", b, rep.Open)
	}
	if got := w.seqs(tenant); !sameSeqs(got, []int64{1, 3, 5, 6}) {
		t.Errorf("welcome ran for %v, want 1, 3, 5, 6 once each", got)
	}

	r, err := repair.New(func() repair.Config {
		c := rg.cfg
		c.Deliverer, c.Backfills, c.Subscriptions = v2.d, rg.claimStore, v2.reg
		return c
	}())
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []repair.BackfillRequest{
		{Subscription: "notifications.nope"},
		{Subscription: "search.orders"},
		{Subscription: welcomeSub, Rate: 5000},
		{Subscription: welcomeSub, From: "yesterday"},
	} {
		if _, err := r.Handle(context.Background(), repair.Request{Backfill: &bad}); err == nil {
			t.Errorf("backfill %+v accepted, want refused", bad)
		}
	}
}

func (rg *rig) reconciler(t *testing.T, reg *catalog.Registry) *reconcile.Reconciler {
	t.Helper()
	store := rg.claimStore.WithLog(rg.eventsTbl)
	r, err := reconcile.New(reconcile.Config{Log: rg.store, DeadLetters: store, State: reconcile.NewDynamoState(rg.db, rg.stateTbl),
		Watermarks: store, Subscriptions: delivery.DurableSubscriptions(reg.Catalog()), Starts: store, Declared: delivery.DeclaredStarts(reg.Catalog())})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (rg *rig) delivery(t *testing.T, r *reconcile.Reconciler, tenant, sub string) reconcile.SubscriptionDelivery {
	t.Helper()
	res, err := r.Tenant(context.Background(), reconcile.TenantRequest{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	for _, sd := range res.Subscriptions {
		if sd.Subscription == sub {
			return sd
		}
	}
	t.Fatalf("reconcile of %s reports no %s: %+v", tenant, sub, res.Subscriptions)
	return reconcile.SubscriptionDelivery{}
}
