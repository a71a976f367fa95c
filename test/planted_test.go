package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestPlantedRowNeverDelivered: on the synthesized stack, one PutItem of a
// well-sealed event row at head+1 that leaves the head where it is (what an
// emitter's role can do: IAM cannot force a PutItem to be conditional)
// travels the stream, the Pipe and the queue like any event; durable-consumer
// refuses it because the chain does not cover it: the DURABLE handler never
// runs (no claim, no email), an ERROR line and the NotCovered metric say
// why, and the message is dead-lettered to the FIFO DLQ at its first
// receive. dlq-repair, re-reading the log, keeps it open.
func TestPlantedRowNeverDelivered(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, nil)
	placed := emitPlaced(t, s, "victim")
	logged := s.allEvents(t, "victim")
	s.waitDelivered(t, logged)
	head, err := s.app.Events.Head(context.Background(), "victim")
	if err != nil || head == nil {
		t.Fatalf("head of victim: %v, %v", head, err)
	}

	planted := placed
	id, err := envelope.NewID()
	if err != nil {
		t.Fatal(err)
	}
	planted.ID, planted.Seq, planted.PrevHash = id, head.LastSeq+1, head.LastHash
	planted.Payload = map[string]any{}
	for k, v := range placed.Payload {
		planted.Payload[k] = v
	}
	planted.Payload["customer_email"] = "mallory@evil.example"
	if err := chain.Seal(&planted); err != nil {
		t.Fatal(err)
	}
	it, err := planted.ToItem()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ddb.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(s.env[keys.EnvEventsTable]), Item: it}); err != nil {
		t.Fatal(err)
	}

	consumer := s.fn[keys.FnDurableConsumer]
	eventually(t, 90*time.Second, "the planted row dead-lettered by durable-consumer", func() (bool, string) {
		n := s.depth(keys.EnvDurableDLQURL)
		return n == 1 && len(s.grep(consumer, `"reason":"not_covered"`)) > 0, fmt.Sprintf("DLQ depth %d", n)
	})
	found := false
	for _, l := range s.grep(consumer, `"reason":"not_covered"`) {
		found = found || strings.Contains(l, `"level":"ERROR"`) && strings.Contains(l, `"event_id":"`+planted.ID+`"`) &&
			strings.Contains(l, "above the chain's head") && strings.Contains(l, "dead-lettered at this receive")
	}
	if !found {
		t.Errorf("no ERROR line naming the planted event, why and its dead letter:\n%s", strings.Join(s.grep(consumer, "not_covered"), "\n"))
	}
	if len(s.grep(consumer, `"`+keys.MetricNotCovered+`"`)) == 0 {
		t.Errorf("no %s metric", keys.MetricNotCovered)
	}
	if c, ok := s.claim(planted.ID, emailSub); ok {
		t.Errorf("the planted event has a claim %q, want none: its handler must never run", c.Status)
	}
	s.checkEmailsOnce(t, logged)
	if n := len(s.grep(consumer, "mallory@evil.example")); n != 0 {
		t.Errorf("%d lines mention the planted payload's address; it must never reach a handler", n)
	}
	if bodies := s.peek(keys.EnvDurableDLQURL); len(bodies) != 1 || !strings.Contains(bodies[0], planted.ID) {
		t.Errorf("FIFO DLQ: %d messages, want the planted event's", len(bodies))
	}

	rep, out := s.repairAllowOpen()
	if dd := rep.Sources["durable_dlq"]; dd.Open != 1 || dd.Fixed != 0 {
		t.Fatalf("durable_dlq: %+v, want the planted event open\n%s", dd, out)
	}
	if c, ok := s.claim(planted.ID, emailSub); ok {
		t.Errorf("after dlq-repair, the planted event has a claim %q, want none", c.Status)
	}
}
