package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// TestDeliveryAudit: reconcile reports, next to last_seq, each DURABLE
// subscription's watermark, how many events are above it and since when,
// and emits the per-subscription metrics the stalled-watermark alarm
// watches (0 once settled, so the alarm returns to OK).
func TestDeliveryAudit(t *testing.T) {
	db := localaws.DynamoDB(t)
	events := aws.ToString(localaws.CreateTable(t, db, eventstore.TableSchema(localaws.UniqueName(t, "events"))).TableName)
	state := aws.ToString(localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "state"))).TableName)
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	emitAt := t0
	store, err := eventstore.New(db, eventstore.Config{Table: events, Catalog: testCatalog{}, Now: func() time.Time { return emitAt }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := tenancy.MustWithTenant(context.Background(), "t1")
	var evs []envelope.Envelope
	for i := range 5 {
		emitAt = t0.Add(time.Duration(i) * time.Minute)
		e, err := store.Emit(ctx, "order.placed", map[string]any{"order_id": "o", "n": i})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	marks := delivery.NewDynamoStore(db, state)
	emf := &bytes.Buffer{}
	now := t0.Add(30 * time.Minute)
	r, err := reconcile.New(reconcile.Config{Log: store, DeadLetters: marks, State: reconcile.NewDynamoState(db, state),
		Watermarks: marks, Subscriptions: []string{"s.email", "s.search"},
		Logger: obs.NewLogger(&bytes.Buffer{}, "error"), Metrics: obs.NewMetrics(emf), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	// s.email settled 1..2 (3 lost, 4 and 5 settled after the gap); s.search
	// settled everything.
	for _, a := range []struct {
		sub      string
		from, to int64
	}{{"s.email", 1, 2}, {"s.email", 4, 5}, {"s.search", 1, 5}} {
		if _, err := marks.Advance(context.Background(), "t1", a.sub, a.from, a.to, t0.Add(10*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := r.Tenant(context.Background(), reconcile.TenantRequest{Tenant: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []reconcile.SubscriptionDelivery{
		{Subscription: "s.email", Watermark: 2, Unsettled: 3, OldestUnsettledSeq: 3, OldestUnsettledAt: evs[2].OccurredAt,
			UnsettledAgeSeconds: 28 * 60, WatermarkUpdatedAt: envelope.FormatTime(t0.Add(10 * time.Minute)), Checkpoint: 2},
		{Subscription: "s.search", Watermark: 5, WatermarkUpdatedAt: envelope.FormatTime(t0.Add(10 * time.Minute)), Checkpoint: 5},
	}
	if res.LastSeq != 5 || len(res.Subscriptions) != 2 || res.Subscriptions[0] != want[0] || res.Subscriptions[1] != want[1] {
		t.Errorf("report: last_seq %d, subscriptions %+v\nwant 5, %+v", res.LastSeq, res.Subscriptions, want)
	}
	b, _ := json.Marshal(res)
	for _, k := range []string{`"subscriptions":[`, `"watermark":2`, `"unsettled":3`, `"oldest_unsettled_seq":3`, `"unsettled_age_s":1680`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON lacks %s: %s", k, b)
		}
	}
	metrics := emf.String()
	for _, k := range []string{`"Subscription":"s.email"`, `"` + keys.MetricUnsettledAge + `":1680`, `"` + keys.MetricUnsettledEvents + `":3`, `"Subscription":"s.search"`, `"` + keys.MetricUnsettledAge + `":0`} {
		if !strings.Contains(metrics, k) {
			t.Errorf("metrics lack %s:\n%s", k, metrics)
		}
	}

	// A tenant nobody has delivered: every event is unsettled, since seq 1.
	if _, err := store.Emit(tenancy.MustWithTenant(context.Background(), "t2"), "order.placed", map[string]any{"order_id": "o"}); err != nil {
		t.Fatal(err)
	}
	res, err = r.Tenant(context.Background(), reconcile.TenantRequest{Tenant: "t2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, sd := range res.Subscriptions {
		if sd.Watermark != 0 || sd.Unsettled != 1 || sd.OldestUnsettledSeq != 1 || sd.WatermarkUpdatedAt != "" {
			t.Errorf("t2 %s: %+v, want watermark 0, 1 unsettled since seq 1, never moved", sd.Subscription, sd)
		}
	}
}

// TestDeliveryAuditOff: without watermarks configured the report has no
// subscriptions (and the JSON no key).
func TestDeliveryAuditOff(t *testing.T) {
	e := newEnv(t, nil)
	e.emit(t, "t1", 1)
	body := e.get(t, "tenant=t1")
	if _, ok := body["subscriptions"]; ok {
		t.Errorf("subscriptions present without a watermark store: %v", body)
	}
}

// TestDeliveryAuditEffectsUnknown: a dead letter parked because an
// AtMostOnce effect's outcome is unknown is counted for its subscription
// (effects_unknown), apart from other dead letters, and the metric its alarm
// watches says so on every walk until it is resolved.
func TestDeliveryAuditEffectsUnknown(t *testing.T) {
	db := localaws.DynamoDB(t)
	events := aws.ToString(localaws.CreateTable(t, db, eventstore.TableSchema(localaws.UniqueName(t, "events"))).TableName)
	state := aws.ToString(localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "state"))).TableName)
	store, err := eventstore.New(db, eventstore.Config{Table: events, Catalog: testCatalog{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := tenancy.MustWithTenant(context.Background(), "t1")
	claims := delivery.NewDynamoStore(db, state)
	now := time.Now()
	for i, sub := range []string{"s.email", "s.search"} {
		e, err := store.Emit(ctx, "order.placed", map[string]any{"order_id": "o", "n": i})
		if err != nil {
			t.Fatal(err)
		}
		k := delivery.Key{EventID: e.ID, Subscription: sub}
		if c, err := claims.Claim(ctx, delivery.ClaimRequest{Key: k, Tenant: "t1", Type: e.Type, Seq: e.Seq, SchemaVersion: 1, Token: "d",
			Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil || !c.Acquired {
			t.Fatal(c, err)
		}
		dl := delivery.DeadLetter{Tenant: "t1", EventID: e.ID, Subscription: sub, Type: e.Type, Seq: e.Seq, SchemaVersion: 1, Error: "boom", DeadAt: now}
		if sub == "s.email" {
			dl.Effect = e.ID + ":s.email:email"
		}
		if err := claims.Kill(ctx, k, "d", dl, false); err != nil {
			t.Fatal(err)
		}
	}
	emf := &bytes.Buffer{}
	r, err := reconcile.New(reconcile.Config{Log: store, DeadLetters: claims, State: reconcile.NewDynamoState(db, state),
		Watermarks: claims, Subscriptions: []string{"s.email", "s.search"},
		Logger: obs.NewLogger(&bytes.Buffer{}, "error"), Metrics: obs.NewMetrics(emf)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Tenant(context.Background(), reconcile.TenantRequest{Tenant: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.DeadLetterCount != 2 || len(res.Subscriptions) != 2 || res.Subscriptions[0].EffectsUnknown != 1 || res.Subscriptions[1].EffectsUnknown != 0 {
		t.Fatalf("report: %d dead letters, subscriptions %+v; want 2, s.email with 1 effect unknown, s.search none", res.DeadLetterCount, res.Subscriptions)
	}
	if b, _ := json.Marshal(res); !strings.Contains(string(b), `"effects_unknown":1`) {
		t.Errorf("JSON lacks effects_unknown: %s", b)
	}
	if m := emf.String(); !strings.Contains(m, `"`+keys.MetricUnknownEffectsOpen+`":1`) {
		t.Errorf("no %s of 1:\n%s", keys.MetricUnknownEffectsOpen, m)
	}
	ds, _, err := claims.DeadLetters(context.Background(), "t1", "", 10)
	if err != nil || len(ds) != 2 {
		t.Fatal(ds, err)
	}
	for _, d := range ds {
		if want := d.Subscription == "s.email"; (d.Effect != "") != want {
			t.Errorf("dead letter %s read back with effect %q", d.Subscription, d.Effect)
		}
	}
}

type carryRecv struct{}

func (carryRecv) handle(context.Context, envelope.Envelope) error { return nil }

type carryPayload struct {
	OrderID string `json:"order_id"`
	N       int    `json:"n"`
}

var carryModule = catalog.Module[carryRecv]{
	Name: "order",
	Emits: []catalog.EventType{{Name: "order.placed", Versions: []catalog.Version{catalog.V[carryPayload](1)}},
		{Name: "order.cancelled", Versions: []catalog.Version{catalog.V[carryPayload](1)}}},
	Subscribes: []catalog.Subscription[carryRecv]{
		{Name: "order.email", Types: "order.*", Lane: catalog.Durable, Reads: []int{1}, Handler: carryRecv.handle},
		{Name: "order.audit", Types: "order.cancelled", Lane: catalog.Durable, Reads: []int{1}, Handler: carryRecv.handle},
	},
}

// TestDeliveryAuditCarriesCheckpoint: the consumer writes no watermark;
// the audit derives each from its checkpoint and the claims after it
// (stopping at an event not delivered, passing events not routed to the
// subscription), reports it, and writes the checkpoint forward.
func TestDeliveryAuditCarriesCheckpoint(t *testing.T) {
	db := localaws.DynamoDB(t)
	events := aws.ToString(localaws.CreateTable(t, db, eventstore.TableSchema(localaws.UniqueName(t, "events"))).TableName)
	state := aws.ToString(localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "state"))).TableName)
	store, err := eventstore.New(db, eventstore.Config{Table: events, Catalog: testCatalog{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := tenancy.MustWithTenant(context.Background(), "t1")
	var evs []envelope.Envelope
	for i := range 5 {
		e, err := store.Emit(ctx, "order.placed", map[string]any{"order_id": "o", "n": i})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	cat, err := catalog.New(carryModule.Spec())
	if err != nil {
		t.Fatal(err)
	}
	claims := delivery.NewDynamoStore(db, state).WithLog(events)
	carry, err := delivery.NewWatermarkReader(claims, cat)
	if err != nil {
		t.Fatal(err)
	}
	complete := func(seq int) {
		t.Helper()
		e := evs[seq-1]
		k := delivery.Key{EventID: e.ID, Subscription: "order.email"}
		now := time.Now()
		if c, err := claims.Claim(context.Background(), delivery.ClaimRequest{Key: k, Tenant: "t1", Type: e.Type, Seq: e.Seq, SchemaVersion: 1, Token: "d",
			Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil || !c.Acquired {
			t.Fatal(c, err)
		}
		if err := claims.Complete(context.Background(), k, "d", now, now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	for _, seq := range []int{1, 2, 4, 5} { // 3 not delivered
		complete(seq)
	}
	r, err := reconcile.New(reconcile.Config{Log: store, DeadLetters: claims, State: reconcile.NewDynamoState(db, state),
		Watermarks: claims, Carry: carry, Subscriptions: delivery.DurableSubscriptions(cat),
		Logger: obs.NewLogger(&bytes.Buffer{}, "error"), Metrics: obs.NewMetrics(&bytes.Buffer{})})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, want map[string][2]int64, rows map[string]int64) {
		t.Helper()
		res, err := r.Tenant(context.Background(), reconcile.TenantRequest{Tenant: "t1"})
		if err != nil {
			t.Fatal(err)
		}
		for _, sd := range res.Subscriptions {
			if w := want[sd.Subscription]; sd.Watermark != w[0] || sd.Checkpoint != w[1] || sd.Unsettled != 5-w[0] || sd.WatermarkPartial {
				t.Errorf("%s: %s watermark %d (checkpoint %d, unsettled %d), want %d (checkpoint %d)", what, sd.Subscription, sd.Watermark, sd.Checkpoint, sd.Unsettled, w[0], w[1])
			}
		}
		got, err := claims.Watermarks(context.Background(), "t1")
		if err != nil {
			t.Fatal(err)
		}
		for sub, seq := range rows {
			if got[sub].Seq != seq {
				t.Errorf("%s: %s checkpoint row at %d, want %d", what, sub, got[sub].Seq, seq)
			}
		}
	}
	check("3 not delivered", map[string][2]int64{"order.email": {2, 0}, "order.audit": {5, 0}}, map[string]int64{"order.email": 2, "order.audit": 5})
	complete(3)
	check("3 delivered", map[string][2]int64{"order.email": {5, 2}, "order.audit": {5, 5}}, map[string]int64{"order.email": 5, "order.audit": 5})
}
