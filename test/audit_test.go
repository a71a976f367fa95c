package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/infra/backbone"
	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/twin/cfn"
)

// auditReport is the delivery audit part of reconcile's answer.
type auditReport struct {
	Tenant        string `json:"tenant"`
	LastSeq       int64  `json:"last_seq"`
	Subscriptions []struct {
		Subscription       string `json:"subscription"`
		Watermark          int64  `json:"watermark"`
		Unsettled          int64  `json:"unsettled"`
		OldestUnsettledSeq int64  `json:"oldest_unsettled_seq"`
		OldestUnsettledAt  string `json:"oldest_unsettled_at"`
		AgeSeconds         int64  `json:"unsettled_age_s"`
	} `json:"subscriptions"`
}

func (s *stack) audit(t *testing.T, tenant string) auditReport {
	t.Helper()
	out := s.reconcileCLI("-url", s.url, "-tenant", tenant)
	var r auditReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("reconcile output %q: %v", out, err)
	}
	// The framework's own DURABLE subscription (the heartbeat monitor)
	// routes none of the application's events: set apart, it must be
	// settled through the head.
	subs := r.Subscriptions[:0]
	for _, sd := range r.Subscriptions {
		if sd.Subscription == keys.HeartbeatSubscription {
			if sd.Watermark != r.LastSeq || sd.Unsettled != 0 {
				t.Errorf("reconcile %s: %s %+v, want settled through the head %d (routes none of its events)", tenant, sd.Subscription, sd, r.LastSeq)
			}
			continue
		}
		subs = append(subs, sd)
	}
	r.Subscriptions = subs
	if len(r.Subscriptions) != 1 || r.Subscriptions[0].Subscription != emailSub {
		t.Fatalf("reconcile %s: subscriptions %+v, want the one DURABLE subscription %s", tenant, r.Subscriptions, emailSub)
	}
	return r
}

