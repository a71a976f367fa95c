package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/cfn"
)

// removePipeFilter deletes the Pipe's FilterCriteria, as a careless edit of
// the stack would.
func removePipeFilter(t *testing.T) func(*cfn.Template) {
	return func(tm *cfn.Template) {
		for _, r := range tm.OfType(cfn.TypePipe) {
			if !r.DeleteProp("SourceParameters", "FilterCriteria") {
				t.Fatal("the synthesized Pipe has no filter to remove")
			}
		}
	}
}

// With the Pipe's filter removed, head rows reach the enrichment; the lane
// stays correct because stream-filter drops them and, should one pass, its
// stamps (tenant, a dedup id derived from the event id) keep it harmless.
// With the stamping also removed, stream-filter fails the batch: the twin
// bisects it down to the head row, retries it and dead-letters its
// metadata, loudly; the events around it are delivered.
func TestPipeFilterRemoved(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, removePipeFilter(t))
	ctx := context.Background()
	if _, err := s.app.Workload(ctx, []string{"acme", "globex"}, 2); err != nil {
		t.Fatal(err)
	}
	events := s.allEvents(t, "acme", "globex")
	s.waitDelivered(t, events)

	pipe, _ := s.tw.Poller(s.pipe)
	if pipe.Filtered != 0 || pipe.Failed != 0 {
		t.Errorf("Pipe without a filter: %+v, want nothing filtered and nothing failed", pipe)
	}
	heads := s.tw.Journal().Count(func(e twin.Entry) bool {
		return e.Source == s.pipe && e.Kind == twin.KindInvoke && strings.Contains(strings.Join(e.Keys, ";"), "seq=0 ")
	})
	if heads == 0 {
		t.Error("no enrichment invocation carried a head row")
	}
	s.waitLines(t, s.fn[keys.FnStreamFilter], "head row dropped") // stream-filter says it dropped a head row
	if got := s.waitMessagesDone(t, len(events)); got != int64(len(events)) {
		t.Errorf("messages delivered to durable-consumer: %d, want one per event (%d): no head row on the queue", got, len(events))
	}
	if n := s.tw.Journal().Count(func(e twin.Entry) bool { return e.Kind == twin.KindDuplicate }); n != 0 {
		t.Errorf("%d duplicates: head rows' dedup ids must never equal an event's", n)
	}

	// A writer that does not stamp the head row.
	e := emitPlaced(t, s, "unstamped")
	unstampHead(t, s, "unstamped")
	after := emitPlaced(t, s, "globex")
	eventually(t, 60*time.Second, "the unstamped head row dead-lettered", func() (bool, string) {
		st, _ := s.tw.Poller(s.pipe)
		return st.Failed == 1 && s.depth(keys.EnvPipeDLQURL) == 1, fmt.Sprintf("Pipe %+v", st)
	})
	s.waitDelivered(t, []envelope.Envelope{e, after})
	es := s.journal(s.pipe)
	if err := twin.CheckBisectRule(es, 10); err != nil {
		t.Errorf("bisect rule: %v", err)
	}
	var gaveUp []twin.Entry
	for _, x := range es {
		if x.Kind == twin.KindDestination {
			gaveUp = append(gaveUp, x)
		}
	}
	if len(gaveUp) != 1 || !strings.Contains(strings.Join(gaveUp[0].Keys, ""), "MODIFY seq=0 tenant_id=unstamped") {
		t.Errorf("dead-lettered: %+v, want the unstamped head row alone", gaveUp)
	}
	s.waitLines(t, s.fn[keys.FnStreamFilter], "head row without its stamps") // stream-filter names the unstamped head row
	if !strings.Contains(gaveUp[0].Detail, "head row without its stamps") {
		t.Errorf("the dead-letter entry does not say why: %q", gaveUp[0].Detail)
	}
}

// emitPlaced places one order of tenant and returns its event.
func emitPlaced(t *testing.T, s *stack, tenant string) envelope.Envelope {
	t.Helper()
	o, err := s.app.Order(context.Background(), tenant, 0)
	if err != nil {
		t.Fatal(err)
	}
	evs := s.allEvents(t, tenant)
	for _, e := range evs {
		if e.Payload["order_id"] == o.ID {
			return e
		}
	}
	t.Fatalf("no event of order %s", o.ID)
	return envelope.Envelope{}
}

// unstampHead rewrites tenant's head row without the stamps the Pipe's
// target reads (last_event_id, dedup_id), as a writer that predates them would.
func unstampHead(t *testing.T, s *stack, tenant string) {
	t.Helper()
	ctx := context.Background()
	table := s.env[keys.EnvEventsTable]
	key := map[string]types.AttributeValue{keys.AttrTenant: &types.AttributeValueMemberS{Value: tenant}, keys.AttrSeq: &types.AttributeValueMemberN{Value: "0"}}
	out, err := s.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		t.Fatalf("head of %s: %v", tenant, err)
	}
	delete(out.Item, keys.AttrLastEventID)
	delete(out.Item, keys.AttrDedupID)
	if _, err := s.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: out.Item}); err != nil {
		t.Fatal(err)
	}
}

// allEvents reads the log of the tenants.
func (s *stack) allEvents(t *testing.T, tenants ...string) []envelope.Envelope {
	t.Helper()
	var out []envelope.Envelope
	for _, tenant := range tenants {
		evs, err := s.app.Events.AllEvents(context.Background(), tenant)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, evs...)
	}
	return out
}

// waitMessagesDone waits until the durable mapping has deleted at least n
// messages (a claim completes inside the invocation; the mapping deletes the
// message after the function returns) and returns its count.
func (s *stack) waitMessagesDone(t *testing.T, n int) int64 {
	t.Helper()
	var got int64
	eventually(t, 60*time.Second, "the durable mapping finished its messages", func() (bool, string) {
		st, _ := s.tw.Poller(s.durableMap)
		got = st.Delivered
		return got >= int64(n), fmt.Sprintf("durable mapping %+v", st)
	})
	return got
}

// waitDelivered waits until the DURABLE subscriber completed every event.
func (s *stack) waitDelivered(t *testing.T, events []envelope.Envelope) {
	t.Helper()
	eventually(t, 90*time.Second, "every event delivered", func() (bool, string) {
		for _, e := range events {
			if c, ok := s.claim(e.ID, emailSub); !ok || c.Status != "completed" {
				return false, fmt.Sprintf("%s seq %d of %s: claim %q (found %v)", e.Type, e.Seq, e.TenantID, c.Status, ok)
			}
		}
		return true, ""
	})
}
