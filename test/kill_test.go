package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/lambdart"
	"github.com/fourlanes/fourlanes/twin/twintest"
)

// Killing a function process mid-batch loses nothing, and doubles an effect
// only where at-least-once must. durable-consumer is killed right after it
// sent an email and before it recorded the email done (the worst moment);
// changefeed is killed after it applied part of its batch. The killed
// batches come back (the queue's visibility timeout; the stream mapping's
// retry) and every event ends delivered with its email sent at least once;
// an email sent twice is the one the kill caught between its send and its
// record, and the redelivery says so by key (WARN, EffectRedone); every
// order is projected at its final version.
//
// The consumer is held at that moment, not raced to it: when a batch of
// three or more arrives, the test arms a stall on our DynamoDB for the next
// write that records an effect done (UpdateItem on the state table with
// ":done", pkg/effect), waits until a request is held there, and kills the
// process. The held write never runs. The consumer runs one invocation at a
// time here, so the held write is the invocation's being killed.
//
// The change feed's batching window (1 s) gathers several records per batch.
// The consumer's timeout (4 s) and the queue's visibility timeout (15 s) are
// shortened together so the redelivery comes within seconds: AWS requires
// visibility ≥ timeout; 15 s also outlasts the killed delivery's claim lease
// (the invocation's deadline + 10 s), so the redelivery finds it expired.
// The change feed logs at debug level so the kill can land between records.
func TestKillMidBatch(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, func(tm *cfn.Template) {
		feed, feedFn := feedMapping(t, tm) // changefeed: log each record
		// As an operator would in the console: Lambda (and the twin) pass it
		// as AWS_LAMBDA_LOG_LEVEL, which wins over LOG_LEVEL.
		feedFn.SetProp("DEBUG", "LoggingConfig", "ApplicationLogLevel")
		feed.SetProp(1, "MaximumBatchingWindowInSeconds")
		for _, r := range tm.OfType(cfn.TypeMapping) {
			if _, stream := r.Prop("StartingPosition"); stream {
				continue
			}
			ref, _ := r.Prop("FunctionName")
			consumer := tm.Resources[tm.References(ref)[0]]
			consumer.SetProp(4, "Timeout")
			consumer.SetProp(1, "ReservedConcurrentExecutions")
			src, _ := r.Prop("EventSourceArn")
			tm.Resources[tm.References(src)[0]].SetProp(15, "VisibilityTimeout")
		}
	})
	consumerID, feedID := s.fn[keys.FnDurableConsumer], s.fn[keys.FnChangefeed]

	var mu sync.Mutex
	batch := map[string]int{}     // request id → messages (consumer) or records (change feed) in the batch
	killed := map[string]string{} // function → request id
	kill := func(fn string, l lambdart.Line) {
		if _, done := killed[fn]; done || l.RequestID == "" {
			return
		}
		f, err := s.tw.Function(fn)
		if err != nil {
			return
		}
		if f.KillRequest(l.RequestID) {
			killed[fn] = l.RequestID
		}
	}
	holdAt := make(chan struct{}, 1) // a consumer batch of 3 or more began: hold it and kill
	var current string               // the consumer's invocation running (one at a time here)
	s.whenLine(func(fn string, l lambdart.Line) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case fn == consumerID && strings.Contains(l.Text, `"msg":"batch received"`),
			fn == feedID && strings.Contains(l.Text, `"msg":"stream batch received"`):
			var rec struct {
				Count int `json:"count"`
			}
			_ = json.Unmarshal([]byte(l.Text), &rec)
			batch[l.RequestID] = rec.Count
			if fn == consumerID {
				current = l.RequestID
				if rec.Count >= 3 {
					select {
					case holdAt <- struct{}{}:
					default: // one is enough
					}
				}
			}
		case fn == feedID && strings.Contains(l.Text, "change event recorded and dispatched"):
			// The first record applied in a batch of three or more (the
			// batching window gathers them; under load a batch of one can
			// come first, and killing it would prove nothing mid-batch).
			if batch[l.RequestID] >= 3 {
				kill(fn, l)
			}
		}
	})
	held := make(chan error, 1)
	go func() {
		held <- s.holdAt(holdAt, func() {
			mu.Lock()
			defer mu.Unlock()
			kill(consumerID, lambdart.Line{RequestID: current})
		})
	}()

	ctx := context.Background()
	placed, err := s.app.Workload(ctx, []string{"acme", "globex", "initech"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	events := s.allEvents(t, "acme", "globex", "initech")
	s.waitDelivered(t, events)
	eventually(t, 60*time.Second, "every order projected", func() (bool, string) {
		for tenant, os := range placed {
			for _, o := range os {
				if v, ok, _ := s.app.SearchVersion(ctx, tenant, o.ID); !ok || v != o.Version {
					return false, fmt.Sprintf("order %s of %s at v%d, want v%d", o.ID, tenant, v, o.Version)
				}
			}
		}
		return true, ""
	})

	select {
	case err := <-held:
		if err != nil {
			t.Errorf("holding the consumer at its record-the-send write: %v", err)
		}
	default:
		t.Error("the consumer was never held at its record-the-send write (no batch of 3 or more?)")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, fn := range []string{consumerID, feedID} {
		if killed[fn] == "" {
			t.Errorf("%s was never killed mid-batch", fn)
		}
	}
	exits := s.tw.Journal().Entries(func(e twin.Entry) bool {
		return e.Kind == twin.KindInvoke && strings.Contains(e.Outcome, lambdart.ErrTypeExit)
	})
	t.Logf("killed invocations:\n%s", twin.FormatEntries(exits))
	if len(exits) != 2 {
		t.Errorf("invocations ended by the kill: %d, want 2", len(exits))
	}
	for _, e := range exits {
		if len(e.Items) < 2 {
			t.Errorf("%s was killed in a batch of %d: want mid-batch", e.Function, len(e.Items))
		}
	}

	// Never zero; twice only where the kill caught an email between its
	// send and its record, and then said so by key.
	s.checkEmailsAtLeastOnce(t, events, 1)
	if got := s.waitMessagesDone(t, len(events)); got != int64(len(events)) {
		t.Errorf("messages completed: %d, want %d", got, len(events))
	}
}

// holdAt waits for begin, arms a stall on the next write recording an effect
// done (pkg/effect: UpdateItem on the state table with ":done"), waits until
// a request is held there, and calls kill. The held
// write never runs: the killed process's connection closes first.
func (s *stack) holdAt(begin <-chan struct{}, kill func()) error {
	select {
	case <-begin:
	case <-time.After(90 * time.Second):
		return fmt.Errorf("no consumer batch of 3 or more within 90s")
	}
	ep, _ := twintest.Endpoints(s.t)
	admin := strings.TrimRight(ep, "/") + "/_fourlanes/faults"
	body, _ := json.Marshal(fault{Action: "UpdateItem", Table: s.env[keys.EnvStateTable], Match: `":done"`, Kind: "stall", DelayMs: 60_000})
	res, err := http.Post(admin, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		return fmt.Errorf("arming the stall: %s", res.Status)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		res, err := http.Get(admin + "?table=" + url.QueryEscape(s.env[keys.EnvStateTable])) // this test's rules only
		if err != nil {
			return err
		}
		var rules []fault
		err = json.NewDecoder(res.Body).Decode(&rules)
		res.Body.Close()
		armed := 0 // this test's rule (other tests' rules name their own tables)
		for _, r := range rules {
			if r.Table == s.env[keys.EnvStateTable] {
				armed++
			}
		}
		switch {
		case err != nil:
			return err
		case armed == 0: // consumed: an effect's done write is held
			kill()
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("no effect was recorded done within 60s of arming the stall")
		}
	}
}
