package backbone

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
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
	if diff := cmp.Diff([]string{LogicalChangeFeedDLQ, LogicalDurableDLQ, LogicalNotaryDLQ, LogicalPipeDLQ, LogicalTamperDLQ}, got); diff != "" {
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
		// A dead letter left too long: its stream range expires 24 h after
		// the write, and the Pipe gives up after 6 h, so the age alarm must
		// fire well inside the remaining 18 h.
		p, ok = s.alarmOn("AWS/SQS", "ApproximateAgeOfOldestMessage", map[string]any{"QueueName": getAtt(id, "QueueName")})
		if !ok {
			t.Errorf("no ApproximateAgeOfOldestMessage alarm on %s", id)
			continue
		}
		if th, _ := p["Threshold"].(float64); th <= 0 || th > 12*3600 || p["Statistic"] != "Maximum" {
			t.Errorf("%s oldest-message alarm: %v of %vs, want Maximum over at most 12 h", id, p["Statistic"], p["Threshold"])
		}
	}
}

// TestEveryFunctionHasErrorAndThrottleAlarms walks every function in the
// template but the team's own (its alarms are the team's).
func TestEveryFunctionHasErrorAndThrottleAlarms(t *testing.T) {
	s := synth(t)
	fns := s.resources("AWS::Lambda::Function")
	delete(fns, s.id(s.stack.Bench))
	if len(fns) != len(keys.Functions) {
		t.Errorf("%d functions, want %d", len(fns), len(keys.Functions))
	}
	for id := range fns {
		for _, metric := range []string{"Errors", "Throttles"} {
			p, ok := s.alarmOn("AWS/Lambda", metric, map[string]any{"FunctionName": ref(id)})
			if !ok {
				t.Errorf("function %s has no %s alarm", id, metric)
				continue
			}
			if p["Statistic"] != "Sum" || p["Threshold"] != 1.0 || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
				t.Errorf("%s %s alarm: %v %v %v, want Sum >= 1", id, metric, p["Statistic"], p["ComparisonOperator"], p["Threshold"])
			}
		}
	}
}

// TestTamperAlarm: any TamperDetected in a minute alarms in that minute.
func TestTamperAlarm(t *testing.T) {
	s := synth(t)
	q := EMFQuery("SUM", keys.MetricTamperDetected)
	p, ok := s.alarmOnQuery(q)
	if !ok {
		t.Fatalf("no alarm on %s", q)
	}
	if p["Threshold"] != 1.0 || p["EvaluationPeriods"] != 1.0 || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
		t.Errorf("tamper alarm %v %v over %v periods, want >= 1 in one period", p["ComparisonOperator"], p["Threshold"], p["EvaluationPeriods"])
	}
	for _, m := range list(p["Metrics"]) {
		if period, _ := m.(map[string]any)["Period"].(float64); period != 60 {
			t.Errorf("tamper alarm period %vs, want 60", period)
		}
	}
	if _, ok := s.alarmOn("AWS/Lambda", "IteratorAge", map[string]any{"FunctionName": ref(s.id(s.stack.Tamper.Function.Fn))}); !ok {
		t.Error("no IteratorAge alarm on tamper-watch")
	}
}

