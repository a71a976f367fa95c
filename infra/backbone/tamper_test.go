package backbone

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/twin/eventpattern"
)

// mappingPasses evaluates a mapping's FilterCriteria, as read from the
// template, on one stream record: no filter passes everything, otherwise any
// matching pattern does.
func mappingPasses(t *testing.T, mapping map[string]any, record []byte) bool {
	t.Helper()
	fc, _ := mapping["FilterCriteria"].(map[string]any)
	filters := list(fc["Filters"])
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		raw, _ := f.(map[string]any)["Pattern"].(string)
		p, err := eventpattern.Compile([]byte(raw))
		if err != nil {
			t.Fatalf("filter pattern %s: %v", raw, err)
		}
		ok, err := p.Match(record)
		if err != nil {
			t.Fatalf("match %s: %v", raw, err)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestTamperMapping: tamper-watch reads the events stream with its own
// mapping, its filter passes exactly the MODIFY and REMOVE records (checked
// on real record shapes), and it never drops a record.
func TestTamperMapping(t *testing.T) {
	s := synth(t)
	m := props(s.resources("AWS::Lambda::EventSourceMapping")[LogicalTamperESM])
	if m == nil {
		t.Fatalf("no mapping %s", LogicalTamperESM)
	}
	for k, want := range map[string]any{
		"EventSourceArn":   getAtt(LogicalEventsTable, "StreamArn"),
		"FunctionName":     ref(s.id(s.stack.Tamper.Function.Fn)),
		"StartingPosition": "TRIM_HORIZON",
		"FilterCriteria":   map[string]any{"Filters": []any{map[string]any{"Pattern": TamperFilterPattern()}}},
	} {
		if diff := cmp.Diff(want, m[k]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", k, diff)
		}
	}
	// Nothing that gives a record up: no retry limit, no record age, no
	// destination (a failing batch holds the shard and pages).
	for _, k := range []string{"MaximumRetryAttempts", "MaximumRecordAgeInSeconds", "DestinationConfig", "FunctionResponseTypes"} {
		if v, ok := m[k]; ok && v != -1.0 {
			t.Errorf("%s = %v: tamper-watch must never give a record up", k, v)
		}
	}

	tests := []struct {
		file string
		pass bool
	}{
		{"testdata/stream/event-insert.json", false},
		{"testdata/stream/head-insert.json", false},
		{"testdata/stream/head-modify.json", true},
		{"testdata/stream/event-remove.json", true},
		{"../../pkg/tamper/testdata/event-modify.json", true},
		{"../../pkg/tamper/testdata/head-remove.json", true},
		{"../../pkg/tamper/testdata/event-remove-ttl.json", true},
	}
	for _, tt := range tests {
		b, err := os.ReadFile(filepath.FromSlash(tt.file))
		if err != nil {
			t.Fatal(err)
		}
		if got := mappingPasses(t, m, b); got != tt.pass {
			t.Errorf("%s: filter passes = %v, want %v", tt.file, got, tt.pass)
		}
	}
}
