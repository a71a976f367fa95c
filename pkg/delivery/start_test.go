package delivery_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// startLog writes n sealed events of tenant t1 into a new events table,
// event i occurring at t0 + i minutes, skipping the seqs in missing, and
// the head; it returns a state-table store that reads that log.
func startLog(t *testing.T, n int, t0 time.Time, missing ...int64) (*delivery.DynamoStore, []envelope.Envelope) {
	t.Helper()
	raw := localaws.DynamoDB(t)
	events := aws.ToString(localaws.CreateTable(t, raw, eventstore.TableSchema(localaws.UniqueName(t, "events"))).TableName)
	state := aws.ToString(localaws.CreateTable(t, raw, delivery.StateTableSchema(localaws.UniqueName(t, "state"))).TableName)
	prev := chain.Genesis("t1")
	var out []envelope.Envelope
	for _, e := range batchEvents(t, n) {
		e.OccurredAt = envelope.FormatTime(t0.Add(time.Duration(e.Seq) * time.Minute))
		e.PrevHash = prev
		if err := chain.Seal(&e); err != nil {
			t.Fatal(err)
		}
		prev = e.Hash
		out = append(out, e)
		skip := false
		for _, m := range missing {
			skip = skip || m == e.Seq
		}
		if skip {
			continue
		}
		it, err := e.ToItem()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(events), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	head := map[string]types.AttributeValue{keys.AttrTenant: &types.AttributeValueMemberS{Value: "t1"}, keys.AttrSeq: &types.AttributeValueMemberN{Value: "0"},
		keys.AttrKind: &types.AttributeValueMemberS{Value: keys.KindHead}, keys.AttrLastSeq: &types.AttributeValueMemberN{Value: strconv.Itoa(n)},
		keys.AttrLastHash: &types.AttributeValueMemberS{Value: prev}}
	if _, err := raw.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(events), Item: head}); err != nil {
		t.Fatal(err)
	}
	return delivery.NewDynamoStore(raw, state).WithLog(events), out
}

