package backbone

import (
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestProjectionAlarms: each projection metric has an hourly alarm that
// fires on one count, names the metric and says what to do.
func TestProjectionAlarms(t *testing.T) {
	s := synth(t)
	for name, metric := range map[string]string{
		"ProjectionParkAged":     keys.MetricProjParkAged,
		"ProjectionParkExpiring": keys.MetricProjParkExpiring,
		"ProjectionAhead":        keys.MetricProjAhead,
		"ProjectionRunFailed":    keys.MetricProjRunFailed,
	} {
		t.Run(name, func(t *testing.T) {
			p, ok := s.alarmOnQuery("SUM(" + metric + ")")
			if !ok {
				t.Fatalf("no alarm on %s", metric)
			}
			if s.stack.Alarms.ByName[name] == nil {
				t.Errorf("alarm %s not in Alarms.ByName", name)
			}
			if p["Threshold"] != 1.0 || p["EvaluationPeriods"] != 1.0 || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
				t.Errorf("%s: %v %v over %v periods, want >= 1 over 1", name, p["ComparisonOperator"], p["Threshold"], p["EvaluationPeriods"])
			}
			for _, m := range list(p["Metrics"]) {
				if e, _ := m.(map[string]any)["Expression"].(string); strings.Contains(e, metric) {
					if got := m.(map[string]any)["Period"]; got != 3600.0 {
						t.Errorf("%s: period %v, want 3600 (dlq-repair runs hourly)", name, got)
					}
				}
			}
			if d, _ := p["AlarmDescription"].(string); !strings.Contains(d, metric) {
				t.Errorf("%s: description %q does not name %s", name, d, metric)
			}
		})
	}
}
