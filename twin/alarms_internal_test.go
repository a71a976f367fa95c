package twin

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// alarmTwin is a twin of tmpl that creates nothing but placeholders: what
// the alarm evaluation reads (the template, Ref, the EMF lines).
func alarmTwin(t *testing.T, tmpl string) *Twin {
	t.Helper()
	tp, err := cfn.Parse([]byte(tmpl))
	if err != nil {
		t.Fatal(err)
	}
	tw := &Twin{t: tp, cfg: Config{StackName: "alarms"}, resources: map[string]*resource{}, creating: map[string]bool{}}
	tw.rv = &cfn.Resolver{T: tp, IDs: tw, Pseudo: cfn.Pseudo{Region: localaws.Region, AccountID: localaws.AccountID, StackName: "alarms"}}
	tw.ctx = context.Background()
	return tw
}

func emf(at time.Time, dims, metric string, value any, attrs string) string {
	return fmt.Sprintf(`{"_aws":{"Timestamp":%d,"CloudWatchMetrics":[{"Namespace":"fourlanes","Dimensions":[[%s]],"Metrics":[{"Name":"%s","Unit":"Count"}]}]},%s,"%s":%v}`,
		at.UnixMilli(), dims, metric, attrs, metric, value)
}

// TestAlarmsEvaluateAndNotify: an owner's alarm on a Metrics Insights query
// (as infra/backbone writes it) and a metric alarm are evaluated over the
// EMF lines the functions printed: a dead letter of the owner's
// subscription puts its alarm in ALARM and notifies both topics of its
// AlarmActions, once; another subscription's does not; the alarm goes back
// to OK (OKActions) once its period has passed with no data
// (notBreaching). A series with other dimensions than the schema's does not
// match. An alarm the twin cannot evaluate says why.
func TestAlarmsEvaluateAndNotify(t *testing.T) {
	tw := alarmTwin(t, `{"Resources": {
	  "Stack": {"Type": "AWS::SNS::Topic"}, "Team": {"Type": "AWS::SNS::Topic"},
	  "TeamDead": {"Type": "AWS::CloudWatch::Alarm", "Properties": {
	    "Metrics": [{"Id": "expr_1", "Expression": "SELECT SUM(DeadLettered) FROM SCHEMA(\"fourlanes\", Subscription) WHERE Subscription = 'a.one' OR Subscription = 'a.two'", "Period": 300, "ReturnData": true}],
	    "Threshold": 1, "EvaluationPeriods": 1, "ComparisonOperator": "GreaterThanOrEqualToThreshold", "TreatMissingData": "notBreaching",
	    "AlarmActions": [{"Ref": "Team"}, {"Ref": "Stack"}], "OKActions": [{"Ref": "Team"}, {"Ref": "Stack"}]}},
	  "Lag": {"Type": "AWS::CloudWatch::Alarm", "Properties": {
	    "MetricName": "Lag", "Namespace": "fourlanes", "Dimensions": [{"Name": "Lane", "Value": "DURABLE"}], "Statistic": "Maximum", "Period": 60,
	    "Threshold": 10, "EvaluationPeriods": 2, "DatapointsToAlarm": 2, "ComparisonOperator": "GreaterThanThreshold",
	    "AlarmActions": [{"Ref": "Stack"}]}},
	  "Math": {"Type": "AWS::CloudWatch::Alarm", "Properties": {
	    "Metrics": [{"Id": "a", "MetricStat": {}, "ReturnData": false}, {"Id": "b", "Expression": "a*2"}],
	    "Threshold": 1, "EvaluationPeriods": 1, "ComparisonOperator": "GreaterThanThreshold"}}
	}}`)
	stack, _ := tw.Ref("Stack")
	team, _ := tw.Ref("Team")
	if !strings.HasPrefix(stack, "arn:aws:sns:") || stack == team {
		t.Fatalf("topic Refs %q and %q, want two topic ARNs", stack, team)
	}
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	eval := func(at time.Time) map[string]AlarmState {
		t.Helper()
		sts, err := tw.EvaluateAlarms(at)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]AlarmState{}
		for _, s := range sts {
			out[s.LogicalID] = s
		}
		return out
	}

	tw.metrics.observe(emf(base.Add(time.Second), `"Subscription"`, "DeadLettered", 1, `"Subscription":"b.other"`))
	tw.metrics.observe(emf(base.Add(time.Second), `"Subscription","Tenant"`, "DeadLettered", 1, `"Subscription":"a.one","Tenant":"acme"`))
	st := eval(base.Add(2 * time.Second))
	if s := st["TeamDead"]; s.State != AlarmOK {
		t.Errorf("TeamDead after another subscription's dead letter (and a series of other dimensions): %+v, want OK", s)
	}
	if s := st["Math"]; s.Unsupported == "" || !strings.Contains(s.Unsupported, "metric math") {
		t.Errorf("Math: %+v, want unsupported, saying why", s)
	}
	if s := st["Lag"]; s.State != AlarmInsufficientData {
		t.Errorf("Lag with no data: %+v, want INSUFFICIENT_DATA (missing data, treated as missing)", s)
	}
	if n := tw.Notifications(team); len(n) != 1 || n[0].NewState != AlarmOK {
		t.Fatalf("team topic: %+v, want one OK notification (INSUFFICIENT_DATA to OK)", n)
	}

	tw.metrics.observe(emf(base.Add(3*time.Second), `"Subscription"`, "DeadLettered", "[1,1]", `"Subscription":"a.two"`))
	st = eval(base.Add(4 * time.Second))
	if s := st["TeamDead"]; s.State != AlarmAlarm || len(s.Values) != 1 || s.Values[0] != 2 {
		t.Errorf("TeamDead after two dead letters of a.two: %+v, want ALARM over [2]", s)
	}
	eval(base.Add(5 * time.Second)) // still ALARM: no second notification
	for _, topic := range []string{team, stack} {
		n := tw.Notifications(topic)
		var alarms []Notification
		for _, x := range n {
			if x.LogicalID == "TeamDead" && x.NewState == AlarmAlarm {
				alarms = append(alarms, x)
			}
		}
		if len(alarms) != 1 || alarms[0].Alarm != "alarms-TeamDead" || alarms[0].OldState != AlarmOK {
			t.Errorf("topic %s: ALARM notifications %+v, want one of TeamDead, from OK", topic, alarms)
		}
	}
	st = eval(base.Add(6 * time.Minute))
	if s := st["TeamDead"]; s.State != AlarmOK {
		t.Errorf("TeamDead a period later, no data: %+v, want OK (notBreaching)", s)
	}
	if n := tw.Notifications(team); n[len(n)-1].NewState != AlarmOK {
		t.Errorf("team topic's last notification %+v, want OK", n[len(n)-1])
	}

	for i, v := range []int{11, 12} {
		tw.metrics.observe(emf(base.Add(10*time.Minute+time.Duration(i)*time.Minute), `"Lane"`, "Lag", v, `"Lane":"DURABLE"`))
	}
	if s := eval(base.Add(11*time.Minute + time.Second))["Lag"]; s.State != AlarmAlarm {
		t.Errorf("Lag above 10 in both periods: %+v, want ALARM", s)
	}
	if n := tw.Notifications(team); slicesHas(n, "Lag") {
		t.Errorf("the team's topic got the Lag alarm, which names only the stack's: %+v", n)
	}
	if n := tw.Notifications(stack); !slicesHas(n, "Lag") {
		t.Errorf("the stack's topic lacks the Lag alarm: %+v", n)
	}
}

func slicesHas(ns []Notification, id string) bool {
	for _, n := range ns {
		if n.LogicalID == id && n.NewState == AlarmAlarm {
			return true
		}
	}
	return false
}