// TestPipeStoppedAlarm: a Pipe that is stopped publishes no failures; the
// alarm compares the log's writes with the Pipe's events.
func TestPipeStoppedAlarm(t *testing.T) {
	s := synth(t)
	p, ok := s.alarmOnQuery("FILL(piped, 0) == 0")
	if !ok {
		t.Fatal("no alarm for a stopped Pipe")
	}
	b, _ := json.Marshal(p["Metrics"])
	for _, want := range []string{
		`"MetricName":"ConsumedWriteCapacityUnits"`, `"Namespace":"AWS/DynamoDB"`, `{"Name":"TableName","Value":{"Ref":"` + LogicalEventsTable + `"}}`,
		`"MetricName":"EventCount"`, `"Namespace":"` + PipesNamespace + `"`, `{"Name":"PipeName","Value":{"Ref":"` + LogicalEventsPipe + `"}}`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("stopped-Pipe alarm metrics lack %s:\n%s", want, b)
		}
	}
	if p["EvaluationPeriods"] != 2.0 || p["DatapointsToAlarm"] != 2.0 {
		t.Errorf("stopped-Pipe alarm over %v/%v periods, want 2 of 2", p["DatapointsToAlarm"], p["EvaluationPeriods"])
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
	if n != 3 {
		t.Errorf("%d stream mappings, want 3 (changefeed, the notary on the events stream, tamper-watch on the state stream)", n)
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
	if _, ok := s.alarmOnQuery(EMFQuery("MAX", keys.MetricPipeRecordAge)); !ok {
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
	for _, metric := range []string{keys.MetricDeadLettered, keys.MetricChainBreaks, keys.MetricRejectedRecords, keys.MetricRepairOpen, keys.MetricChangeRejected,
		keys.MetricEffectUnknown} {
		q := EMFQuery("SUM", metric)
		if p, ok := s.alarmOnQuery(q); !ok {
			t.Errorf("no alarm on %s", q)
		} else if p["Threshold"] != 1.0 || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
			t.Errorf("%s alarm fires at %v %v, want >= 1", metric, p["ComparisonOperator"], p["Threshold"])
		}
	}
}

// TestCheckpointInvalidAlarm: any checkpoint object that does not verify
// alarms within its five minutes, whatever Log dimension it carries.
func TestCheckpointInvalidAlarm(t *testing.T) {
	s := synth(t)
	q := EMFQuery("SUM", keys.MetricCheckpointInvalid)
	p, ok := s.alarmOnQuery(q)
	if !ok {
		t.Fatalf("no alarm on %s", q)
	}
	if p["Threshold"] != 1.0 || p["EvaluationPeriods"] != 1.0 || p["DatapointsToAlarm"] != 1.0 || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
		t.Errorf("CheckpointInvalid alarm %v %v over %v/%v periods, want >= 1 in one period", p["ComparisonOperator"], p["Threshold"], p["DatapointsToAlarm"], p["EvaluationPeriods"])
	}
	for _, m := range list(p["Metrics"]) {
		if period, _ := m.(map[string]any)["Period"].(float64); period != 300 {
			t.Errorf("CheckpointInvalid alarm period %vs, want 300", period)
		}
	}
	if diff := cmp.Diff([]any{ref(LogicalAlarmTopic)}, p["AlarmActions"]); diff != "" {
		t.Errorf("CheckpointInvalid alarm actions (-want +got):\n%s", diff)
	}
}

// TestReconcileRoundStalledAlarm: the incremental round's age (the metric
// reconcile emits with Mode incremental) over 2 hours alarms, and so does
// silence: a stopped schedule emits nothing.
func TestReconcileRoundStalledAlarm(t *testing.T) {
	s := synth(t)
	p, ok := s.alarmOn(keys.MetricNamespace, keys.MetricRoundAge, map[string]any{"Mode": string(reconcile.Incremental)})
	if !ok {
		t.Fatalf("no alarm on %s with Mode %s", keys.MetricRoundAge, reconcile.Incremental)
	}
	if p["Statistic"] != "Maximum" || p["Threshold"] != 7200.0 || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
		t.Errorf("round alarm %v %v %v, want Maximum >= 7200 s", p["Statistic"], p["ComparisonOperator"], p["Threshold"])
	}
	if p["TreatMissingData"] != "breaching" {
		t.Errorf("round alarm TreatMissingData %v, want breaching (a stopped schedule emits nothing)", p["TreatMissingData"])
	}
	// The period must hold at least one scheduled run, or silence between
	// two runs would page.
	if period, _ := p["Period"].(float64); period < 2*15*60 || period*p["EvaluationPeriods"].(float64) > 3600 {
		t.Errorf("round alarm %vs x %v periods: want at least two 15-minute runs per period, and silence paging within an hour", period, p["EvaluationPeriods"])
	}
	if diff := cmp.Diff([]any{ref(LogicalAlarmTopic)}, p["AlarmActions"]); diff != "" {
		t.Errorf("round alarm actions (-want +got):\n%s", diff)
	}
}

// TestReconcileFullRoundStalledAlarm: a daily full round still running 12
// hours after its start alarms; silence between rounds does not.
func TestReconcileFullRoundStalledAlarm(t *testing.T) {
	s := synth(t)
	p, ok := s.alarmOn(keys.MetricNamespace, keys.MetricRoundAge, map[string]any{"Mode": string(reconcile.Full)})
	if !ok {
		t.Fatalf("no alarm on %s with Mode %s", keys.MetricRoundAge, reconcile.Full)
	}
	if p["Statistic"] != "Maximum" || p["Threshold"] != 12*3600.0 || p["TreatMissingData"] != "notBreaching" {
		t.Errorf("full round alarm %v >= %v, missing %v; want Maximum >= 43200 s, notBreaching", p["Statistic"], p["Threshold"], p["TreatMissingData"])
	}
}