// filterOnlyTenant narrows the Pipe's filter to the event rows of one
// tenant: every other tenant's events are lost between the stream and the
// queue, silently, as a filter mistake would lose them.
func filterOnlyTenant(t *testing.T, tenant string) func(*cfn.Template) {
	return func(tm *cfn.Template) {
		pattern, err := json.Marshal(map[string]any{"dynamodb": map[string]any{"NewImage": map[string]any{
			keys.AttrKind:   map[string]any{"S": []string{keys.KindEvent}},
			keys.AttrTenant: map[string]any{"S": []string{tenant}},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		pipes := tm.OfType(cfn.TypePipe)
		if len(pipes) != 1 {
			t.Fatalf("%d Pipes in the template, want 1", len(pipes))
		}
		pipes[0].SetProp(map[string]any{"Filters": []any{map[string]any{"Pattern": string(pattern)}}}, "SourceParameters", "FilterCriteria")
	}
}

// pastOrders places orders whose events occurred 20 minutes ago (the
// emitter's clock), so that their age is past the stalled-watermark alarm's
// threshold and dlq-repair's default wait.
func pastOrders(t *testing.T, s *stack, tenant string, n int) []envelope.Envelope {
	t.Helper()
	cat, err := example.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	store, err := eventstore.New(s.ddb, eventstore.Config{Table: s.app.Tables.Events, Catalog: cat,
		Now: func() time.Time { return time.Now().Add(-20 * time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	svc := &orders.Service{Events: store, Table: s.app.Tables.Orders}
	ctx := tenancy.MustWithTenant(context.Background(), tenant)
	for i := range n {
		if _, err := svc.Place(ctx, fmt.Sprintf("old-%d@%s.example", i, tenant), []orders.Item{{SKU: "sku-mug", Qty: 1}}, 1000, "EUR"); err != nil {
			t.Fatal(err)
		}
	}
	return s.allEvents(t, tenant)
}

// stalledAlarm returns the threshold of the template's stalled-watermark
// alarm, checking that it watches the maximum of UnsettledAgeSeconds.
func (s *stack) stalledAlarm(t *testing.T) float64 {
	t.Helper()
	for _, r := range s.tw.Template().OfType("AWS::CloudWatch::Alarm") {
		ms, _ := r.Prop("Metrics")
		b, _ := json.Marshal(ms)
		if !strings.Contains(string(b), fmt.Sprintf("MAX(%s)", keys.MetricUnsettledAge)) {
			continue
		}
		th, _ := r.Prop("Threshold")
		op, _ := r.Prop("ComparisonOperator")
		if op != "GreaterThanOrEqualToThreshold" {
			t.Fatalf("stalled-watermark alarm compares %v", op)
		}
		f, ok := th.(float64)
		if !ok {
			t.Fatalf("stalled-watermark alarm threshold %v", th)
		}
		return f
	}
	t.Fatal("no alarm on the maximum of " + keys.MetricUnsettledAge)
	return 0
}

// TestAuditLostEventsFoundAndRepaired: a narrowed Pipe filter loses every
// event of globex between the stream and the queue; acme's are delivered.
// reconcile reports globex's events unsettled for the named subscription,
// with their age; the metric reconcile emits crosses the stalled-watermark
// alarm's threshold; dlq-repair, with no message in any queue to go by,
// redelivers them from the log above the watermark, each once, and the
// watermark reaches the head.
func TestAuditLostEventsFoundAndRepaired(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, filterOnlyTenant(t, "acme"))
	acme := pastOrders(t, s, "acme", 2)
	lost := pastOrders(t, s, "globex", 3)
	s.waitDelivered(t, acme)
	eventually(t, 60*time.Second, "acme's watermark at its head", func() (bool, string) {
		r := s.audit(t, "acme")
		sd := r.Subscriptions[0]
		return sd.Watermark == r.LastSeq && sd.Unsettled == 0, fmt.Sprintf("%+v", r)
	})
	for _, e := range lost {
		if c, ok := s.claim(e.ID, emailSub); ok {
			t.Fatalf("globex seq %d has a claim (%s): the filter did not lose it", e.Seq, c.Status)
		}
	}

	r := s.audit(t, "globex")
	sd := r.Subscriptions[0]
	if r.LastSeq != 3 || sd.Watermark != 0 || sd.Unsettled != 3 || sd.OldestUnsettledSeq != 1 || sd.OldestUnsettledAt != lost[0].OccurredAt || sd.AgeSeconds < 20*60-5 {
		t.Errorf("reconcile globex: %+v, want last_seq 3, watermark 0, 3 unsettled since seq 1 (%s), about 1200 s old", r, lost[0].OccurredAt)
	}
	// The alarm must fire: reconcile's metric for globex's walk reaches its
	// threshold (acme's walks emitted 0 before it).
	threshold := s.stalledAlarm(t)
	s.waitMetric(t, keys.FnReconcile, keys.MetricUnsettledAge, emailSub, fmt.Sprintf("at least the alarm's threshold %v", threshold),
		func(v float64) bool { return v >= threshold })
	s.waitMetric(t, keys.FnReconcile, keys.MetricUnsettledEvents, emailSub, "3", func(v float64) bool { return v == 3 })

	rep, out := s.repair()
	src := rep.Sources["unsettled"]
	if src.Fixed != 1 || src.Open != 0 {
		t.Fatalf("unsettled source: %+v, want globex fixed\n%s", src, out)
	}
	for _, e := range lost {
		if c, ok := s.claim(e.ID, emailSub); !ok || c.Status != delivery.StatusCompleted {
			t.Errorf("globex seq %d after repair: claim %q (found %v), want completed", e.Seq, c.Status, ok)
		}
	}
	s.checkEmailsOnce(t, append(lost, acme...))
	if r := s.audit(t, "globex"); r.Subscriptions[0].Watermark != 3 || r.Subscriptions[0].Unsettled != 0 {
		t.Errorf("reconcile globex after repair: %+v, want watermark 3, nothing unsettled", r)
	}
	// A second run finds nothing to do.
	if rep, out := s.repair(); rep.Sources["unsettled"].Fixed+rep.Sources["unsettled"].Open != 0 {
		t.Errorf("second run: %+v\n%s", rep.Sources["unsettled"], out)
	}
}

// TestAuditExpiredPipeDLQ: events lost by the filter, and a Pipe DLQ
// message whose stream range has expired (its shard is gone). dlq-repair
// cannot know from the message which events it stood for: it redelivers
// every tenant's events above the watermarks and deletes the message only
// when every subscription is settled through the head. While one lost event
// is held by another delivery's lease, the message stays.
func TestAuditExpiredPipeDLQ(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, filterOnlyTenant(t, "acme"))
	acme := pastOrders(t, s, "acme", 1)
	lost := pastOrders(t, s, "globex", 2)
	s.waitDelivered(t, acme)

	// Another delivery holds the claim of globex seq 2 for an hour.
	ctx := context.Background()
	claims := delivery.NewDynamoStore(s.ddb, s.env[keys.EnvStateTable])
	now := time.Now()
	held := delivery.Key{EventID: lost[1].ID, Subscription: emailSub}
	if c, err := claims.Claim(ctx, delivery.ClaimRequest{Key: held, Tenant: "globex", Type: lost[1].Type, Seq: 2, SchemaVersion: lost[1].SchemaVersion,
		Token: "another-delivery", Now: now, LeaseUntil: now.Add(time.Hour), ExpiresAt: now.Add(24 * time.Hour)}); err != nil || !c.Acquired {
		t.Fatalf("hold the claim: %+v, %v", c, err)
	}

	arn, err := s.tw.StreamARN(s.eventsTableID(t))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"DDBStreamBatchInfo": map[string]any{
		"shardId": "shardId-00000000000000000000-expired", "streamArn": arn, "batchSize": 4,
		"startSequenceNumber": "100", "endSequenceNumber": "400",
	}})
	if _, err := s.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(s.env[keys.EnvPipeDLQURL]), MessageBody: aws.String(string(body))}); err != nil {
		t.Fatal(err)
	}

	rep, out := s.repairAllowOpen()
	pd := rep.Sources["pipe_dlq"]
	if pd.Open != 1 || pd.Fixed != 0 || !strings.Contains(pd.Items[0].Reason, "globex") {
		t.Fatalf("pipe_dlq with a lost event held: %+v, want the message open naming globex\n%s", pd, out)
	}
	if n := s.depth(keys.EnvPipeDLQURL); n != 1 {
		t.Errorf("Pipe DLQ holds %d messages while globex seq 2 is unsettled, want 1 (never deleted)", n)
	}
	if c, ok := s.claim(lost[0].ID, emailSub); !ok || c.Status != delivery.StatusCompleted {
		t.Errorf("globex seq 1: claim %q, want completed by the sweep", c.Status)
	}
	if r := s.audit(t, "globex"); r.Subscriptions[0].Watermark != 1 || r.Subscriptions[0].Unsettled != 1 {
		t.Errorf("reconcile globex: %+v, want watermark 1, 1 unsettled (seq 2, held)", r)
	}

	// The other delivery's lease is gone (its row removed, as if it expired).
	if _, err := s.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.env[keys.EnvStateTable]), Key: map[string]types.AttributeValue{
		keys.AttrPK: &types.AttributeValueMemberS{Value: keys.StateEventClaimPrefix + held.EventID},
		keys.AttrSK: &types.AttributeValueMemberS{Value: keys.StateEventClaimSK},
	}, UpdateExpression: aws.String("REMOVE #c"), ExpressionAttributeNames: map[string]string{"#c": keys.AttrSubClaimPrefix + held.Subscription}}); err != nil {
		t.Fatal(err)
	}
	rep, out = s.repair()
	pd = rep.Sources["pipe_dlq"]
	if pd.Fixed != 1 || pd.Open != 0 || pd.Items[0].Outcome != "fixed" {
		t.Fatalf("pipe_dlq once settled: %+v, want fixed\n%s", pd, out)
	}
	if n := s.depth(keys.EnvPipeDLQURL); n != 0 {
		t.Errorf("Pipe DLQ holds %d messages, want 0", n)
	}
	s.checkEmailsOnce(t, append(lost, acme...))
	if r := s.audit(t, "globex"); r.Subscriptions[0].Watermark != 2 || r.Subscriptions[0].Unsettled != 0 {
		t.Errorf("reconcile globex: %+v, want watermark 2, nothing unsettled", r)
	}
}

