package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/internal/twin"
	"github.com/fourlanes/fourlanes/internal/twin/cfn"
	"github.com/fourlanes/fourlanes/internal/twin/lambdart"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Killing a function process mid-batch loses nothing and doubles no
// effect. durable-consumer is killed right after it sent an email and
// before it recorded sending it (the worst moment); changefeed is killed
// after it applied part of its batch. The killed batches come back (the
// queue's visibility timeout; the stream mapping's retry) and every event
// ends delivered, every email sent exactly once, every order projected at
// its final version.
//
// The change feed's batching window (1 s) gathers several records per batch.
// The consumer's timeout (4 s) and the queue's visibility timeout (15 s) are
// shortened together so the redelivery comes within seconds: AWS requires
// visibility ≥ timeout; 15 s also outlasts the killed delivery's claim lease
// (the invocation's deadline + 10 s), so the redelivery finds it expired.
// The change feed logs at debug level so the kill can land between records.
func TestKillMidBatch(t *testing.T) {
	s := startStack(t, func(tm *cfn.Template) {
		feed, feedFn := feedMapping(t, tm) // changefeed: log each record
		feedFn.SetProp("debug", "Environment", "Variables", keys.EnvLogLevel)
		feed.SetProp(1, "MaximumBatchingWindowInSeconds")
		for _, r := range tm.OfType(cfn.TypeMapping) {
			if _, stream := r.Prop("StartingPosition"); stream {
				continue
			}
			ref, _ := r.Prop("FunctionName")
			consumer := tm.Resources[tm.References(ref)[0]]
			consumer.SetProp(4, "Timeout")
			src, _ := r.Prop("EventSourceArn")
			tm.Resources[tm.References(src)[0]].SetProp(15, "VisibilityTimeout")
		}
	})
	consumerID, feedID := s.fn[keys.FnDurableConsumer], s.fn[keys.FnChangefeed]

	var mu sync.Mutex
	batch := map[string]int{}     // request id → messages (consumer) or records (change feed) in the batch
	sent := map[string]int{}      // request id → emails sent in it
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
		case fn == consumerID && strings.Contains(l.Text, `"msg":"email sent"`):
			sent[l.RequestID]++
			// The second email of a batch: the first is sent and recorded,
			// this one sent and not yet recorded, the rest not started.
			if sent[l.RequestID] == 2 && batch[l.RequestID] >= 3 {
				kill(fn, l)
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

	// Never twice: one "email sent" per event.
	perKey := map[string]int{}
	for _, line := range s.grep(consumerID, `"msg":"email sent"`) {
		var rec struct {
			Key string `json:"key"`
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, consumerID+": ")), &rec); err != nil {
			t.Fatalf("email log line %q: %v", line, err)
		}
		perKey[rec.Key]++
	}
	for _, e := range events {
		if n := perKey[e.ID+":order-email"]; n != 1 {
			t.Errorf("%s seq %d of %s: %d emails sent, want exactly 1", e.Type, e.Seq, e.TenantID, n)
		}
	}
	if got := s.waitMessagesDone(t, len(events)); got != int64(len(events)) {
		t.Errorf("messages completed: %d, want %d", got, len(events))
	}
}
