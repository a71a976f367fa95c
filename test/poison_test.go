package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/cfn"
)

// A poison record on the orders stream: the change feed fails on one
// order's record every time. The mapping (bisect, 10 retries, on-failure
// queue, as synthesized) isolates it: only its metadata reaches the
// on-failure queue, the records around it are applied, and dlq-repair
// applies it once the cause is fixed (not before). The journal of what the
// mapping did is logged and checked against the bisect rule.
func TestPoisonRecordOnTheChangeFeed(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	// A batching window makes the poison share its batch with neighbours,
	// as it would under load; it is a property of the mapping, not a fake.
	s := startStack(t, func(tm *cfn.Template) { setMappingWindow(t, tm, 2) })
	ctx := context.Background()
	before, err := s.app.Workload(ctx, []string{"acme", "globex"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	poison, err := s.app.PlantPoison(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	after, err := s.app.Workload(ctx, []string{"acme", "globex"}, 2)
	if err != nil {
		t.Fatal(err)
	}

	eventually(t, 60*time.Second, "the poison record on the on-failure queue", func() (bool, string) {
		st, _ := s.tw.Poller(s.feedMap)
		return st.Failed == 1 && s.depth(keys.EnvChangeFeedDLQURL) == 1, fmt.Sprintf("mapping %+v", st)
	})
	neighbours := map[string][]orders.Order{}
	for _, m := range []map[string][]orders.Order{before, after} {
		for tenant, os := range m {
			neighbours[tenant] = append(neighbours[tenant], os...)
		}
	}
	// Every record around it is applied.
	eventually(t, 30*time.Second, "the neighbours projected", func() (bool, string) {
		for tenant, os := range neighbours {
			for _, o := range os {
				if v, ok, _ := s.app.SearchVersion(ctx, tenant, o.ID); !ok || v != o.Version {
					return false, fmt.Sprintf("order %s of %s at v%d (found %v), want v%d", o.ID, tenant, v, ok, o.Version)
				}
			}
		}
		return true, ""
	})

	// Only the poison record's metadata: one record, not the record.
	bodies := s.peek(keys.EnvChangeFeedDLQURL)
	if len(bodies) != 1 {
		t.Fatalf("on-failure queue: %d messages, want 1", len(bodies))
	}
	var msg struct {
		RequestContext struct {
			Condition string `json:"condition"`
			Invokes   int    `json:"approximateInvokeCount"`
		} `json:"requestContext"`
		Info struct {
			Start, End string
			BatchSize  int    `json:"batchSize"`
			Stream     string `json:"streamArn"`
		} `json:"DDBStreamBatchInfo"`
	}
	if err := json.Unmarshal([]byte(bodies[0]), &msg); err != nil {
		t.Fatal(err)
	}
	var info map[string]any
	_ = json.Unmarshal([]byte(bodies[0]), &struct {
		Info *map[string]any `json:"DDBStreamBatchInfo"`
	}{&info})
	if msg.RequestContext.Condition != twin.CondRetriesExhausted || msg.Info.BatchSize != 1 || info["startSequenceNumber"] != info["endSequenceNumber"] || msg.RequestContext.Invokes != 11 {
		t.Errorf("on-failure record: %s; want one record, RetryAttemptsExhausted after 1 + 10 invocations", bodies[0])
	}
	if strings.Contains(bodies[0], poison.ID) {
		t.Errorf("the on-failure record carries the record (%s); AWS sends metadata only", poison.ID)
	}

	es := s.journal(s.feedMap)
	if err := twin.CheckBisectRule(es, 10); err != nil {
		t.Errorf("bisect rule: %v", err)
	}
	var gaveUp []twin.Entry
	for _, e := range es {
		if e.Kind == twin.KindDestination {
			gaveUp = append(gaveUp, e)
		}
	}
	if len(gaveUp) != 1 || !strings.Contains(strings.Join(gaveUp[0].Keys, " "), poison.ID) {
		t.Errorf("given up on: %+v, want exactly the poison order %s", gaveUp, poison.ID)
	}

	// dlq-repair re-reads the source of truth: with the cause still there
	// the item stays open and the message stays in the queue.
	r, out := s.repairAllowOpen()
	if src := r.Sources["changefeed_dlq"]; src.Open != 1 || src.Fixed != 0 {
		t.Fatalf("repair before the fix: %s", out)
	}
	if s.depth(keys.EnvChangeFeedDLQURL) != 1 {
		t.Fatal("an open repair deleted its message")
	}
	if _, ok, _ := s.app.SearchVersion(ctx, "acme", poison.ID); ok {
		if v, _, _ := s.app.SearchVersion(ctx, "acme", poison.ID); v != 0 {
			t.Fatalf("the poison order is projected at v%d before the fix", v)
		}
	}

	// Fix the cause; dlq-repair applies the record.
	if err := s.app.FixPoison(ctx, "acme", poison.ID); err != nil {
		t.Fatal(err)
	}
	r, out = s.repair()
	if src := r.Sources["changefeed_dlq"]; src.Fixed != 1 || src.Open != 0 {
		t.Fatalf("repair after the fix: %s", out)
	}
	if v, ok, err := s.app.SearchVersion(ctx, "acme", poison.ID); err != nil || !ok || v != 1 {
		t.Fatalf("the poison order after repair: v%d found %v err %v, want v1", v, ok, err)
	}
	if d := s.depth(keys.EnvChangeFeedDLQURL); d != 0 {
		t.Errorf("on-failure queue after repair: %d messages, want 0", d)
	}
}

// setMappingWindow sets the change feed mapping's batching window.
func setMappingWindow(t *testing.T, tm *cfn.Template, seconds int) {
	t.Helper()
	m, _ := feedMapping(t, tm)
	m.SetProp(seconds, "MaximumBatchingWindowInSeconds")
}

// feedMapping returns the change feed's stream mapping and its function:
// the stream mapping whose function is given the change feed table. The
// events table has a stream mapping too (the notary), so "the first
// mapping with a StartingPosition" is not an answer.
func feedMapping(t *testing.T, tm *cfn.Template) (mapping, function *cfn.Resource) {
	t.Helper()
	var found []*cfn.Resource
	for _, r := range tm.OfType(cfn.TypeMapping) {
		if _, stream := r.Prop("StartingPosition"); !stream {
			continue
		}
		ref, _ := r.Prop("FunctionName")
		refs := tm.References(ref)
		if len(refs) != 1 {
			continue
		}
		fn := tm.Resources[refs[0]]
		if _, ok := fn.Prop("Environment", "Variables", keys.EnvChangeFeedTable); ok {
			mapping, function = r, fn
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("the template has %d stream mappings into a function given %s, want 1", len(found), keys.EnvChangeFeedTable)
	}
	return mapping, function
}

// repairAllowOpen invokes dlq-repair and accepts the exit status that says
// repairs were left open.
func (s *stack) repairAllowOpen() (repairReport, string) {
	s.t.Helper()
	name, err := s.tw.FunctionName(s.fn[keys.FnDLQRepair])
	if err != nil {
		s.t.Fatal(err)
	}
	out := s.run(true, "repair", "-function", name)
	var r repairReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		s.t.Fatalf("repair output %q: %v", out, err)
	}
	return r, out
}
