package backbone

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestNotaryMapping: the notary reads the events stream with its own
// mapping, unfiltered (every INSERT, MODIFY and REMOVE, checked on real
// record shapes), from the horizon, one batch per shard at a time, with
// bisect on error, a retry limit, a maximum record age well inside the
// stream's 24 hours and an on-failure queue (standard, encrypted, TLS only)
// that alarms.
func TestNotaryMapping(t *testing.T) {
	s := synth(t)
	m := props(s.resources("AWS::Lambda::EventSourceMapping")[LogicalNotaryESM])
	if m == nil {
		t.Fatalf("no mapping %s", LogicalNotaryESM)
	}
	for k, want := range map[string]any{
		"EventSourceArn":             getAtt(LogicalEventsTable, "StreamArn"),
		"FunctionName":               ref(s.id(s.stack.Notary.Function.Fn)),
		"StartingPosition":           "TRIM_HORIZON",
		"BisectBatchOnFunctionError": true,
		"MaximumRetryAttempts":       float64(notaryMaxRetries),
		"MaximumRecordAgeInSeconds":  float64(notaryMaxRecordAgeS),
		"ParallelizationFactor":      1.0,
		"DestinationConfig":          map[string]any{"OnFailure": map[string]any{"Destination": getAtt(LogicalNotaryDLQ, "Arn")}},
	} {
		if diff := cmp.Diff(want, m[k]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", k, diff)
		}
	}
	if age := m["MaximumRecordAgeInSeconds"].(float64); age > 24*3600 {
		t.Errorf("record age %v s is past the stream's retention", age)
	}
	for _, f := range []string{"testdata/stream/event-insert.json", "testdata/stream/head-insert.json", "testdata/stream/head-modify.json",
		"testdata/stream/event-remove.json", "../../pkg/tamper/testdata/event-modify.json", "../../pkg/tamper/testdata/head-remove.json"} {
		b, err := os.ReadFile(filepath.FromSlash(f))
		if err != nil {
			t.Fatal(err)
		}
		if !mappingPasses(t, m, b) {
			t.Errorf("%s does not reach the notary: it must see every record of the log", f)
		}
	}
	q := props(s.resources("AWS::SQS::Queue")[LogicalNotaryDLQ])
	if q == nil {
		t.Fatalf("no queue %s", LogicalNotaryDLQ)
	}
	if q["FifoQueue"] == true || q["SqsManagedSseEnabled"] != true {
		t.Errorf("on-failure queue %v: want a standard queue, SQS-managed encryption", q)
	}
	env := props(s.resources("AWS::Lambda::Function")[s.id(s.stack.Notary.Function.Fn)])["Environment"].(map[string]any)["Variables"].(map[string]any)
	for k, want := range map[string]any{keys.EnvEventsTable: ref(LogicalEventsTable), keys.EnvStateTable: ref(LogicalStateTable)} {
		if diff := cmp.Diff(want, env[k]); diff != "" {
			t.Errorf("notary %s (-want +got):\n%s", k, diff)
		}
	}
}

// TestNotaryAlarms: a finding alarms in the minute it is made; a batch in
// the on-failure queue alarms; a notary a minute behind for 3 minutes
// alarms; and the notary has the Errors alarm every function has. Each
// notifies the alarm topic.
func TestNotaryAlarms(t *testing.T) {
	s := synth(t)
	check := func(what string, p map[string]any, ok bool, threshold, periods float64) {
		t.Helper()
		if !ok {
			t.Errorf("no %s alarm", what)
			return
		}
		if p["Threshold"] != threshold || p["EvaluationPeriods"] != periods || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
			t.Errorf("%s alarm %v %v over %v periods, want >= %v over %v", what, p["ComparisonOperator"], p["Threshold"], p["EvaluationPeriods"], threshold, periods)
		}
		if diff := cmp.Diff([]any{ref(LogicalAlarmTopic)}, p["AlarmActions"]); diff != "" {
			t.Errorf("%s alarm actions (-want +got):\n%s", what, diff)
		}
	}
	p, ok := s.alarmOnQuery(EMFQuery("SUM", keys.MetricNotaryFinding))
	check("NotaryFinding", p, ok, 1, 1)
	if ok {
		for _, m := range list(p["Metrics"]) {
			if period, _ := m.(map[string]any)["Period"].(float64); period != 0 && period != 60 {
				t.Errorf("finding alarm period %vs, want 60", period)
			}
		}
	}
	p, ok = s.alarmOn("AWS/SQS", "ApproximateNumberOfMessagesVisible", map[string]any{"QueueName": getAtt(LogicalNotaryDLQ, "QueueName")})
	check("NotaryDLQDepth", p, ok, 1, 1)
	p, ok = s.alarmOn("AWS/Lambda", "IteratorAge", map[string]any{"FunctionName": ref(s.id(s.stack.Notary.Function.Fn))})
	check("NotaryIteratorAge", p, ok, notaryLagThresholdMs, 3)
	p, ok = s.alarmOn("AWS/Lambda", "Errors", map[string]any{"FunctionName": ref(s.id(s.stack.Notary.Function.Fn))})
	if !ok {
		t.Error("no Errors alarm on the notary")
	}
}

// TestNotaryStateGrant: the notary may read and put only its own rows of
// the state table (partition keys notary#…), never update or delete.
func TestNotaryStateGrant(t *testing.T) {
	s := synth(t)
	role := s.id(s.stack.Notary.Function.Role)
	found := false
	for _, pol := range s.resources("AWS::IAM::Policy") {
		roles, _ := json.Marshal(props(pol)["Roles"])
		if !strings.Contains(string(roles), `"`+role+`"`) {
			continue
		}
		for _, st := range list(props(pol)["PolicyDocument"].(map[string]any)["Statement"]) {
			m := st.(map[string]any)
			if !cmp.Equal(m["Resource"], getAtt(LogicalStateTable, "Arn")) {
				continue
			}
			found = true
			if diff := cmp.Diff([]string{"dynamodb:GetItem", "dynamodb:PutItem"}, sorted(strs(m["Action"]))); diff != "" {
				t.Errorf("state-table actions (-want +got):\n%s", diff)
			}
			want := map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": []any{keys.StateNotaryPrefix + "*"}}}
			if diff := cmp.Diff(want, m["Condition"]); diff != "" {
				t.Errorf("state-table condition (-want +got):\n%s", diff)
			}
		}
	}
	if !found {
		t.Error("no grant of the notary on the state table")
	}
}
