package backbone

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// queueSendDenied evaluates the Deny statements of the queue policies on
// queue for sqs:SendMessage by a principal whose aws:PrincipalArn is
// principal (nil: a request without the key, as a service principal acting
// on its own makes). It understands what the template uses: Principal "*"
// or {"AWS": "*"}, Action patterns, and ArnNotEquals / ArnNotLike /
// StringNotEquals on aws:PrincipalArn; any other condition fails the test,
// so a policy this cannot read is never taken as a pass.
func (s *synthesized) queueSendDenied(t *testing.T, queue string, principal any) bool {
	t.Helper()
	denied := false
	for id, qp := range s.resources("AWS::SQS::QueuePolicy") {
		p := props(qp)
		covers := false
		for _, q := range list(p["Queues"]) {
			if fmt.Sprint(q) == fmt.Sprint(ref(queue)) {
				covers = true
			}
		}
		if !covers {
			continue
		}
		for _, st := range list(p["PolicyDocument"].(map[string]any)["Statement"]) {
			st := st.(map[string]any)
			if st["Effect"] != "Deny" {
				continue
			}
			if pr := st["Principal"]; fmt.Sprint(pr) != "*" && fmt.Sprint(pr) != fmt.Sprint(map[string]any{"AWS": "*"}) {
				continue
			}
			acts := false
			for _, a := range strs(st["Action"]) {
				if actionAllows(a, "sqs:SendMessage") {
					acts = true
				}
			}
			if !acts {
				continue
			}
			cond, _ := st["Condition"].(map[string]any)
			match := true
			for op, kv := range cond {
				for key, vals := range kv.(map[string]any) {
					switch {
					case key == "aws:SecureTransport" && op == "Bool":
						match = match && false // our requests use TLS
					case key == "aws:PrincipalArn" && (op == "ArnNotEquals" || op == "ArnNotLike" || op == "StringNotEquals"):
						in := false
						for _, v := range list(vals) {
							if principal != nil && fmt.Sprint(v) == fmt.Sprint(principal) {
								in = true
							}
						}
						match = match && !in // absent key: a negated operator is true
					default:
						t.Fatalf("queue policy %s: condition %s %s: this test cannot evaluate it", id, op, key)
					}
				}
			}
			if match {
				denied = true
			}
		}
	}
	return denied
}

// TestOnlyTheBackboneSendsToTheDurableQueues: on the FIFO queue and its DLQ,
// SendMessage is denied by the queues' own policies to every principal but
// the Pipe's role and dlq-repair's role (and, on the DLQ only,
// durable-consumer's role, which dead-letters a poison message), whatever
// their identity policies say.
func TestOnlyTheBackboneSendsToTheDurableQueues(t *testing.T) {
	s := synth(t)
	arn := func(role string) any { return getAtt(role, "Arn") }
	allowed := map[string]any{
		"the Pipe's role":   arn(s.id(s.stack.Durable.PipeRole)),
		"dlq-repair's role": arn(s.id(s.stack.Repair.Function.Role)),
	}
	refused := map[string]any{
		"stream-filter's role":  arn(s.id(s.stack.Durable.StreamFilter.Role)),
		"reconcile's role":      arn(s.id(s.stack.Reconcile.Function.Role)),
		"changefeed's role":     arn(s.id(s.stack.ChangeFeed.Changefeed.Role)),
		"a user of the account": "arn:aws:iam::123456789012:user/mallory",
		"the account root":      "arn:aws:iam::123456789012:root",
		"no principal ARN":      nil,
	}
	consumer := arn(s.id(s.stack.Durable.DurableConsumer.Role))
	if s.queueSendDenied(t, LogicalDurableDLQ, consumer) {
		t.Errorf("%s: SendMessage by durable-consumer's role is denied, want allowed (it dead-letters poison messages)", LogicalDurableDLQ)
	}
	for _, q := range []string{LogicalDurableQueue, LogicalDurableDLQ, LogicalPipeDLQ} {
		for who, p := range allowed {
			if s.queueSendDenied(t, q, p) {
				t.Errorf("%s: SendMessage by %s is denied, want allowed", q, who)
			}
		}
		for who, p := range refused {
			if !s.queueSendDenied(t, q, p) {
				t.Errorf("%s: SendMessage by %s is not denied by the queue policy, want denied", q, who)
			}
		}
	}
	if !s.queueSendDenied(t, LogicalDurableQueue, consumer) {
		t.Errorf("%s: SendMessage by durable-consumer's role is not denied, want denied (only the Pipe and dlq-repair send there)", LogicalDurableQueue)
	}
	// The change-feed on-failure queue: changefeed's mappings send with its
	// role, dlq-repair re-parks.
	feedAllowed := map[string]any{
		"changefeed's role": arn(s.id(s.stack.ChangeFeed.Changefeed.Role)),
		"dlq-repair's role": allowed["dlq-repair's role"],
	}
	for who, p := range feedAllowed {
		if s.queueSendDenied(t, LogicalChangeFeedDLQ, p) {
			t.Errorf("%s: SendMessage by %s is denied, want allowed", LogicalChangeFeedDLQ, who)
		}
	}
	for who, p := range refused {
		if who != "changefeed's role" && !s.queueSendDenied(t, LogicalChangeFeedDLQ, p) {
			t.Errorf("%s: SendMessage by %s is not denied by the queue policy, want denied", LogicalChangeFeedDLQ, who)
		}
	}
	if !s.queueSendDenied(t, LogicalChangeFeedDLQ, allowed["the Pipe's role"]) {
		t.Errorf("%s: the Pipe's role may send there, want denied", LogicalChangeFeedDLQ)
	}
	// The Pipe's identity policy still allows its one send.
	gs := grants(s.Doc)
	if got := access(gs, s.id(s.stack.Durable.PipeRole)); !contains(got[LogicalDurableQueue+".Arn"], "sqs:SendMessage") {
		t.Errorf("the Pipe's role may not send to %s: %v", LogicalDurableQueue, got)
	}
}