// TestAlarmActionsAndDashboard walks every alarm in the template: each one
// notifies the stack's own topic on ALARM and on OK, and says what it means;
// the topic has the context's email subscription; the dashboard exists.
func TestAlarmActionsAndDashboard(t *testing.T) {
	s := synth(t)
	alarms := s.resources("AWS::CloudWatch::Alarm")
	if len(alarms) != len(s.stack.Alarms.ByName) || len(alarms) < 30 {
		t.Errorf("%d alarms in the template, %d built", len(alarms), len(s.stack.Alarms.ByName))
	}
	if _, ok := s.resources("AWS::SNS::Topic")[LogicalAlarmTopic]; !ok {
		t.Fatalf("no alarm topic %s", LogicalAlarmTopic)
	}
	subs := s.resources("AWS::SNS::Subscription")
	if len(subs) != 1 {
		t.Errorf("%d subscriptions, want 1 (alarmEmail)", len(subs))
	}
	for id, sub := range subs {
		p := props(sub)
		if p["Protocol"] != "email" || p["Endpoint"] != testAlarmEmail || !cmp.Equal(p["TopicArn"], ref(LogicalAlarmTopic)) {
			t.Errorf("subscription %s = %v, want email %s on %s", id, p, testAlarmEmail, LogicalAlarmTopic)
		}
	}
	for id, a := range alarms {
		p := props(a)
		for _, k := range []string{"AlarmActions", "OKActions"} {
			if diff := cmp.Diff([]any{ref(LogicalAlarmTopic)}, p[k]); diff != "" {
				t.Errorf("%s %s (-want +got):\n%s", id, k, diff)
			}
		}
		if d, _ := p["AlarmDescription"].(string); len(d) < 40 {
			t.Errorf("%s: description %q does not say what to do", id, d)
		}
		// Only the stalled-round and heartbeat alarms treat silence as
		// trouble: their metrics come from schedules that must keep running.
		wantMissing := "notBreaching"
		if id == s.id(s.stack.Alarms.ByName["ReconcileRoundStalled"]) || id == s.id(s.stack.Alarms.ByName["HeartbeatMissing"]) {
			wantMissing = "breaching"
		}
		if p["TreatMissingData"] != wantMissing {
			t.Errorf("%s TreatMissingData = %v, want %s", id, p["TreatMissingData"], wantMissing)
		}
	}
	if n := len(s.resources("AWS::CloudWatch::Dashboard")); n != 1 {
		t.Errorf("%d dashboards, want 1", n)
	}
}

