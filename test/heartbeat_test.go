package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/testkit"
)

// beatEvery is the heartbeat schedule's period on the twin: the template's
// rate(1 minute), sped up so that the alarm's five periods pass in seconds.
const beatEvery = 300 * time.Millisecond

// heartbeatAlarm is the template's alarm on HeartbeatsDelivered, as
// CloudWatch would evaluate it.
type heartbeatAlarm struct {
	Namespace, MetricName, Statistic, ComparisonOperator, TreatMissingData string
	Dimensions                                                             []struct{ Name, Value string }
	Period, EvaluationPeriods, DatapointsToAlarm                           int
	Threshold                                                              float64
	AlarmActions, OKActions                                                []any
}

func findHeartbeatAlarm(t *testing.T, tmpl *cfn.Template) heartbeatAlarm {
	t.Helper()
	var found []heartbeatAlarm
	for _, r := range tmpl.OfType("AWS::CloudWatch::Alarm") {
		if r.Properties["MetricName"] != keys.MetricHeartbeatsDelivered {
			continue
		}
		b, _ := json.Marshal(r.Properties)
		var a heartbeatAlarm
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatalf("alarm %s: %v", r.LogicalID, err)
		}
		found = append(found, a)
	}
	if len(found) != 1 {
		t.Fatalf("%d alarms on %s in the template, want 1", len(found), keys.MetricHeartbeatsDelivered)
	}
	return found[0]
}

// evaluate is CloudWatch's evaluation of a threshold alarm over its last
// EvaluationPeriods datapoints (NaN: no data in that period): ALARM when at
// least DatapointsToAlarm of them breach, missing ones counting as
// TreatMissingData says.
func (a heartbeatAlarm) evaluate(points []float64) string {
	breaching, present := 0, 0
	for _, v := range points[len(points)-a.EvaluationPeriods:] {
		if math.IsNaN(v) {
			if a.TreatMissingData == "breaching" {
				breaching++
			}
			continue
		}
		present++
		var breach bool
		switch a.ComparisonOperator {
		case "LessThanThreshold":
			breach = v < a.Threshold
		case "GreaterThanOrEqualToThreshold":
			breach = v >= a.Threshold
		}
		if breach {
			breaching++
		}
	}
	switch {
	case breaching >= a.DatapointsToAlarm:
		return "ALARM"
	case present == 0 && a.TreatMissingData == "missing":
		return "INSUFFICIENT_DATA"
	}
	return "OK"
}

// delivered buckets the HeartbeatsDelivered EMF lines durable-consumer
// printed into periods of beatEvery from start: the sum per period, NaN
// where no line fell (CloudWatch's missing data).
func delivered(t *testing.T, s *testkit.Stack, start time.Time, periods int) []float64 {
	t.Helper()
	out := make([]float64, periods)
	for i := range out {
		out[i] = math.NaN()
	}
	for _, l := range s.Lines(t, keys.FnDurableConsumer, `"`+keys.MetricHeartbeatsDelivered+`"`) {
		var doc struct {
			AWS struct {
				Timestamp int64
			} `json:"_aws"`
			Lane string
			// One value, or the values of one invocation's flush.
			N json.RawMessage `json:"HeartbeatsDelivered"`
		}
		if err := json.Unmarshal([]byte(l[strings.Index(l, "{"):]), &doc); err != nil {
			t.Fatalf("EMF line %s: %v", l, err)
		}
		if doc.Lane != "DURABLE" {
			t.Errorf("EMF line %s: Lane %q, want DURABLE (the alarm's dimension)", l, doc.Lane)
		}
		i := int(time.UnixMilli(doc.AWS.Timestamp).Sub(start) / beatEvery)
		if i < 0 || i >= periods {
			continue
		}
		var vs []float64
		if err := json.Unmarshal(doc.N, &vs); err != nil {
			var v float64
			if err := json.Unmarshal(doc.N, &v); err != nil {
				t.Fatalf("EMF line %s: HeartbeatsDelivered is neither a number nor a list", l)
			}
			vs = []float64{v}
		}
		if math.IsNaN(out[i]) {
			out[i] = 0
		}
		for _, v := range vs {
			out[i] += v
		}
	}
	return out
}

