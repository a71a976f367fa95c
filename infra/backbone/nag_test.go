package backbone

import (
	"sort"
	"strings"
	"testing"
)

// TestNagAwsSolutions: cdk-nag's AwsSolutions pack finds no unsuppressed
// error, and every suppression carries a reason.
func TestNagAwsSolutions(t *testing.T) {
	s := synth(t)
	for _, e := range s.NagErrors {
		t.Errorf("unsuppressed: %s", e)
	}
	for _, w := range s.Warnings {
		t.Logf("warning: %s", w)
	}

	// The report proves the pack ran (an empty error list alone would not).
	rows, err := s.NagReport()
	if err != nil {
		t.Fatal(err)
	}
	suppressed := map[string]bool{}
	for _, r := range rows {
		rule, res, comp, reason, level := r.Rule, r.Resource, r.Compliance, r.Reason, r.Level
		switch comp {
		case "Non-Compliant":
			if level == "Error" {
				t.Errorf("non-compliant: %s on %s", rule, res)
			}
		case "Suppressed":
			if len(strings.TrimSpace(reason)) < 40 {
				t.Errorf("suppression of %s on %s has no real reason: %q", rule, res, reason)
			}
			suppressed[rule+" "+res+": "+reason] = true
		}
	}
	var lines []string
	for l := range suppressed {
		lines = append(lines, l)
	}
	sort.Strings(lines)
	for _, l := range lines {
		t.Logf("suppressed %s", l)
	}
}