// TestNoQueryCountsTwice: every function writes each EMF metric with its own
// dimensions and again with a Service dimension set (obs.PerInvocation), so a
// Metrics Insights query over the bare namespace would SUM each value twice.
// No alarm or dashboard widget queries it: each reads the Service series.
func TestNoQueryCountsTwice(t *testing.T) {
	s := synth(t)
	raw, err := json.Marshal(s.Doc)
	if err != nil {
		t.Fatal(err)
	}
	// The dashboard's body is JSON inside a JSON string: drop every escape.
	text := strings.ReplaceAll(string(raw), `\`, "")
	bare := `FROM "` + keys.MetricNamespace + `"`
	if n := strings.Count(text, bare); n > 0 {
		t.Errorf("%d Metrics Insights queries read %s: each value of a metric would count twice; use EMFQuery", n, bare)
	}
	// 9 alarms and 11 dashboard graphs.
	if n := strings.Count(text, `SCHEMA("`+keys.MetricNamespace+`", `+obs.ServiceDimension+`)`); n < 20 {
		t.Errorf("%d queries read the Service series: want every EMF alarm and graph (20)", n)
	}
}

// TestUnknownEffectsAlarmUntilDecided: an effect of unknown outcome alarms
// when it happens (EffectUnknown) and keeps alarming while reconcile finds it
// undecided (the maximum of UnknownEffectsOpen, 1 or more), so the alarm does
// not return to OK while the dead letter waits for a person.
func TestUnknownEffectsAlarmUntilDecided(t *testing.T) {
	s := synth(t)
	q := EMFQuery("MAX", keys.MetricUnknownEffectsOpen)
	p, ok := s.alarmOnQuery(q)
	if !ok {
		t.Fatalf("no alarm on %s", q)
	}
	if p["Threshold"] != 1.0 || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
		t.Errorf("alarm fires at %v %v, want >= 1", p["ComparisonOperator"], p["Threshold"])
	}
	if d, _ := p["AlarmDescription"].(string); !strings.Contains(d, "fourlanes effects -redo KEY") {
		t.Errorf("the alarm does not say what to do: %q", d)
	}
}

// TestUndeclaredEventsAlarm: an event of a type or version the backbone's
// build does not declare (a producer deployed first) pages within five
// minutes, one contributor per type and version, so the alarm names them,
// and its description says what to deploy and run.
func TestUndeclaredEventsAlarm(t *testing.T) {
	s := synth(t)
	q := EMFQueryBy("SUM", keys.MetricUndeclaredEvents, "Type", "Version")
	if want := `SELECT SUM(UndeclaredEvents) FROM SCHEMA("fourlanes", Type, Version) GROUP BY Type, Version`; q != want {
		t.Errorf("query %s, want %s", q, want)
	}
	p, ok := s.alarmOnQuery(q)
	if !ok {
		t.Fatalf("no alarm on %s", q)
	}
	if p["Threshold"] != 1.0 || p["EvaluationPeriods"] != 1.0 || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" || p["TreatMissingData"] != "notBreaching" {
		t.Errorf("UndeclaredEvents alarm %v %v over %v periods, missing %v; want >= 1 in one period, missing not breaching",
			p["ComparisonOperator"], p["Threshold"], p["EvaluationPeriods"], p["TreatMissingData"])
	}
	for _, m := range list(p["Metrics"]) {
		if period, _ := m.(map[string]any)["Period"].(float64); period != 300 {
			t.Errorf("UndeclaredEvents alarm period %vs, want 300", period)
		}
	}
	if diff := cmp.Diff([]any{ref(LogicalAlarmTopic)}, p["AlarmActions"]); diff != "" {
		t.Errorf("UndeclaredEvents alarm actions (-want +got):\n%s", diff)
	}
	desc, _ := p["AlarmDescription"].(string)
	for _, want := range []string{"Type and Version", "dead-lettered alone", "Deploy the backbone with the producer's catalog", "dlq-repair", "Deploy order"} {
		if !strings.Contains(desc, want) {
			t.Errorf("UndeclaredEvents description %q lacks %q", desc, want)
		}
	}
	if _, ok := s.stack.Alarms.ByName["UndeclaredEvents"]; !ok {
		t.Error("Alarms.ByName has no UndeclaredEvents")
	}
}

// TestDeliveryLagAlarmsAndDashboard: every DURABLE and BEST_EFFORT
// subscription of the application has an alarm on its p99 delivery lag
// (EMF DeliveryLag by Subscription: commit → handler done), and the
// dashboard graphs its p50 and p99.
func TestDeliveryLagAlarmsAndDashboard(t *testing.T) {
	s := synth(t)
	cat, err := widgetApp.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	var subs []string
	for _, sub := range cat.Subscriptions() {
		if sub.Lane == catalog.Durable || sub.Lane == catalog.BestEffort {
			subs = append(subs, sub.Name)
		}
	}
	if len(subs) == 0 {
		t.Fatal("the test application has no DURABLE or BEST_EFFORT subscription")
	}
	var dash string
	for _, d := range s.resources("AWS::CloudWatch::Dashboard") {
		raw, _ := json.Marshal(props(d)["DashboardBody"])
		dash = string(raw)
	}
	for _, sub := range subs {
		p, ok := s.alarmOn(keys.MetricNamespace, keys.MetricDeliveryLag, map[string]any{"Subscription": sub})
		if !ok {
			t.Errorf("subscription %s has no %s alarm", sub, keys.MetricDeliveryLag)
			continue
		}
		if p["ExtendedStatistic"] != "p99" || p["Threshold"] != float64(lagThresholdMs) || p["Period"] != float64(300) ||
			p["EvaluationPeriods"] != float64(3) || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
			t.Errorf("%s lag alarm: got statistic %v threshold %v period %v over %v periods (%v); want p99 >= %d ms over 3 of 300 s",
				sub, p["ExtendedStatistic"], p["Threshold"], p["Period"], p["EvaluationPeriods"], p["ComparisonOperator"], lagThresholdMs)
		}
		for _, stat := range []string{"p50", "p99"} {
			// A graph metric: [namespace, name, dimension, value, {label, stat}]
			// (the period is the widget's 300 s default, so CDK leaves it out).
			want := `\"` + keys.MetricNamespace + `\",\"` + keys.MetricDeliveryLag + `\",\"Subscription\",\"` + sub + `\",{\"label\":\"` + sub + " " + stat + `\",\"stat\":\"` + stat + `\"}`
			if !strings.Contains(dash, want) {
				t.Errorf("the dashboard has no %s graph of %s's delivery lag (want %s in its body)", stat, sub, want)
			}
		}
	}
}