// TestDeliveryWatermarkAlarm: a stalled delivery watermark pages the
// stack's topic: the maximum age of an unsettled event, per subscription,
// over reconcile's 15-minute schedule.
func TestDeliveryWatermarkAlarm(t *testing.T) {
	s := synth(t)
	q := EMFQuery("MAX", keys.MetricUnsettledAge)
	p, ok := s.alarmOnQuery(q)
	if !ok {
		t.Fatalf("no alarm on %s", q)
	}
	if p["Threshold"] != float64(unsettledAgeThresholdS) || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" || p["EvaluationPeriods"] != 1.0 {
		t.Errorf("alarm %v %v over %v periods, want >= %d s in one period", p["ComparisonOperator"], p["Threshold"], p["EvaluationPeriods"], unsettledAgeThresholdS)
	}
	for _, m := range list(p["Metrics"]) {
		if period, _ := m.(map[string]any)["Period"].(float64); period != 900 {
			t.Errorf("period %vs, want 900 (reconcile's incremental schedule)", period)
		}
	}
	if !strings.Contains(ReconcileIncrementalEvery, "15 minutes") {
		t.Errorf("reconcile runs %s; the alarm's period assumes every 15 minutes", ReconcileIncrementalEvery)
	}
	if a, ok := s.stack.Alarms.ByName["DeliveryWatermarkStalled"]; !ok || a == nil {
		t.Error("the alarm is not registered by name")
	}
}

// TestEveryQueueRefusesOtherSenders: no queue of the backbone takes a
// message from any principal of the account: each has a Deny for all but
// its senders, beside the TLS-only deny.
func TestEveryQueueRefusesOtherSenders(t *testing.T) {
	s := synth(t)
	for id := range s.resources("AWS::SQS::Queue") {
		if !s.queueSendDenied(t, id, "arn:aws:iam::123456789012:user/mallory") {
			t.Errorf("queue %s: SendMessage by a user of the account is not denied", id)
		}
		var tlsOnly bool
		for _, qp := range s.resources("AWS::SQS::QueuePolicy") {
			p := props(qp)
			if !strings.Contains(fmt.Sprint(p["Queues"]), id) {
				continue
			}
			tlsOnly = tlsOnly || strings.Contains(fmt.Sprint(p["PolicyDocument"]), "aws:SecureTransport:false")
		}
		if !tlsOnly {
			t.Errorf("queue %s: no TLS-only deny", id)
		}
	}
}
