package twin

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

// engine returns a stream consumer whose deliveries are scripted: fails
// says which records fail an invocation that contains them.
type scripted struct {
	c     *streamConsumer
	calls [][]string // sequence numbers of each invocation
	gave  []failure
}

func newScripted(t *testing.T, policy batchPolicy, deliver func(recs []*record, n int) attemptResult) *scripted {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tw := &Twin{cfg: Config{RetryDelay: func(int) time.Duration { return 0 }, Now: time.Now}, log: log, journal: newJournal(log)}
	s := &scripted{}
	s.c = &streamConsumer{tw: tw, source: "Test", policy: policy}
	s.c.deliver = func(_ context.Context, recs []*record, _ int) (attemptResult, error) {
		s.calls = append(s.calls, seqs(recs))
		a := deliver(recs, len(s.calls))
		outcome := "ok"
		if a.functionError {
			outcome = "error: " + a.reason
		}
		tw.journal.add(Entry{Kind: KindInvoke, Source: "Test", Items: seqs(recs), Outcome: outcome})
		return a, nil
	}
	s.c.giveUp = func(_ context.Context, f failure) { s.gave = append(s.gave, f) }
	return s
}

func recs(seqs ...string) []*record {
	now := time.Now()
	out := make([]*record, len(seqs))
	for i, s := range seqs {
		out[i] = &record{Seq: s, Arrival: now, Seen: now}
	}
	return out
}

// failOn fails every invocation that contains a poison record.
func failOn(poison ...string) func([]*record, int) attemptResult {
	return func(rs []*record, _ int) attemptResult {
		for _, r := range rs {
			if slices.Contains(poison, r.Seq) {
				return attemptResult{reason: "poison " + r.Seq, functionError: true}
			}
		}
		return attemptResult{ok: len(rs)}
	}
}

func calls(cs [][]string) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, "["+strings.Join(c, " ")+"]")
	}
	return strings.Join(parts, " ")
}

// TestBisectReferenceTrace replays the trace of DESIGN's seed document
// (Part 9): batch size 4, bisect on, 2 retries, poison at 101: 7
// invocations, 101 delivered 5 times and alone to the destination, its
// neighbours delivered.
func TestBisectReferenceTrace(t *testing.T) {
	s := newScripted(t, batchPolicy{size: 4, bisect: true, maxRetries: 2}, failOn("101"))
	if !s.c.process(context.Background(), "sh-1", recs("100", "101", "102", "103")) {
		t.Fatal("process stopped early")
	}
	want := "[100 101 102 103] [100 101] [100] [101] [101] [101] [102 103]"
	if got := calls(s.calls); got != want {
		t.Errorf("invocations:\n got %s\nwant %s", got, want)
	}
	if len(s.gave) != 1 || fmt.Sprint(seqs(s.gave[0].recs)) != "[101]" || s.gave[0].condition != CondRetriesExhausted || s.gave[0].invokes != 3 {
		t.Fatalf("destination: got %+v, want [101] RetryAttemptsExhausted after 3 invocations", s.gave)
	}
	if err := CheckBisectRule(SourceEntries(s.c.tw.journal, "Test"), 2); err != nil {
		t.Errorf("CheckBisectRule: %v\n%s", err, FormatEntries(s.c.tw.journal.Entries(nil)))
	}
	if d := s.c.stats().Delivered; d != 3 {
		t.Errorf("delivered: got %d, want 3 (100, 102, 103)", d)
	}
	if f := s.c.stats().Failed; f != 1 {
		t.Errorf("failed: got %d, want 1", f)
	}
}

func TestWithoutBisectTheWholeBatchIsRetriedThenDeadLettered(t *testing.T) {
	s := newScripted(t, batchPolicy{size: 4, maxRetries: 1}, failOn("101"))
	s.c.process(context.Background(), "sh-1", recs("100", "101", "102"))
	if got, want := calls(s.calls), "[100 101 102] [100 101 102]"; got != want {
		t.Errorf("invocations: got %s, want %s", got, want)
	}
	if len(s.gave) != 1 || len(s.gave[0].recs) != 3 {
		t.Fatalf("destination: got %+v, want the whole batch", s.gave)
	}
}

// A partial batch response checkpoints before the lowest failed record;
// with bisect, the rest is retried as a split (no retry used).
func TestPartialResponseWithBisect(t *testing.T) {
	s := newScripted(t, batchPolicy{size: 5, bisect: true, maxRetries: 1}, func(rs []*record, _ int) attemptResult {
		for i, r := range rs {
			if r.Seq == "3" {
				return attemptResult{ok: i, reason: "item 3 failed"}
			}
		}
		return attemptResult{ok: len(rs)}
	})
	s.c.process(context.Background(), "sh", recs("1", "2", "3", "4", "5"))
	// [1..5] → 1,2 ok; [3 4 5] fails at its first → split [3] [4 5]; [3] once
	// more (1 retry) → destination; [4 5] ok.
	if got, want := calls(s.calls), "[1 2 3 4 5] [3 4 5] [3] [3] [4 5]"; got != want {
		t.Errorf("invocations:\n got %s\nwant %s", got, want)
	}
	if len(s.gave) != 1 || fmt.Sprint(seqs(s.gave[0].recs)) != "[3]" {
		t.Fatalf("destination: got %+v, want [3]", s.gave)
	}
}

