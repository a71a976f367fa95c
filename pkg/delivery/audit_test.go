package delivery_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/obs/obstest"
)

// TestWatermarkAdvance is the watermark's contract, on the project's own
// DynamoDB and on the fake: it moves over a run a..b only from a-1..b-1,
// never past a gap and never back.
func TestWatermarkAdvance(t *testing.T) {
	raw := localaws.DynamoDB(t)
	desc := localaws.CreateTable(t, raw, delivery.StateTableSchema(localaws.UniqueName(t, "state")))
	for name, ws := range map[string]delivery.WatermarkStore{
		"dynamodb": delivery.NewDynamoStore(raw, aws.ToString(desc.TableName)),
		"memory":   delivery.NewMemoryStore(),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
			steps := []struct {
				from, to int64
				moved    bool
				want     int64
			}{
				{1, 3, true, 3},  // absent is 0: 1..3 follows it
				{5, 6, false, 3}, // 4 is missing: a gap is never passed
				{4, 4, true, 4},
				{3, 5, true, 5},  // overlapping runs are fine
				{1, 2, false, 5}, // never back
				{5, 5, false, 5}, // already there
				{6, 7, true, 7},
			}
			for i, st := range steps {
				moved, err := ws.Advance(ctx, "t1", "s.a", st.from, st.to, now.Add(time.Duration(i)*time.Second))
				if err != nil {
					t.Fatal(err)
				}
				ms, err := ws.Watermarks(ctx, "t1")
				if err != nil {
					t.Fatal(err)
				}
				if moved != st.moved || ms["s.a"].Seq != st.want {
					t.Errorf("step %d: Advance(%d..%d) moved=%v watermark=%d, want moved=%v watermark=%d", i, st.from, st.to, moved, ms["s.a"].Seq, st.moved, st.want)
				}
			}
			ms, _ := ws.Watermarks(ctx, "t1")
			if w := ms["s.a"]; w.Tenant != "t1" || w.Subscription != "s.a" || !w.UpdatedAt.Equal(now.Add(6*time.Second)) {
				t.Errorf("watermark row %+v, want tenant t1, subscription s.a, moved at the last advance", w)
			}
			if ms, _ := ws.Watermarks(ctx, "t2"); len(ms) != 0 {
				t.Errorf("tenant t2 has watermarks %v, want none", ms)
			}
			if _, err := ws.Advance(ctx, "t1", "s.a", 0, 1, now); err == nil {
				t.Error("Advance from seq 0: no error")
			}
		})
	}
}

// TestSettledMovesEverySubscriptionOverRuns: Settled moves each DURABLE
// subscription of the catalog, one write per run, and stops at a gap that a
// later Settled (dlq-repair's) closes.
func TestSettledMovesEverySubscriptionOverRuns(t *testing.T) {
	rg := newBatchRig(t)
	ctx := context.Background()
	if got := rg.d.Subscriptions(); strings.Join(got, ",") != "batchtest.a,batchtest.b,batchtest.c" {
		t.Fatalf("Subscriptions() = %v", got)
	}
	check := func(what string, want int64) {
		t.Helper()
		ms, err := rg.d.Watermarks(ctx, "t1")
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != batchSubs {
			t.Fatalf("%s: %d watermarks, want %d", what, len(ms), batchSubs)
		}
		for sub, w := range ms {
			if w.Seq != want {
				t.Errorf("%s: %s at %d, want %d", what, sub, w.Seq, want)
			}
		}
	}
	check("before any delivery", 0)
	if _, err := rg.d.Settled(ctx, "t1", []int64{3, 1, 2}); err != nil {
		t.Fatal(err)
	}
	check("after 1..3", 3)
	rg.db.reset()
	if _, err := rg.d.Settled(ctx, "t1", []int64{5, 6, 8}); err != nil { // 4 and 7 lost
		t.Fatal(err)
	}
	check("after 5, 6, 8 (4 lost)", 3)
	if reqs, _, _, _, _ := rg.db.snapshot(); reqs["UpdateItem"] != 2*batchSubs {
		t.Errorf("%d watermark writes for two runs, want %d (one per run and subscription)", reqs["UpdateItem"], 2*batchSubs)
	}
	if _, err := rg.d.Settled(ctx, "t1", []int64{4}); err != nil {
		t.Fatal(err)
	}
	check("after 4 (5, 6 settled earlier, not known here)", 4)
	if _, err := rg.d.Settled(ctx, "t1", []int64{5, 6, 7, 8}); err != nil { // dlq-repair's sweep
		t.Fatal(err)
	}
	check("after the sweep 5..8", 8)
}

