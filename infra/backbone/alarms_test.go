package backbone

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// alarmOn finds an alarm on a plain metric with exactly these dimensions.
func (s *synthesized) alarmOn(namespace, metric string, dims map[string]any) (map[string]any, bool) {
	for _, a := range s.resources("AWS::CloudWatch::Alarm") {
		p := props(a)
		if p["Namespace"] != namespace || p["MetricName"] != metric {
			continue
		}
		got := map[string]any{}
		for _, d := range list(p["Dimensions"]) {
			d := d.(map[string]any)
			got[d["Name"].(string)] = d["Value"]
		}
		if cmp.Equal(dims, got) {
			return p, true
		}
	}
	return nil, false
}

// alarmOnQuery finds an alarm whose metric is a Metrics Insights query
// containing want.
func (s *synthesized) alarmOnQuery(want string) (map[string]any, bool) {
	for _, a := range s.resources("AWS::CloudWatch::Alarm") {
		p := props(a)
		for _, m := range list(p["Metrics"]) {
			if e, _ := m.(map[string]any)["Expression"].(string); strings.Contains(e, want) {
				return p, true
			}
		}
	}
	return nil, false
}

// dlqs returns the logical IDs of every dead-letter destination in the
// template: redrive targets, Pipe dead-letter configs and mapping on-failure
// destinations.
func (s *synthesized) dlqs() []string {
	set := map[string]bool{}
	arnOf := func(v any) {
		if m, ok := v.(map[string]any); ok {
			if ga, ok := m["Fn::GetAtt"].([]any); ok {
				set[ga[0].(string)] = true
			}
		}
	}
	for _, q := range s.resources("AWS::SQS::Queue") {
		if rp, ok := props(q)["RedrivePolicy"].(map[string]any); ok {
			arnOf(rp["deadLetterTargetArn"])
		}
	}
	for _, p := range s.resources("AWS::Pipes::Pipe") {
		for _, src := range props(p)["SourceParameters"].(map[string]any) {
			if dl, ok := src.(map[string]any)["DeadLetterConfig"].(map[string]any); ok {
				arnOf(dl["Arn"])
			}
		}
	}
	for _, m := range s.resources("AWS::Lambda::EventSourceMapping") {
		if dc, ok := props(m)["DestinationConfig"].(map[string]any); ok {
			arnOf(dc["OnFailure"].(map[string]any)["Destination"])
		}
	}
	var out []string
	for id := range set {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func TestEveryDLQHasADepthAlarm(t *testing.T) {
	s := synth(t)
	got := s.dlqs()
	if diff := cmp.Diff([]string{LogicalChangeFeedDLQ, LogicalDurableDLQ, LogicalPipeDLQ}, got); diff != "" {
		t.Errorf("dead-letter destinations (-want +got):\n%s", diff)
	}
	for _, id := range got {
		p, ok := s.alarmOn("AWS/SQS", "ApproximateNumberOfMessagesVisible", map[string]any{"QueueName": getAtt(id, "QueueName")})
		if !ok {
			t.Errorf("no ApproximateNumberOfMessagesVisible alarm on %s", id)
			continue
		}
		if p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" || p["Threshold"] != 1.0 || p["EvaluationPeriods"] != 1.0 {
			t.Errorf("%s depth alarm: %v %v over %v periods, want >= 1 at once", id, p["ComparisonOperator"], p["Threshold"], p["EvaluationPeriods"])
		}
	}
}

func TestStreamConsumersHaveLagAlarms(t *testing.T) {
	s := synth(t)
	// Every Lambda mapping on a stream: IteratorAge by function.
	n := 0
	for id, m := range s.resources("AWS::Lambda::EventSourceMapping") {
		p := props(m)
		src, _ := p["EventSourceArn"].(map[string]any)["Fn::GetAtt"].([]any)
		if len(src) != 2 || src[1] != "StreamArn" {
			continue
		}
		n++
		if _, ok := s.alarmOn("AWS/Lambda", "IteratorAge", map[string]any{"FunctionName": p["FunctionName"]}); !ok {
			t.Errorf("stream mapping %s has no IteratorAge alarm on %v", id, p["FunctionName"])
		}
	}
	if n != 1 {
		t.Errorf("%d stream mappings, want 1 (changefeed)", n)
	}
	// Pipes publish no IteratorAge: lag comes from stream-filter's EMF
	// metric; failures and timeouts from the Pipe's own metrics.
	for id := range s.resources("AWS::Pipes::Pipe") {
		for _, metric := range []string{"ExecutionFailed", "ExecutionTimeout"} {
			if _, ok := s.alarmOn(PipesNamespace, metric, map[string]any{"PipeName": ref(id)}); !ok {
				t.Errorf("Pipe %s has no %s alarm", id, metric)
			}
		}
	}
	if _, ok := s.alarmOnQuery(fmt.Sprintf(`SELECT MAX(%s) FROM "%s"`, keys.MetricPipeRecordAge, keys.MetricNamespace)); !ok {
		t.Errorf("no alarm on the Pipe's record age (%s)", keys.MetricPipeRecordAge)
	}
}

func TestQueueAndDeadLetterAlarms(t *testing.T) {
	s := synth(t)
	if p, ok := s.alarmOn("AWS/SQS", "ApproximateAgeOfOldestMessage", map[string]any{"QueueName": getAtt(LogicalDurableQueue, "QueueName")}); !ok {
		t.Error("no ApproximateAgeOfOldestMessage alarm on the DURABLE FIFO queue")
	} else if p["Threshold"].(float64) < 6*durableConsumerTimeoutSeconds {
		t.Errorf("oldest-message threshold %vs is under one visibility timeout", p["Threshold"])
	}
	for _, metric := range []string{keys.MetricDeadLettered, keys.MetricChainBreaks, keys.MetricRejectedRecords, keys.MetricRepairOpen, keys.MetricChangeRejected} {
		q := fmt.Sprintf(`SELECT SUM(%s) FROM "%s"`, metric, keys.MetricNamespace)
		if p, ok := s.alarmOnQuery(q); !ok {
			t.Errorf("no alarm on %s", q)
		} else if p["Threshold"] != 1.0 || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
			t.Errorf("%s alarm fires at %v %v, want >= 1", metric, p["ComparisonOperator"], p["Threshold"])
		}
	}
}

// TestAlarmActionsAndDashboard: the context's topic gets ALARM and OK, every
// alarm says what it means, and the dashboard exists.
func TestAlarmActionsAndDashboard(t *testing.T) {
	s := synth(t)
	alarms := s.resources("AWS::CloudWatch::Alarm")
	if len(alarms) != len(s.stack.Alarms.ByName) || len(alarms) < 10 {
		t.Errorf("%d alarms in the template, %d built", len(alarms), len(s.stack.Alarms.ByName))
	}
	for id, a := range alarms {
		p := props(a)
		for _, k := range []string{"AlarmActions", "OKActions"} {
			if diff := cmp.Diff([]any{testTopicArn}, p[k]); diff != "" {
				t.Errorf("%s %s (-want +got):\n%s", id, k, diff)
			}
		}
		if d, _ := p["AlarmDescription"].(string); len(d) < 40 {
			t.Errorf("%s: description %q does not say what to do", id, d)
		}
		if p["TreatMissingData"] != "notBreaching" {
			t.Errorf("%s TreatMissingData = %v, want notBreaching", id, p["TreatMissingData"])
		}
	}
	if n := len(s.resources("AWS::CloudWatch::Dashboard")); n != 1 {
		t.Errorf("%d dashboards, want 1", n)
	}
}