// Without bisect, a partial response moves the checkpoint and the rest is
// retried; when retries run out, everything from the failed record on
// goes to the destination (AWS's documented cost of not bisecting).
func TestPartialResponseWithoutBisect(t *testing.T) {
	s := newScripted(t, batchPolicy{size: 4, maxRetries: 1}, func(rs []*record, _ int) attemptResult {
		for i, r := range rs {
			if r.Seq == "2" {
				return attemptResult{ok: i, reason: "item 2 failed"}
			}
		}
		return attemptResult{ok: len(rs)}
	})
	s.c.process(context.Background(), "sh", recs("1", "2", "3", "4"))
	if got, want := calls(s.calls), "[1 2 3 4] [2 3 4]"; got != want {
		t.Errorf("invocations: got %s, want %s", got, want)
	}
	if len(s.gave) != 1 || fmt.Sprint(seqs(s.gave[0].recs)) != "[2 3 4]" {
		t.Fatalf("destination: got %+v, want [2 3 4]", s.gave)
	}
}

// A record that recovers is delivered, with infinite retries (-1).
func TestInfiniteRetriesUntilFixed(t *testing.T) {
	s := newScripted(t, batchPolicy{size: 2, maxRetries: -1}, func(rs []*record, n int) attemptResult {
		if n < 5 {
			return attemptResult{reason: "not yet"}
		}
		return attemptResult{ok: len(rs)}
	})
	s.c.process(context.Background(), "sh", recs("1", "2"))
	if len(s.calls) != 5 || len(s.gave) != 0 {
		t.Errorf("got %d invocations and %d give-ups, want 5 and 0", len(s.calls), len(s.gave))
	}
}

// Records older than the maximum age skip to the destination without an
// invocation; younger ones in the same batch are delivered.
func TestMaxRecordAge(t *testing.T) {
	s := newScripted(t, batchPolicy{size: 4, bisect: true, maxRetries: 2, maxAge: time.Minute}, failOn())
	rs := recs("1", "2", "3")
	rs[0].Seen = time.Now().Add(-2 * time.Minute)
	rs[1].Seen = time.Now().Add(-90 * time.Second)
	s.c.process(context.Background(), "sh", rs)
	if got, want := calls(s.calls), "[3]"; got != want {
		t.Errorf("invocations: got %s, want %s", got, want)
	}
	if len(s.gave) != 1 || s.gave[0].condition != CondRecordAge || fmt.Sprint(seqs(s.gave[0].recs)) != "[1 2]" || s.gave[0].invokes != 0 {
		t.Fatalf("destination: got %+v, want [1 2] RecordAgeExceeded, never invoked", s.gave)
	}
}

func TestPartialStreamResponse(t *testing.T) {
	batch := recs("10", "11", "12")
	for _, tc := range []struct {
		payload string
		ok      int
		whole   bool
	}{
		{`null`, 3, false},
		{``, 3, false},
		{`{}`, 3, false},
		{`{"batchItemFailures":[]}`, 3, false},
		{`{"batchItemFailures":null}`, 3, false},
		{`{"batchItemFailures":[{"itemIdentifier":"12"},{"itemIdentifier":"11"}]}`, 1, false},
		{`{"batchItemFailures":[{"itemIdentifier":""}]}`, 0, true},
		{`{"batchItemFailures":[{"itemIdentifier":null}]}`, 0, true},
		{`{"batchItemFailures":[{"itemIdentifier":"99"}]}`, 0, true},
		{`{"batchItemFailures":[{"id":"11"}]}`, 0, true},
	} {
		ok, reason := partialStream([]byte(tc.payload), batch)
		if ok != tc.ok || (tc.whole != strings.Contains(reason, "whole batch")) {
			t.Errorf("%s: got ok=%d reason=%q, want ok=%d whole=%v", tc.payload, ok, reason, tc.ok, tc.whole)
		}
	}
}

func TestEnrichmentEvents(t *testing.T) {
	for _, tc := range []struct {
		payload string
		n       int
		skip    bool
	}{
		{`[]`, 0, true}, {`{}`, 0, true}, {`""`, 0, true}, {`null`, 0, true}, {``, 0, true},
		{`[{}]`, 1, false}, {`[{"a":1},{"a":2}]`, 2, false}, {`{"a":1}`, 1, false},
	} {
		evs, skip := enrichmentEvents([]byte(tc.payload))
		if len(evs) != tc.n || skip != tc.skip {
			t.Errorf("%q: got %d events skip=%v, want %d skip=%v", tc.payload, len(evs), skip, tc.n, tc.skip)
		}
	}
}

func TestParentShardsBeforeChildren(t *testing.T) {
	// p was split into c1 and c2; c1 split again into g; old's parent has
	// aged out of the stream.
	shards := []shardInfo{{id: "p"}, {id: "c1", parent: "p"}, {id: "c2", parent: "p"}, {id: "g", parent: "c1"}, {id: "old", parent: "gone"}}
	ids := func(ss []shardInfo) string {
		var out []string
		for _, s := range ss {
			out = append(out, s.id)
		}
		return strings.Join(out, " ")
	}
	done, running := map[string]bool{}, map[string]bool{}
	if got := ids(readyShards(shards, done, running)); got != "p old" {
		t.Errorf("at first: got %q, want the parent and the orphan", got)
	}
	running["p"], running["old"] = true, true
	if got := ids(readyShards(shards, done, running)); got != "" {
		t.Errorf("while p is read: got %q, want nothing new", got)
	}
	done["p"] = true
	delete(running, "p")
	if got := ids(readyShards(shards, done, running)); got != "c1 c2" {
		t.Errorf("after p: got %q, want its children", got)
	}
	running["c1"], running["c2"] = true, true
	done["c2"] = true
	if got := ids(readyShards(shards, done, running)); got != "" {
		t.Errorf("c1 still read: got %q, want g to wait", got)
	}
	done["c1"] = true
	delete(running, "c1")
	if got := ids(readyShards(shards, done, running)); got != "g" {
		t.Errorf("after c1: got %q, want g", got)
	}
}