// lastDelivered is the time of the newest HeartbeatsDelivered line.
func lastDelivered(t *testing.T, s *testkit.Stack) time.Time {
	t.Helper()
	var last time.Time
	for _, l := range s.Lines(t, keys.FnDurableConsumer, `"`+keys.MetricHeartbeatsDelivered+`"`) {
		var doc struct {
			AWS struct{ Timestamp int64 } `json:"_aws"`
		}
		if err := json.Unmarshal([]byte(l[strings.Index(l, "{"):]), &doc); err != nil {
			t.Fatalf("EMF line %s: %v", l, err)
		}
		if at := time.UnixMilli(doc.AWS.Timestamp); at.After(last) {
			last = at
		}
	}
	return last
}

func beatsWritten(t *testing.T, s *testkit.Stack) int {
	return len(s.Lines(t, keys.FnHeartbeat, "heartbeat written"))
}

// TestHeartbeatFlowsAndStopsAlarm runs the heartbeat schedule on an idle
// orders stack: its beats flow through the log, the Pipe, the queue and
// durable-consumer, which prints HeartbeatsDelivered, and the template's
// alarm evaluates OK. With the Pipe stopped the writer goes on but nothing
// is delivered, and the same alarm, over the same metric, evaluates ALARM
// (it would stay OK if missing data did not breach). Started again, the
// beats held in the stream arrive and the alarm clears; the heartbeat's
// chain reconciles intact.
func TestHeartbeatFlowsAndStopsAlarm(t *testing.T) {
	// Not parallel (see parallel in harness_test.go): a beat delivered one 300 ms
	// alarm period late on a loaded machine breaches the alarm it expects OK.
	tmpl, _, _ := assemble(t)
	alarm := findHeartbeatAlarm(t, tmpl)
	o := ordersApp
	o.Schedules = map[string]time.Duration{keys.FnHeartbeat: beatEvery}
	s := testkit.Up(t, o)
	start := time.Now()
	n := alarm.EvaluationPeriods
	testkit.Eventually(t, time.Minute, "heartbeats delivered in every one of the alarm's periods", func() (bool, string) {
		pts := delivered(t, s, start, int(time.Since(start)/beatEvery))
		if len(pts) < n+2 {
			return false, fmt.Sprintf("%d periods so far", len(pts))
		}
		got := alarm.evaluate(pts[:len(pts)-1]) // the current period is still open
		return got == "OK", fmt.Sprintf("alarm %s over %v", got, pts)
	})
	// Idle stack, running path: nothing else alarms on the heartbeat chain.
	if r := s.Reconcile(t, tenancy.HeartbeatTenant); r["chain_intact"] != true || r["last_seq"].(float64) < 3 {
		t.Errorf("reconcile %s: %v, want its chain intact with the beats so far", tenancy.HeartbeatTenant, r)
	}
	for _, fn := range []string{keys.FnDurableConsumer, keys.FnNotary, keys.FnTamperWatch} {
		if ls := s.Lines(t, fn, `"level":"ERROR"`); len(ls) > 0 {
			t.Errorf("%s logged ERROR lines on a healthy heartbeat: %v", fn, ls)
		}
	}

	pipe := ""
	for _, r := range tmpl.OfType(cfn.TypePipe) {
		pipe = r.LogicalID
	}
	if err := s.Twin.SetMappingEnabled(pipe, false); err != nil {
		t.Fatal(err)
	}
	// What the Pipe had already read (a batch in flight) is delivered
	// first: the window starts once the queue is empty and no beat has
	// arrived for two periods while the writer went on.
	queue := durableQueue(t, tmpl)
	testkit.Eventually(t, time.Minute, "the DURABLE queue to drain and deliveries to stop", func() (bool, string) {
		v, f, err := s.Twin.QueueDepth(t.Context(), queue)
		last := lastDelivered(t, s)
		return err == nil && v+f == 0 && time.Since(last) > 2*beatEvery, fmt.Sprintf("%d visible, %d in flight, %v; last beat handled %v ago", v, f, err, time.Since(last))
	})
	stopped, before := time.Now(), beatsWritten(t, s)
	testkit.Eventually(t, time.Minute, "the alarm's periods to pass with the Pipe stopped", func() (bool, string) {
		return time.Since(stopped) > time.Duration(n+1)*beatEvery && beatsWritten(t, s) >= before+n, fmt.Sprintf("%d beats written since", beatsWritten(t, s)-before)
	})
	pts := delivered(t, s, stopped, n)
	if slices.ContainsFunc(pts, func(v float64) bool { return !math.IsNaN(v) }) {
		t.Fatalf("heartbeats delivered with the Pipe stopped: %v", pts)
	}
	if got := alarm.evaluate(pts); got != "ALARM" {
		t.Errorf("HeartbeatMissing over %d silent periods: %s, want ALARM", n, got)
	}
	quiet := alarm
	quiet.TreatMissingData = "notBreaching"
	if got := quiet.evaluate(pts); got != "OK" {
		t.Errorf("the same alarm with missing data not breaching: %s, want OK (silence would go unseen)", got)
	}

	if err := s.Twin.SetMappingEnabled(pipe, true); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	testkit.Eventually(t, time.Minute, "the alarm to clear once the Pipe runs again", func() (bool, string) {
		pts := delivered(t, s, resumed, int(time.Since(resumed)/beatEvery))
		if len(pts) < n+1 {
			return false, fmt.Sprintf("%d periods so far", len(pts))
		}
		got := alarm.evaluate(pts[:len(pts)-1])
		return got == "OK", fmt.Sprintf("alarm %s over %v", got, pts)
	})
	if r := s.Reconcile(t, tenancy.HeartbeatTenant); r["chain_intact"] != true {
		t.Errorf("reconcile %s after the stop: %v, want its chain intact", tenancy.HeartbeatTenant, r)
	}
}

