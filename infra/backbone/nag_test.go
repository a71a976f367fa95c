package backbone

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestNagAwsSolutions: cdk-nag's AwsSolutions pack finds no unsuppressed
// error, and every suppression carries a reason.
func TestNagAwsSolutions(t *testing.T) {
	s := synth(t)
	for _, e := range s.nagErrors {
		t.Errorf("unsuppressed: %s", e)
	}
	for _, w := range s.nagWarnings {
		t.Logf("warning: %s", w)
	}

	// The report proves the pack ran (an empty error list alone would not).
	f, err := os.Open(filepath.Join(s.outDir, "AwsSolutions--"+*s.stack.StackName()+"-NagReport.csv"))
	if err != nil {
		t.Fatalf("nag report: %v", err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 50 {
		t.Fatalf("nag report has %d rows; did the AwsSolutions pack run?", len(rows))
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	suppressed := map[string]bool{}
	for _, r := range rows[1:] {
		rule, res, comp, reason, level := r[col["Rule ID"]], r[col["Resource ID"]], r[col["Compliance"]], r[col["Exception Reason"]], r[col["Rule Level"]]
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