// TestWatermarkCost measures what the watermark adds to delivering a batch
// of 10 events of one tenant to 3 DURABLE subscriptions: one write per
// subscription for the batch.
func TestWatermarkCost(t *testing.T) {
	rg := newBatchRig(t)
	envs := batchEvents(t, 10)
	ctx := context.Background()
	p, _, err := rg.d.Prefetch(ctx, envs)
	if err != nil {
		t.Fatal(err)
	}
	rg.db.reset()
	deliverAll(t, ctx, rg.d, p, envs)
	_, claimWrites, _, _, claimWCU := rg.db.snapshot()
	rg.db.reset()
	seqs := make([]int64, len(envs))
	for i, e := range envs {
		seqs[i] = e.Seq
	}
	moved, err := rg.d.Settled(context.Background(), "t1", seqs)
	if err != nil {
		t.Fatal(err)
	}
	_, markWrites, _, _, markWCU := rg.db.snapshot()
	if len(moved) != batchSubs || markWrites != batchSubs {
		t.Errorf("watermark writes %d (moved %v), want %d: one per subscription per batch", markWrites, moved, batchSubs)
	}
	t.Logf("10 events x %d subscriptions: claims+completions %d writes (%.0f WCU); watermarks %d writes (%.0f WCU) = %.2f writes per delivered event, %.2f per (event, subscription)",
		batchSubs, claimWrites, claimWCU, markWrites, markWCU, float64(markWrites)/float64(len(envs)), float64(markWrites)/float64(len(envs)*batchSubs))
}

// logRig is a Deliverer that checks envelopes against a real events table.
type logRig struct {
	*batchRig
	events  string
	metrics *obstest.Buffer
	logged  []envelope.Envelope
}

func newLogRig(t *testing.T, check bool) *logRig {
	t.Helper()
	rg := &logRig{batchRig: newBatchRig(t), metrics: &obstest.Buffer{}}
	raw := localaws.DynamoDB(t)
	desc := localaws.CreateTable(t, raw, eventstore.TableSchema(localaws.UniqueName(t, "events")))
	rg.events = aws.ToString(desc.TableName)
	// Ten events of t1, sealed in a chain and stored as the log stores them.
	prev := chain.Genesis("t1")
	for _, e := range batchEvents(t, 10) {
		e.PrevHash = prev
		if err := chain.Seal(&e); err != nil {
			t.Fatal(err)
		}
		it, err := e.ToItem()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(rg.events), Item: it}); err != nil {
			t.Fatal(err)
		}
		rg.logged = append(rg.logged, e)
		prev = e.Hash
	}
	claims := delivery.NewDynamoStore(rg.db, rg.table)
	if check {
		claims = claims.WithLog(rg.events)
	}
	store, err := delivery.NewBatchedStore(claims)
	if err != nil {
		t.Fatal(err)
	}
	cfg := delivery.Config{Store: store, Logger: obs.NewLogger(io.Discard, "error"), Metrics: obs.NewMetrics(rg.metrics), Backoff: time.Millisecond}
	if check {
		cfg.Log = claims
	}
	cat, _ := catalog.New(batchModule.Spec())
	reg, err := catalog.NewRegistry(cat, batchModule.Bind(rg.recv))
	if err != nil {
		t.Fatal(err)
	}
	if rg.d, err = delivery.New(reg, cfg); err != nil {
		t.Fatal(err)
	}
	return rg
}

// forged returns envelopes that are hash-intact on their own but not the
// log's: one at a seq the log does not have, one with the log's id and seq
// but another payload, one with another id at a logged seq.
func forged(t *testing.T, rg *logRig) map[string]envelope.Envelope {
	t.Helper()
	seq999 := batchEvents(t, 1)[0]
	seq999.Seq, seq999.PrevHash = 999, rg.logged[9].Hash
	other := rg.logged[3]
	p, err := envelope.NormalizePayload(btPayload{N: 42})
	if err != nil {
		t.Fatal(err)
	}
	other.Payload = p
	otherID := rg.logged[4]
	id, _ := envelope.NewID()
	otherID.ID = id
	out := map[string]envelope.Envelope{"seq 999": seq999, "another payload": other, "another id": otherID}
	for k, e := range out {
		if err := chain.Seal(&e); err != nil {
			t.Fatal(err)
		}
		if h, _ := chain.Hash(&e); h != e.Hash {
			t.Fatalf("%s: not hash-intact", k)
		}
		out[k] = e
	}
	return out
}