// eventsTableID returns the logical ID of the events table.
func (s *stack) eventsTableID(t *testing.T) string {
	t.Helper()
	for _, r := range s.tw.Template().OfType("AWS::DynamoDB::Table") {
		if name, err := s.tw.TableName(r.LogicalID); err == nil && name == s.env[keys.EnvEventsTable] {
			return r.LogicalID
		}
	}
	t.Fatal("no events table in the template")
	return ""
}

// TestAuditNotInLogNeverDelivered: envelopes sent straight to the FIFO
// queue (which the template's queue policy forbids on AWS; the twin's
// queues do not enforce IAM) that are hash-intact but not in the log, at
// seq 999 and with another payload at a logged seq, are never delivered:
// no claim, no email, an ERROR and the NotInLog metric; they are not
// deleted, reach the FIFO DLQ by the redrive, and dlq-repair keeps them
// there, open. The visibility timeout is shortened so that the redrive
// comes within seconds.
func TestAuditNotInLogNeverDelivered(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, func(tm *cfn.Template) {
		for _, r := range tm.OfType(cfn.TypeMapping) {
			if _, stream := r.Prop("StartingPosition"); stream {
				continue
			}
			ref, _ := r.Prop("FunctionName")
			tm.Resources[tm.References(ref)[0]].SetProp(4, "Timeout")
			src, _ := r.Prop("EventSourceArn")
			tm.Resources[tm.References(src)[0]].SetProp(5, "VisibilityTimeout")
		}
	})
	placed := emitPlaced(t, s, "victim")
	s.waitDelivered(t, []envelope.Envelope{placed})

	seq999 := placed
	id, _ := envelope.NewID()
	seq999.ID, seq999.Seq, seq999.PrevHash = id, 999, placed.Hash
	other := placed
	other.Payload = map[string]any{}
	for k, v := range placed.Payload {
		other.Payload[k] = v
	}
	other.Payload["email"] = "mallory@evil.example"
	for _, e := range []*envelope.Envelope{&seq999, &other} {
		if err := chain.Seal(e); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	url, err := s.tw.QueueURL(backbone.LogicalDurableQueue)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range []envelope.Envelope{seq999, other} {
		b, _ := json.Marshal(e)
		if _, err := s.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(string(b)),
			MessageGroupId: aws.String("victim"), MessageDeduplicationId: aws.String(fmt.Sprintf("%sforged-%d", keys.DedupReparkPrefix, i))}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 90*time.Second, "both forgeries in the FIFO DLQ", func() (bool, string) {
		n := s.depth(keys.EnvDurableDLQURL)
		return n == 2, fmt.Sprintf("DLQ depth %d", n)
	})
	consumer := s.fn[keys.FnDurableConsumer]
	for _, e := range []envelope.Envelope{seq999, other} {
		lines := s.grep(consumer, `"reason":"not_in_log"`)
		found := false
		for _, l := range lines {
			if strings.Contains(l, `"level":"ERROR"`) && strings.Contains(l, `"event_id":"`+e.ID+`"`) && strings.Contains(l, fmt.Sprintf(`"seq":%d,`, e.Seq)) {
				found = true
			}
		}
		if !found {
			t.Errorf("seq %d: no ERROR line with reason not_in_log naming its event and seq", e.Seq)
		}
	}
	if len(s.grep(consumer, "the log's hash is "+placed.Hash+", the envelope's "+other.Hash)) == 0 {
		t.Error("the refusal of the other payload does not name both hashes")
	}
	if len(s.grep(consumer, `"`+keys.MetricNotInLog+`"`)) == 0 {
		t.Errorf("no %s metric", keys.MetricNotInLog)
	}
	if c, ok := s.claim(seq999.ID, emailSub); ok {
		t.Errorf("seq 999 has a claim %q, want none", c.Status)
	}
	s.checkEmailsOnce(t, []envelope.Envelope{placed}) // the forged copy sent none
	if n := len(s.grep(consumer, "mallory@evil.example")); n != 0 {
		t.Errorf("%d lines mention the forged payload's address; it must never reach a handler", n)
	}

	rep, out := s.repairAllowOpen()
	dd := rep.Sources["durable_dlq"]
	if dd.Open != 2 || dd.Fixed != 0 {
		t.Fatalf("durable_dlq: %+v, want both open\n%s", dd, out)
	}
	if n := s.depth(keys.EnvDurableDLQURL); n != 2 {
		t.Errorf("FIFO DLQ holds %d, want both forgeries kept for an operator", n)
	}
}
