package backbone

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// TestHeartbeatSchedule: Scheduler invokes the writer every minute through
// a role that may only invoke it, and drops a beat it could not deliver
// within a minute (a late retry never stands in for a missing minute).
func TestHeartbeatSchedule(t *testing.T) {
	s := synth(t)
	st := s.stack
	sc, ok := st.Schedules.ByName["HeartbeatSchedule"]
	if !ok {
		t.Fatal("no heartbeat schedule built")
	}
	p := props(s.resources("AWS::Scheduler::Schedule")[*st.GetLogicalId(sc)])
	if p["ScheduleExpression"] != HeartbeatEvery || HeartbeatEvery != "rate(1 minute)" || p["State"] != "ENABLED" {
		t.Errorf("expression %v state %v, want rate(1 minute) ENABLED", p["ScheduleExpression"], p["State"])
	}
	target := p["Target"].(map[string]any)
	if diff := cmp.Diff(getAtt(s.id(st.Heartbeat.Function.Fn), "Arn"), target["Arn"]); diff != "" {
		t.Errorf("target (-want +got):\n%s", diff)
	}
	if target["Input"] != "{}" {
		t.Errorf("input %v, want {}", target["Input"])
	}
	if diff := cmp.Diff(map[string]any{"MaximumRetryAttempts": 2.0, "MaximumEventAgeInSeconds": 60.0}, target["RetryPolicy"]); diff != "" {
		t.Errorf("retry policy (-want +got):\n%s", diff)
	}
	role := st.Schedules.Roles[keys.FnHeartbeat]
	if role == nil {
		t.Fatal("no scheduler role for the heartbeat")
	}
	want := map[string][]string{s.id(st.Heartbeat.Function.Fn) + ".Arn": {"lambda:InvokeFunction"}}
	if diff := cmp.Diff(want, access(grants(s.Doc), s.id(role))); diff != "" {
		t.Errorf("scheduler role access (-want +got):\n%s", diff)
	}
}

// TestHeartbeatWriterMayOnlyEmitHeartbeats: the writer's role appends to
// the log only inside TransactWriteItems and only on the heartbeat chain's
// items, reads only that chain, and has nothing else but its logs.
func TestHeartbeatWriterMayOnlyEmitHeartbeats(t *testing.T) {
	s := synth(t)
	fn := s.stack.Heartbeat.Function
	gs := grants(s.Doc)
	want := map[string][]string{
		LogicalEventsTable + ".Arn": sorted(logAppendWrite, logAppendRead),
		s.id(fn.Logs) + ".Arn":      {"logs:CreateLogStream", "logs:PutLogEvents"},
		"*":                         {"xray:PutTelemetryRecords", "xray:PutTraceSegments"},
	}
	if diff := cmp.Diff(want, access(gs, s.id(fn.Role))); diff != "" {
		t.Errorf("heartbeat role access (-want +got):\n%s", diff)
	}
	chain := map[string]any{"dynamodb:LeadingKeys": []any{tenancy.HeartbeatTenant}}
	var onLog []grant
	for _, g := range gs {
		if slices.Contains(g.Roles, s.id(fn.Role)) && cmp.Equal(g.Resources, []any{getAtt(LogicalEventsTable, "Arn")}) {
			onLog = append(onLog, g)
		}
	}
	if len(onLog) != 2 {
		t.Fatalf("%d statements on the events table, want 2 (append, read): %+v", len(onLog), onLog)
	}
	for _, g := range onLog {
		wantCond := map[string]any{"ForAllValues:StringEquals": chain}
		if slices.Contains(g.Actions, "dynamodb:PutItem") {
			wantCond["ForAnyValue:StringEquals"] = map[string]any{"dynamodb:EnclosingOperation": []any{"TransactWriteItems"}}
		}
		if diff := cmp.Diff(wantCond, g.Condition); diff != "" {
			t.Errorf("statement %v on the log: condition (-want +got):\n%s", g.Actions, diff)
		}
	}
	env := props(s.resources("AWS::Lambda::Function")[s.id(fn.Fn)])["Environment"].(map[string]any)["Variables"].(map[string]any)
	if diff := cmp.Diff(ref(LogicalEventsTable), env[keys.EnvEventsTable]); diff != "" {
		t.Errorf("EVENTS_TABLE (-want +got):\n%s", diff)
	}
	if r := props(s.resources("AWS::Lambda::Function")[s.id(fn.Fn)])["ReservedConcurrentExecutions"]; r != 1.0 {
		t.Errorf("reserved concurrency %v, want 1", r)
	}
}