// TestNotInLogIsNeverDelivered: an envelope that is not the log's event at
// its seq is refused before any claim or handler, with the prefetch and
// without it (a strongly consistent read then decides), and counted.
func TestNotInLogIsNeverDelivered(t *testing.T) {
	for _, prefetch := range []bool{true, false} {
		t.Run(map[bool]string{true: "prefetched", false: "not prefetched"}[prefetch], func(t *testing.T) {
			rg := newLogRig(t, true)
			bad := forged(t, rg)
			all := append([]envelope.Envelope{}, rg.logged...)
			for _, e := range bad {
				all = append(all, e)
			}
			ctx := context.Background()
			var p *delivery.Prefetched
			if prefetch {
				var st delivery.PrefetchStats
				var err error
				p, st, err = rg.d.Prefetch(ctx, all)
				if err != nil {
					t.Fatal(err)
				}
				if st.Events != len(all) || st.Logged != 10 {
					t.Errorf("prefetch read %d event rows and found %d, want %d and 10", st.Events, st.Logged, len(all))
				}
			}
			for _, e := range rg.logged {
				res, err := rg.d.DeliverWith(ctx, e, p)
				if err != nil || res.Count(delivery.Completed) != batchSubs {
					t.Fatalf("logged seq %d: %v, %v; want completed", e.Seq, err, outcomes(res))
				}
			}
			runs := rg.recv.total()
			for name, e := range bad {
				res, err := rg.d.DeliverWith(ctx, e, p)
				var nle *delivery.NotInLogError
				if !errors.Is(err, delivery.ErrNotInLog) || !errors.As(err, &nle) || nle.Seq != e.Seq || nle.Tenant != "t1" {
					t.Errorf("%s: Deliver = %v, want a NotInLogError naming t1 seq %d", name, err, e.Seq)
				}
				if len(res.Subscriptions) != 0 {
					t.Errorf("%s: subscriptions %v, want none attempted", name, outcomes(res))
				}
				for _, sub := range rg.d.Subscriptions() {
					if _, ok, _ := delivery.NewDynamoStore(rg.db, rg.table).Get(context.Background(), delivery.Key{EventID: e.ID, Subscription: sub}); ok && e.ID != rg.logged[3].ID {
						t.Errorf("%s: a claim of %s exists", name, sub)
					}
				}
			}
			if got := rg.recv.total(); got != runs {
				t.Errorf("handlers ran %d more times for envelopes not in the log, want 0", got-runs)
			}
			if n := strings.Count(rg.metrics.String(), `"`+keys.MetricNotInLog+`"`); n < len(bad) {
				t.Errorf("%s counted %d times, want %d", keys.MetricNotInLog, n, len(bad))
			}
		})
	}
}

// TestInLogCheckCost measures what the in-log check adds to a batch's
// prefetch: the same BatchGetItem request reads the event rows with the
// claims (10 events x 3 subscriptions: 30 claim keys, plus 10 event keys).
func TestInLogCheckCost(t *testing.T) {
	measure := func(check bool) (map[string]int, int, float64) {
		rg := newLogRig(t, check)
		ctx := context.Background()
		// A Deliverer reads (or records) each subscription's start, and
		// where each tenant's watermark began, once: not part of a batch's
		// cost.
		for _, sub := range rg.d.Subscriptions() {
			if _, err := rg.d.TenantStart(ctx, sub, rg.logged[0]); err != nil {
				t.Fatal(err)
			}
		}
		rg.db.reset()
		p, _, err := rg.d.Prefetch(ctx, rg.logged)
		if err != nil {
			t.Fatal(err)
		}
		pre, _, _, keysRead, rcu := rg.db.snapshot()
		deliverAll(t, ctx, rg.d, p, rg.logged)
		all, _, _, _, _ := rg.db.snapshot()
		if all["GetItem"] != 0 {
			t.Errorf("check=%v: %d GetItem during delivery, want 0 (every row came with the prefetch)", check, all["GetItem"])
		}
		return pre, keysRead, rcu
	}
	offReq, offKeys, offRCU := measure(false)
	onReq, onKeys, onRCU := measure(true)
	if offReq["BatchGetItem"] != 1 || onReq["BatchGetItem"] != 1 {
		t.Errorf("BatchGetItem requests: %d without the check, %d with it; want 1 each", offReq["BatchGetItem"], onReq["BatchGetItem"])
	}
	if onKeys-offKeys != 10 {
		t.Errorf("keys read: %d without, %d with; want 10 more (one per event)", offKeys, onKeys)
	}
	t.Logf("prefetch of 10 events x %d subscriptions: without the in-log check %d request, %d keys, %.1f RCU; with it %d request, %d keys, %.1f RCU (+%.1f RCU per batch, +%.2f per event; eventually consistent reads of rows under 4 KB)",
		batchSubs, offReq["BatchGetItem"], offKeys, offRCU, onReq["BatchGetItem"], onKeys, onRCU, onRCU-offRCU, (onRCU-offRCU)/10)
}

func (r *btRecv) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.runs {
		n += v
	}
	return n
}
