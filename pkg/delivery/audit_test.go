package delivery_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
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
	rg.putHead(t, raw, 10, prev)
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

// putHead writes t1's head row as the log does: covering seqs 1..last.
func (rg *logRig) putHead(t *testing.T, db *dynamodb.Client, last int64, hash string) {
	t.Helper()
	if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(rg.events), Item: map[string]types.AttributeValue{
		keys.AttrTenant:   &types.AttributeValueMemberS{Value: "t1"},
		keys.AttrSeq:      &types.AttributeValueMemberN{Value: strconv.Itoa(keys.HeadSeq)},
		keys.AttrKind:     &types.AttributeValueMemberS{Value: keys.KindHead},
		keys.AttrLastSeq:  &types.AttributeValueMemberN{Value: strconv.FormatInt(last, 10)},
		keys.AttrLastHash: &types.AttributeValueMemberS{Value: hash},
	}}); err != nil {
		t.Fatal(err)
	}
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
				// Seqs 1..10, 998 and 999 (the forgery at 999 and the row
				// before it) and the head: 13 rows, 11 found.
				if st.Events != 13 || st.Logged != 11 {
					t.Errorf("prefetch read %d rows of the log and found %d, want 13 and 11", st.Events, st.Logged)
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

// TestInLogCheckCost measures what the in-log and coverage checks add to a
// batch's prefetch: the same BatchGetItem request reads the event rows, the
// rows before them and the head with the claims (10 events x 3
// subscriptions: 30 claim keys, plus 10 event keys and 1 head key).
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
	if onKeys-offKeys != 11 {
		t.Errorf("keys read: %d without, %d with; want 11 more (one per event, and the tenant's head; each event's predecessor is in the batch)", offKeys, onKeys)
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

// TestPlantedRowIsNeverDelivered: rows in the log that its chain does not
// cover are refused before any claim or handler, with the prefetch and
// without it (strongly consistent reads then decide), and counted: a row put
// at head+1 without moving the head (what an emitter's role can do), and a
// row whose prev_hash is not its predecessor's hash. Sealed so that the
// in-log check passes: only the chain says no.
func TestPlantedRowIsNeverDelivered(t *testing.T) {
	for _, prefetch := range []bool{true, false} {
		t.Run(map[bool]string{true: "prefetched", false: "not prefetched"}[prefetch], func(t *testing.T) {
			rg := newLogRig(t, true)
			raw := localaws.DynamoDB(t)
			planted := batchEvents(t, 1)[0]
			planted.Seq, planted.PrevHash = 11, rg.logged[9].Hash
			// A gap: seq 13 links to a made-up seq 12; the head is moved to
			// cover it, so only the link says no.
			unlinked := batchEvents(t, 1)[0]
			unlinked.Seq, unlinked.PrevHash = 13, strings.Repeat("ab", 32)
			bad := map[string]envelope.Envelope{"planted at head+1": planted, "unlinked": unlinked}
			for k, e := range bad {
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
				bad[k] = e
			}
			planted, unlinked = bad["planted at head+1"], bad["unlinked"]
			ctx := context.Background()
			var p *delivery.Prefetched
			if prefetch {
				var err error
				if p, _, err = rg.d.Prefetch(ctx, []envelope.Envelope{planted}); err != nil {
					t.Fatal(err)
				}
			}
			check := func(name string, e envelope.Envelope, why string) {
				t.Helper()
				res, err := rg.d.DeliverWith(ctx, e, p)
				var nce *delivery.NotCoveredError
				if !errors.Is(err, delivery.ErrNotCovered) || !errors.As(err, &nce) || nce.Seq != e.Seq || !strings.Contains(nce.Reason, why) {
					t.Errorf("%s: Deliver = %v, want a NotCoveredError at seq %d saying %q", name, err, e.Seq, why)
				}
				if len(res.Subscriptions) != 0 {
					t.Errorf("%s: subscriptions %v, want none attempted", name, outcomes(res))
				}
			}
			check("planted at head+1", planted, "above the chain's head (last_seq 10)")
			// Move the head over 13 (as a rollback's reverse would): the
			// planted row at 11 is covered by the head now, and 13's link to
			// a seq 12 that does not exist still says no.
			rg.putHead(t, raw, 13, unlinked.Hash)
			if prefetch {
				var err error
				if p, _, err = rg.d.Prefetch(ctx, []envelope.Envelope{unlinked}); err != nil {
					t.Fatal(err)
				}
			}
			check("unlinked", unlinked, "no event at seq 12")
			if n := rg.recv.total(); n != 0 {
				t.Errorf("handlers ran %d times for rows the chain does not cover, want 0", n)
			}
			for _, e := range bad {
				for _, sub := range rg.d.Subscriptions() {
					if _, ok, _ := delivery.NewDynamoStore(rg.db, rg.table).Get(ctx, delivery.Key{EventID: e.ID, Subscription: sub}); ok {
						t.Errorf("seq %d: a claim of %s exists", e.Seq, sub)
					}
				}
			}
			if n := emfSum(t, rg.metrics.String(), keys.MetricNotCovered); n != 2 {
				t.Errorf("%s counted %d times, want 2", keys.MetricNotCovered, n)
			}
			// The log's own events are still delivered.
			for _, e := range rg.logged {
				if res, err := rg.d.DeliverWith(ctx, e, nil); err != nil || res.Count(delivery.Completed) != batchSubs {
					t.Fatalf("logged seq %d: %v, %v; want completed", e.Seq, err, outcomes(res))
				}
			}
		})
	}
}

// emfSum adds up the values of the metric name in EMF lines.
func emfSum(t *testing.T, emf, name string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(emf), "\n") {
		var m map[string]any
		if line == "" {
			continue
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("EMF line %q: %v", line, err)
		}
		if v, ok := m[name].(float64); ok {
			n += int(v)
		}
	}
	return n
}

// deliverSeqs delivers the logged events at seqs (Prefetch, then
// DeliverWith), as the consumer does, and fails on anything but settled.
func deliverSeqs(t *testing.T, rg *logRig, seqs ...int64) {
	t.Helper()
	ctx := context.Background()
	var envs []envelope.Envelope
	for _, q := range seqs {
		envs = append(envs, rg.logged[q-1])
	}
	p, _, err := rg.d.Prefetch(ctx, envs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range envs {
		res, err := rg.d.DeliverWith(ctx, e, p)
		if err != nil || res.RetryLater() {
			t.Fatalf("seq %d: %v, %v", e.Seq, err, outcomes(res))
		}
	}
}

// TestDeliveryWritesNoWatermark: delivering writes claims and completions
// only (1 + N per event); a redelivery writes nothing; the watermark is
// derived from the claims, with no row stored.
func TestDeliveryWritesNoWatermark(t *testing.T) {
	rg := newLogRig(t, true)
	rg.db.reset()
	deliverSeqs(t, rg, 1, 2, 3, 4, 5)
	// The first delivery of a live-start subscription records its start and
	// begins the tenant's watermark at it: once per subscription, and once
	// per (tenant, subscription).
	if _, writes, _, _, _ := rg.db.snapshot(); writes != 5*(1+batchSubs)+2*batchSubs {
		t.Errorf("first batch: %d writes, want %d (1 + N per event, plus each subscription's start and the tenant's begun watermark)", writes, 5*(1+batchSubs)+2*batchSubs)
	}
	rg.db.reset()
	deliverSeqs(t, rg, 6, 7, 8, 9, 10)
	if _, writes, _, _, _ := rg.db.snapshot(); writes != 5*(1+batchSubs) {
		t.Errorf("second batch of 5 events to %d subscriptions: %d writes, want %d (1 + N per event)", batchSubs, writes, 5*(1+batchSubs))
	}
	rg.db.reset()
	deliverSeqs(t, rg, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	if _, writes, _, _, _ := rg.db.snapshot(); writes != 0 {
		t.Errorf("prefetched redelivery: %d writes, want 0", writes)
	}
	ctx := context.Background()
	rows, err := delivery.NewDynamoStore(rg.db, rg.table).Watermarks(ctx, "t1")
	if err != nil || len(rows) != batchSubs {
		t.Fatalf("watermark rows after delivery: %v, %v; want %d, begun at the start", rows, err, batchSubs)
	}
	for sub, w := range rows {
		if w.Seq != 0 {
			t.Errorf("%s: row at %d, want 0 (begun at the start; delivery moves none)", sub, w.Seq)
		}
	}
	marks, err := rg.d.Watermarks(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	for sub, w := range marks {
		if w.Seq != 10 || w.Checkpoint != 0 || w.Partial {
			t.Errorf("%s: %+v, want watermark 10 derived from checkpoint 0", sub, w)
		}
	}
}

// TestDerivedWatermarkStopsAtGap: the watermark is the checkpoint carried
// over consecutive settled events; an event not delivered stops it (for
// every subscription), a dead-lettered one does not; Settled (dlq-repair)
// writes the checkpoint forward, and a walk goes on from it.
func TestDerivedWatermarkStopsAtGap(t *testing.T) {
	rg := newLogRig(t, true)
	ctx := context.Background()
	want := func(what string, seq, checkpoint int64) {
		t.Helper()
		marks, err := rg.d.Watermarks(ctx, "t1")
		if err != nil {
			t.Fatal(err)
		}
		if len(marks) != batchSubs {
			t.Fatalf("%s: %d watermarks, want %d", what, len(marks), batchSubs)
		}
		for sub, w := range marks {
			if w.Seq != seq || w.Checkpoint != checkpoint {
				t.Errorf("%s: %s at %d (checkpoint %d), want %d (checkpoint %d)", what, sub, w.Seq, w.Checkpoint, seq, checkpoint)
			}
		}
	}
	deliverSeqs(t, rg, 1, 2, 3, 5, 6) // 4 lost on its way
	want("4 lost", 3, 0)
	moved, err := rg.d.Settled(ctx, "t1", nil)
	if err != nil || len(moved) != batchSubs {
		t.Fatalf("Settled: moved %v, %v; want every subscription's checkpoint to 3", moved, err)
	}
	want("checkpoint written", 3, 3)
	if moved, err := rg.d.Settled(ctx, "t1", nil); err != nil || len(moved) != 0 {
		t.Errorf("Settled again: moved %v, %v; want nothing (already there)", moved, err)
	}
	rg.recv.mu.Lock()
	rg.recv.fail["batchtest.c"] = true // dead-lettered at 4: settled all the same
	rg.recv.mu.Unlock()
	deliverSeqs(t, rg, 4)
	want("4 delivered (c dead-lettered)", 6, 3)
	// A budget of 2 rows: the walk reports where it got to, and says so.
	cat, err := catalog.New(batchModule.Spec())
	if err != nil {
		t.Fatal(err)
	}
	reader, err := delivery.NewWatermarkReader(delivery.NewDynamoStore(rg.db, rg.table).WithLog(rg.events), cat)
	if err != nil {
		t.Fatal(err)
	}
	got, err := reader.WithBudget(2).Watermarks(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	for sub, w := range got {
		if w.Seq != 5 || !w.Partial || w.Checkpoint != 3 {
			t.Errorf("budget 2: %s %+v, want 5, partial, from checkpoint 3", sub, w)
		}
	}
	c, err := reader.Carry(ctx, "t1", map[string]int64{"batchtest.a": 0, "batchtest.b": 5}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if c.Seqs["batchtest.a"] != 6 || c.Seqs["batchtest.b"] != 6 || c.Partial {
		t.Errorf("Carry from 0 and 5 up to 10: %+v, want both at 6 (7 not delivered), not partial", c)
	}
	if c, err := reader.Carry(ctx, "t1", map[string]int64{"batchtest.a": 0}, 4); err != nil || c.Seqs["batchtest.a"] != 4 {
		t.Errorf("Carry up to a head of 4: %+v, %v; want 4 (never past the head)", c, err)
	}
	// A gap in the log itself: the walk never passes a seq the log lacks.
	deliverSeqs(t, rg, 7, 8, 9, 10)
	if _, err := rg.db.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(rg.events), Key: map[string]types.AttributeValue{
		keys.AttrTenant: &types.AttributeValueMemberS{Value: "t1"}, keys.AttrSeq: &types.AttributeValueMemberN{Value: "8"}}}); err != nil {
		t.Fatal(err)
	}
	want("seq 8's row gone from the log", 7, 3)
}