// TestResolveStart: the seq a tenant's watermark begins at, per kind of
// start, found in the log (a binary search by occurred_at for a time).
func TestResolveStart(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	store, _ := startLog(t, 10, t0)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		st   delivery.SubStart
		want int64
	}{
		{"live, between seq 4 and 5", delivery.SubStart{StartedAt: t0.Add(4*time.Minute + 30*time.Second)}, 4},
		{"live before every event", delivery.SubStart{StartedAt: t0}, 0},
		{"live after every event", delivery.SubStart{StartedAt: t0.Add(time.Hour)}, 10},
		{"a time at seq 4's occurred_at delivers seq 4", delivery.SubStart{Declared: catalog.FromTime(t0.Add(4 * time.Minute))}, 3},
		{"seq 5", delivery.SubStart{Declared: catalog.FromSeq(5)}, 4},
		{"a seq beyond the head", delivery.SubStart{Declared: catalog.FromSeq(50)}, 10},
		{"all", delivery.SubStart{Declared: catalog.FromAll()}, 0},
		{"existing", delivery.SubStart{Existing: true, StartedAt: t0.Add(time.Hour)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := delivery.ResolveStart(ctx, store, "t1", tc.st)
			if err != nil || got != tc.want {
				t.Errorf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	if got, err := delivery.ResolveStart(ctx, store, "nobody", delivery.SubStart{StartedAt: t0}); err != nil || got != 0 {
		t.Errorf("a tenant without events: %d, %v; want 0", got, err)
	}

	gappy, _ := startLog(t, 10, t0, 5)
	if _, err := delivery.ResolveStart(ctx, gappy, "t1", delivery.SubStart{StartedAt: t0.Add(time.Hour)}); err == nil || !strings.Contains(err.Error(), "no seq 5") || !strings.Contains(err.Error(), "reconcile") {
		t.Errorf("a log missing seq 5: %v, want an error naming seq 5 and reconcile", err)
	}
	noLog := delivery.NewDynamoStore(localaws.DynamoDB(t), "state")
	if _, err := delivery.ResolveStart(ctx, noLog, "t1", delivery.SubStart{StartedAt: t0}); !errors.Is(err, delivery.ErrNoHistory) {
		t.Errorf("a store without the log: %v, want ErrNoHistory", err)
	}
}

// TestBeginSubscriptionAgrees: concurrent first sights of a subscription,
// each with its own moment, all answer the one that was recorded; on our
// DynamoDB and on the fake.
func TestBeginSubscriptionAgrees(t *testing.T) {
	store, _ := startLog(t, 1, time.Now())
	for name, ss := range map[string]delivery.StartStore{"dynamodb": store, "memory": delivery.NewMemoryStore()} {
		t.Run(name, func(t *testing.T) {
			base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
			got := make([]delivery.SubStart, 8)
			var wg sync.WaitGroup
			for i := range got {
				wg.Add(1)
				go func() {
					defer wg.Done()
					st, err := ss.BeginSubscription(context.Background(), delivery.SubStart{Subscription: "s.new", StartedAt: base.Add(time.Duration(i) * time.Second)})
					if err != nil {
						t.Error(err)
					}
					got[i] = st
				}()
			}
			wg.Wait()
			for _, st := range got[1:] {
				if !st.StartedAt.Equal(got[0].StartedAt) {
					t.Fatalf("starts disagree: %v", got)
				}
			}
			rec, ok, err := ss.SubscriptionStart(context.Background(), "s.new")
			if err != nil || !ok || !rec.StartedAt.Equal(got[0].StartedAt) {
				t.Errorf("recorded %+v %v %v, want %v", rec, ok, err, got[0].StartedAt)
			}
		})
	}
}

// TestDeliverHonoursStart: a Deliverer over the log delivers to a new
// subscription only what follows its start (it went live when the
// Deliverer was made, or at the first event handed to it if earlier),
// answers BeforeStart (counted) for the rest, and begins the tenant's
// watermark at the start; a
// subscription whose watermark of the tenant existed before starts were
// recorded keeps all history; DeliverTo (a backfill) delivers history.
func TestDeliverHonoursStart(t *testing.T) {
	t0 := time.Now().Add(-time.Hour)
	store, evs := startLog(t, 6, t0)
	ctx := context.Background()
	// batchtest.a delivered seqs 1..2 before this version: its watermark exists.
	if _, err := store.Advance(ctx, "t1", "batchtest.a", 1, 2, t0); err != nil {
		t.Fatal(err)
	}
	recv := &btRecv{runs: map[string]int{}, fail: map[string]bool{}}
	mod := batchModule
	mod.Subscribes = append([]catalog.Subscription[*btRecv](nil), batchModule.Subscribes...)
	mod.Subscribes[2].Start = catalog.FromSeq(5) // batchtest.c
	cat, err := catalog.New(mod.Spec())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := catalog.NewRegistry(cat, mod.Bind(recv))
	if err != nil {
		t.Fatal(err)
	}
	var metrics strings.Builder
	d, err := delivery.New(reg, delivery.Config{Store: store, Logger: obs.NewLogger(io.Discard, "error"), Metrics: obs.NewMetrics(&metrics), Backoff: time.Millisecond,
		Now: func() time.Time { return t0.Add(4*time.Minute + 30*time.Second) }}) // went live between seq 4 and 5
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]map[string]delivery.Outcome{}
	// Seq 5 comes first; 3 and 4 come after it (a redrive of old messages).
	for _, e := range []envelope.Envelope{evs[4], evs[5], evs[2], evs[3]} {
		res, err := d.Deliver(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		want[e.Seq] = map[string]delivery.Outcome{}
		for _, sr := range res.Subscriptions {
			want[e.Seq][sr.Subscription] = sr.Outcome
		}
	}
	for seq, subs := range want {
		exp := map[string]delivery.Outcome{"batchtest.a": delivery.Completed, "batchtest.b": delivery.Completed, "batchtest.c": delivery.Completed}
		if seq < 5 {
			exp["batchtest.b"], exp["batchtest.c"] = delivery.BeforeStart, delivery.BeforeStart
		}
		for sub, o := range exp {
			if subs[sub] != o {
				t.Errorf("seq %d %s: %s, want %s", seq, sub, subs[sub], o)
			}
		}
	}
	if !strings.Contains(metrics.String(), `"`+keys.MetricBeforeStart+`"`) {
		t.Errorf("%s not counted", keys.MetricBeforeStart)
	}
	if _, err := d.Settled(ctx, "t1", []int64{3, 4, 5, 6}); err != nil {
		t.Fatal(err)
	}
	marks, err := d.Watermarks(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	for sub, w := range map[string][2]int64{"batchtest.a": {0, 6}, "batchtest.b": {4, 6}, "batchtest.c": {4, 6}} {
		if marks[sub].StartSeq != w[0] || marks[sub].Seq != w[1] {
			t.Errorf("%s watermark %+v, want begun at %d, at %d", sub, marks[sub], w[0], w[1])
		}
	}
	for sub, wantSt := range map[string]string{"batchtest.a": keys.StartExisting, "batchtest.c": "seq:5"} {
		if st, err := d.Start(ctx, sub, "t1"); err != nil || st.String() != wantSt {
			t.Errorf("%s start %q %v, want %q", sub, st.String(), err, wantSt)
		}
	}
	sr, err := d.DeliverTo(ctx, evs[0], "batchtest.b")
	if err != nil || sr.Outcome != delivery.Completed {
		t.Errorf("DeliverTo seq 1: %+v %v, want completed", sr, err)
	}
	if sr, err := d.DeliverTo(ctx, evs[0], "batchtest.b"); err != nil || sr.Outcome != delivery.AlreadyCompleted {
		t.Errorf("DeliverTo seq 1 again: %+v %v, want already completed", sr, err)
	}
	if _, err := d.DeliverTo(ctx, evs[0], "batchtest.nope"); !errors.Is(err, delivery.ErrUnknownSubscription) {
		t.Errorf("DeliverTo an unknown subscription: %v, want ErrUnknownSubscription", err)
	}
}