// TestHeartbeatAlarms: no heartbeat handled on the DURABLE lane for five
// one-minute periods alarms, missing data breaching (silence is the failure
// it exists to see), to the alarm topic, ALARM and OK; a late heartbeat
// alarms too; the dashboard shows both metrics.
func TestHeartbeatAlarms(t *testing.T) {
	s := synth(t)
	dims := map[string]any{"Lane": string(catalog.Durable)}
	p, ok := s.alarmOn(keys.MetricNamespace, keys.MetricHeartbeatsDelivered, dims)
	if !ok {
		t.Fatalf("no alarm on %s by Lane DURABLE", keys.MetricHeartbeatsDelivered)
	}
	got := map[string]any{"Statistic": p["Statistic"], "Period": p["Period"], "EvaluationPeriods": p["EvaluationPeriods"], "DatapointsToAlarm": p["DatapointsToAlarm"],
		"Threshold": p["Threshold"], "ComparisonOperator": p["ComparisonOperator"], "TreatMissingData": p["TreatMissingData"]}
	want := map[string]any{"Statistic": "Sum", "Period": 60.0, "EvaluationPeriods": 5.0, "DatapointsToAlarm": 5.0,
		"Threshold": 1.0, "ComparisonOperator": "LessThanThreshold", "TreatMissingData": "breaching"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("HeartbeatMissing (-want +got):\n%s", diff)
	}
	for _, k := range []string{"AlarmActions", "OKActions"} {
		if diff := cmp.Diff([]any{ref(LogicalAlarmTopic)}, p[k]); diff != "" {
			t.Errorf("HeartbeatMissing %s (-want +got):\n%s", k, diff)
		}
	}
	desc, _ := p["AlarmDescription"].(string)
	for _, w := range []string{tenancy.HeartbeatTenant, "Pipe", "durable-consumer", "Runbook: the heartbeat stopped"} {
		if !strings.Contains(desc, w) {
			t.Errorf("HeartbeatMissing description lacks %q: %s", w, desc)
		}
	}
	late, ok := s.alarmOn(keys.MetricNamespace, keys.MetricHeartbeatLag, dims)
	if !ok {
		t.Fatalf("no alarm on %s by Lane DURABLE", keys.MetricHeartbeatLag)
	}
	if late["Statistic"] != "Maximum" || late["Threshold"] != 120000.0 || late["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
		t.Errorf("HeartbeatLate %v %v %v, want Maximum >= 120000 ms", late["Statistic"], late["ComparisonOperator"], late["Threshold"])
	}
	if diff := cmp.Diff([]any{ref(LogicalAlarmTopic)}, late["AlarmActions"]); diff != "" {
		t.Errorf("HeartbeatLate actions (-want +got):\n%s", diff)
	}
	body, _ := json.Marshal(props(s.resources("AWS::CloudWatch::Dashboard")[s.id(s.stack.Alarms.Dashboard)])["DashboardBody"])
	for _, m := range []string{keys.MetricHeartbeatsDelivered, keys.MetricHeartbeatLag} {
		if !strings.Contains(string(body), m) {
			t.Errorf("dashboard does not show %s", m)
		}
	}
	// The writer's own failures alarm like every function's.
	errs, ok := s.alarmOn("AWS/Lambda", "Errors", map[string]any{"FunctionName": ref(s.id(s.stack.Heartbeat.Function.Fn))})
	if !ok || errs["TreatMissingData"] != "notBreaching" {
		t.Errorf("heartbeat function Errors alarm: %v %v, want one (missing data not breaching)", ok, errs["TreatMissingData"])
	}
}