// consumerMappings returns durable-consumer's event source mappings.
func consumerMappings(tm *cfn.Template) []*cfn.Resource {
	var out []*cfn.Resource
	for _, m := range tm.OfType(cfn.TypeMapping) {
		for _, id := range tm.References(m.Properties["FunctionName"]) {
			if d, _ := tm.Resources[id].Properties["Description"].(string); strings.Contains(d, "DURABLE lane") {
				out = append(out, m)
			}
		}
	}
	return out
}

// durableQueue is the logical ID of the queue durable-consumer reads.
func durableQueue(t *testing.T, tm *cfn.Template) string {
	t.Helper()
	ms := consumerMappings(tm)
	if len(ms) != 1 {
		t.Fatalf("%d mappings of durable-consumer, want 1", len(ms))
	}
	for _, id := range tm.References(ms[0].Properties["EventSourceArn"]) {
		if tm.Resources[id].Type == cfn.TypeQueue {
			return id
		}
	}
	t.Fatalf("durable-consumer's mapping reads no queue of the stack")
	return ""
}

// TestHeartbeatConsumerMappingDisabled: with durable-consumer's queue
// mapping disabled, beats are written and reach the queue, none is handled,
// and the heartbeat alarm evaluates ALARM.
func TestHeartbeatConsumerMappingDisabled(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	tmpl, _, _ := assemble(t)
	alarm := findHeartbeatAlarm(t, tmpl)
	o := ordersApp
	o.Schedules = map[string]time.Duration{keys.FnHeartbeat: beatEvery}
	disabled := 0
	o.Mutate = func(tm *cfn.Template) {
		for _, m := range consumerMappings(tm) {
			m.Properties["Enabled"] = false
			disabled++
		}
	}
	s := testkit.Up(t, o)
	if disabled != 1 {
		t.Fatalf("disabled %d mappings of durable-consumer, want 1", disabled)
	}
	start, n := time.Now(), alarm.EvaluationPeriods
	testkit.Eventually(t, time.Minute, "the alarm's periods to pass with the mapping disabled", func() (bool, string) {
		return time.Since(start) > time.Duration(n+1)*beatEvery && beatsWritten(t, s) >= n, fmt.Sprintf("%d beats written", beatsWritten(t, s))
	})
	pts := delivered(t, s, start, n)
	if got := alarm.evaluate(pts); got != "ALARM" {
		t.Errorf("HeartbeatMissing with durable-consumer's mapping disabled: %s over %v, want ALARM", got, pts)
	}
}
