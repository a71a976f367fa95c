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
// on real record shapes), and a poison batch cannot blind it: bisect, a
// retry limit, a maximum record age and an on-failure queue that alarms.
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
	for k, want := range map[string]any{
		"BisectBatchOnFunctionError": true,
		"MaximumRetryAttempts":       float64(tamperMaxRetries),
		"MaximumRecordAgeInSeconds":  float64(tamperMaxRecordAgeS),
		"ParallelizationFactor":      1.0,
		"DestinationConfig":          map[string]any{"OnFailure": map[string]any{"Destination": getAtt(LogicalTamperDLQ, "Arn")}},
	} {
		if diff := cmp.Diff(want, m[k]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", k, diff)
		}
	}
	if a := float64(tamperMaxRecordAgeS); a > 12*3600 {
		t.Errorf("MaximumRecordAgeInSeconds = %v, want well under the stream's 24 h (a person reads the range from the stream)", a)
	}
	// The on-failure queue pages at once, and tamper-watch's role may send
	// to it (the mapping sends with the function's role).
	if _, ok := s.alarmOn("AWS/SQS", "ApproximateNumberOfMessagesVisible", map[string]any{"QueueName": getAtt(LogicalTamperDLQ, "QueueName")}); !ok {
		t.Errorf("no depth alarm on %s", LogicalTamperDLQ)
	}
	if s.queueSendDenied(t, LogicalTamperDLQ, getAtt(s.id(s.stack.Tamper.Function.Role), "Arn")) {
		t.Errorf("%s refuses tamper-watch's role", LogicalTamperDLQ)
	}
	if got := access(grants(s.Doc), s.id(s.stack.Tamper.Function.Role)); !contains(got[LogicalTamperDLQ+".Arn"], "sqs:SendMessage") {
		t.Errorf("tamper-watch's role may not send to %s: %v", LogicalTamperDLQ, got)
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
