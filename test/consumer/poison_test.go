package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/fourlanes/fourlanes/pkg/consumer"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// fifoLane is a DURABLE FIFO queue and its FIFO DLQ on ElasticMQ, with the
// redrive the construct synthesizes (maxReceiveCount 5).
type fifoLane struct {
	sqs        *sqs.Client
	queue, dlq string
	arn        string
}

func newFIFOLane(t *testing.T) *fifoLane {
	t.Helper()
	c := localaws.SQS(t)
	fifo := map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "false"}
	l := &fifoLane{sqs: c}
	l.dlq = localaws.CreateQueue(t, c, localaws.UniqueName(t, "dlq")+".fifo", fifo)
	attrs := map[string]string{"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":5}`, localaws.QueueARN(t, c, l.dlq)), "VisibilityTimeout": "60"}
	for k, v := range fifo {
		attrs[k] = v
	}
	l.queue = localaws.CreateQueue(t, c, localaws.UniqueName(t, "durable")+".fifo", attrs)
	l.arn = localaws.QueueARN(t, c, l.queue)
	return l
}

func (l *fifoLane) send(t *testing.T, group, dedup, body string) {
	t.Helper()
	if _, err := l.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(l.queue), MessageBody: aws.String(body),
		MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedup)}); err != nil {
		t.Fatal(err)
	}
}

func (l *fifoLane) receive(t *testing.T, url string, n int) []sqstypes.Message {
	t.Helper()
	var out []sqstypes.Message
	for range 10 {
		r, err := l.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"}, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.Messages...)
		if len(out) >= n {
			break
		}
	}
	return out
}

// event is the SQS event Lambda's event source mapping builds from received
// messages, through its JSON form.
func (l *fifoLane) event(t *testing.T, ms []sqstypes.Message) events.SQSEvent {
	t.Helper()
	var recs []map[string]any
	for _, m := range ms {
		recs = append(recs, map[string]any{
			"messageId": aws.ToString(m.MessageId), "receiptHandle": aws.ToString(m.ReceiptHandle), "body": aws.ToString(m.Body),
			"attributes": m.Attributes, "messageAttributes": map[string]any{}, "md5OfBody": aws.ToString(m.MD5OfBody),
			"eventSource": "aws:sqs", "eventSourceARN": l.arn, "awsRegion": "us-east-1",
		})
	}
	raw, err := json.Marshal(map[string]any{"Records": recs})
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// settle deletes the messages the answer does not name, as the mapping does.
func (l *fifoLane) settle(t *testing.T, ms []sqstypes.Message, resp events.SQSEventResponse) {
	t.Helper()
	failed := failures(resp)
	for _, m := range ms {
		if slices.Contains(failed, aws.ToString(m.MessageId)) {
			continue
		}
		if _, err := l.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(l.queue), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
}

func (l *fifoLane) depth(t *testing.T, url string) int {
	t.Helper()
	out, err := l.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	var n, m int
	fmt.Sscan(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)], &n)
	fmt.Sscan(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)], &m)
	return n + m
}

// TestPoisonDeadLetteredAtFirstReceive: a message whose body is not a
// deliverable envelope (here: a tampered payload) is moved to the FIFO DLQ
// at its first receive, as it came, with its reason and error in message
// attributes; it is answered as done, so it leaves the queue, and the
// tenant's later message behind it is delivered in the same batch instead of
// waiting out five receives. A second receive of it (the answer lost) sends
// no second copy.
func TestPoisonDeadLetteredAtFirstReceive(t *testing.T) {
	evs := fixtureEvents(t)
	tampered := evs[0]
	tampered.Payload = map[string]any{"order_id": "o-1", "customer_email": "eve@example.com", "items": []any{}, "total_cents": json.Number("1"), "currency": "EUR"}
	poison := body(t, tampered)

	l := newFIFOLane(t)
	rg := newRig(t)
	cfg := rg.cfg
	cfg.DeadLetters, cfg.DeadLetterQueue = l.sqs, l.dlq
	h, err := consumer.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.send(t, "tenant-1", idT1Placed, poison)
	l.send(t, "tenant-1", idT1Paid, body(t, evs[2]))
	ms := l.receive(t, l.queue, 2)
	if len(ms) != 2 {
		t.Fatalf("received %d messages, want 2", len(ms))
	}
	ev := l.event(t, ms)
	if ev.Records[0].Attributes["ApproximateReceiveCount"] != "1" {
		t.Fatalf("receive count %q, want this to be the first receive", ev.Records[0].Attributes["ApproximateReceiveCount"])
	}
	resp, err := h.Handle(lambdaCtx(t), ev)
	if err != nil {
		t.Fatal(err)
	}
	if got := failures(resp); len(got) != 0 {
		t.Errorf("batchItemFailures: got %v, want none (the poison is dead-lettered, the tenant's later message delivered)", got)
	}
	l.settle(t, ms, resp)
	if r, ok := rg.claim(t, idT1Paid); !ok || r.Status != delivery.StatusCompleted {
		t.Errorf("tenant-1's later message: claim %+v found=%v, want completed in the same batch", r, ok)
	}
	if n := l.depth(t, l.queue); n != 0 {
		t.Errorf("durable queue holds %d messages, want 0", n)
	}

	dl := l.receive(t, l.dlq, 1)
	if len(dl) != 1 {
		t.Fatalf("DLQ holds %d messages, want the poison", len(dl))
	}
	m := dl[0]
	attr := func(name string) string { return aws.ToString(m.MessageAttributes[name].StringValue) }
	if aws.ToString(m.Body) != poison {
		t.Errorf("DLQ body: got %.80q, want the message as it came", aws.ToString(m.Body))
	}
	if attr(consumer.AttrDeadLetterReason) != consumer.ReasonUndecodable || !strings.Contains(attr(consumer.AttrDeadLetterError), "tampered") ||
		attr(consumer.AttrDeadLetterReceives) != "1" {
		t.Errorf("DLQ message attributes: %s=%q %s=%q %s=%q, want undecodable, the decode error and receive 1", consumer.AttrDeadLetterReason,
			attr(consumer.AttrDeadLetterReason), consumer.AttrDeadLetterError, attr(consumer.AttrDeadLetterError), consumer.AttrDeadLetterReceives, attr(consumer.AttrDeadLetterReceives))
	}
	if g := m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]; g != "tenant-1" {
		t.Errorf("DLQ message group %q, want tenant-1 (dlq-repair lists it by tenant)", g)
	}
	if n := metricSum(t, rg.metrics.String(), keys.MetricDurableMessageDeadLettered); n != 1 {
		t.Errorf("%s = %d, want 1", keys.MetricDurableMessageDeadLettered, n)
	}
	if logs := rg.logs.String(); !strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, "dead-lettered at this receive") || !strings.Contains(logs, "tampered") {
		t.Errorf("no ERROR line saying the poison was dead-lettered and why:\n%s", logs)
	}

	// The same receive again (its answer lost): no second copy in the DLQ.
	if _, err := h.Handle(lambdaCtx(t), l.event(t, ms[:1])); err != nil {
		t.Fatal(err)
	}
	if n := l.depth(t, l.dlq); n != 1 {
		t.Errorf("DLQ holds %d messages after a repeated receive, want 1", n)
	}
}

// TestPoisonKeptWhenTheDLQRefuses: when the move to the DLQ fails, the
// poison comes back as before (never deleted unread), holds its tenant's
// later message, and the failure is logged.
func TestPoisonKeptWhenTheDLQRefuses(t *testing.T) {
	l := newFIFOLane(t)
	rg := newRig(t)
	cfg := rg.cfg
	cfg.DeadLetters, cfg.DeadLetterQueue = l.sqs, strings.TrimSuffix(l.dlq, ".fifo")+"-gone.fifo"
	h, err := consumer.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	evs := fixtureEvents(t)
	ev := events.SQSEvent{Records: []events.SQSMessage{
		fifoMessage("m-bad", "tenant-1", idT1Placed, `{"id":`, 1),
		fifoMessage("m-t1-later", "tenant-1", idT1Paid, body(t, evs[2]), 2),
	}}
	resp, err := h.Handle(lambdaCtx(t), ev)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := failures(resp), []string{"m-bad", "m-t1-later"}; !slices.Equal(got, want) {
		t.Errorf("batchItemFailures: got %v, want %v", got, want)
	}
	if logs := rg.logs.String(); !strings.Contains(logs, "the move to the FIFO DLQ failed") {
		t.Errorf("no line saying the move failed:\n%s", logs)
	}
	if _, err := consumer.New(context.Background(), consumer.Config{Deliverer: rg.cfg.Deliverer, DeadLetters: l.sqs}); err == nil {
		t.Error("consumer.New with DeadLetters and no DeadLetterQueue: got nil, want an error")
	}
}

func metricSum(t *testing.T, emf, name string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(emf), "\n") {
		var m map[string]any
		if line == "" || json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if v, ok := m[name].(float64); ok {
			n += int(v)
		}
	}
	return n
}
