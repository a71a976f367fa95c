package backbone

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/pkg/keys"
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

// TestEventsStreamReaders: DynamoDB Streams serves at most two readers per
// shard ("More than 2 processes are reading from the same streams shard at
// the same time. Exceeding this limit may result in request throttling.",
// DynamoDB API Reference, LimitExceededException). The events table's
// stream has exactly two: the Pipe (delivery) and the notary (every change
// to the log). tamper-watch reads only the state table's stream, and its
// role may not read the events stream.
func TestEventsStreamReaders(t *testing.T) {
	s := synth(t)
	stream := getAtt(LogicalEventsTable, "StreamArn")
	var readers []string
	for id, p := range s.resources("AWS::Pipes::Pipe") {
		if cmp.Equal(props(p)["Source"], stream) {
			readers = append(readers, id)
		}
	}
	for id, m := range s.resources("AWS::Lambda::EventSourceMapping") {
		if cmp.Equal(props(m)["EventSourceArn"], stream) {
			readers = append(readers, id)
		}
	}
	slices.Sort(readers)
	if diff := cmp.Diff([]string{LogicalEventsPipe, LogicalNotaryESM}, readers); diff != "" {
		t.Errorf("readers of the events stream (-want +got):\n%s", diff)
	}
	if len(readers) > 2 {
		t.Errorf("%d readers of the events stream %v: DynamoDB allows 2 per shard before it throttles", len(readers), readers)
	}
	if got := access(grants(s.Doc), s.id(s.stack.Tamper.Function.Role)); len(got[LogicalEventsTable+".StreamArn"]) > 0 {
		t.Errorf("tamper-watch's role may read the events stream: %v", got[LogicalEventsTable+".StreamArn"])
	}
}

// TestTamperStateMapping: tamper-watch's second mapping reads the state
// table's stream; its filter passes the records of dead letters, claims and
// watermarks (real record shapes) and nothing else, with the same bisect,
// retries, record age and on-failure queue as every stream consumer, and a
// poison batch cannot blind it.
func TestTamperStateMapping(t *testing.T) {
	s := synth(t)
	if v := props(s.resources("AWS::DynamoDB::Table")[LogicalStateTable])["StreamSpecification"]; !cmp.Equal(v, map[string]any{"StreamViewType": "NEW_AND_OLD_IMAGES"}) {
		t.Errorf("state table stream %v, want NEW_AND_OLD_IMAGES", v)
	}
	m := props(s.resources("AWS::Lambda::EventSourceMapping")[LogicalTamperStateESM])
	if m == nil {
		t.Fatalf("no mapping %s", LogicalTamperStateESM)
	}
	for k, want := range map[string]any{
		"EventSourceArn":             getAtt(LogicalStateTable, "StreamArn"),
		"FunctionName":               ref(s.id(s.stack.Tamper.Function.Fn)),
		"StartingPosition":           "TRIM_HORIZON",
		"BisectBatchOnFunctionError": true,
		"MaximumRetryAttempts":       float64(tamperMaxRetries),
		"MaximumRecordAgeInSeconds":  float64(tamperMaxRecordAgeS),
		"DestinationConfig":          map[string]any{"OnFailure": map[string]any{"Destination": getAtt(LogicalTamperDLQ, "Arn")}},
		"FilterCriteria":             map[string]any{"Filters": []any{map[string]any{"Pattern": TamperStateFilterPattern()}}},
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
	for _, tt := range []struct {
		file string
		pass bool
	}{
		{"../../pkg/tamper/testdata/state-dead-remove.json", true},
		{"../../pkg/tamper/testdata/state-claims-remove.json", true},
		{"../../pkg/tamper/testdata/state-watermark-remove.json", true},
		{"../../pkg/tamper/testdata/event-remove.json", false}, // no pk: not a state row
	} {
		b, err := os.ReadFile(filepath.FromSlash(tt.file))
		if err != nil {
			t.Fatal(err)
		}
		if got := mappingPasses(t, m, b); got != tt.pass {
			t.Errorf("%s: filter passes = %v, want %v", tt.file, got, tt.pass)
		}
	}
}

// TestStateResourcePolicy: the state table refuses item writes from every
// principal but the backbone's four writers (and Props.StateOperators), and
// refuses to everyone what would delete it, expire its rows or drop its
// backups.
func TestStateResourcePolicy(t *testing.T) {
	s := synth(t)
	rp, _ := props(s.resources("AWS::DynamoDB::Table")[LogicalStateTable])["ResourcePolicy"].(map[string]any)
	if rp == nil {
		t.Fatal("the state table has no resource policy")
	}
	sts := map[string]map[string]any{}
	for _, st := range list(rp["PolicyDocument"].(map[string]any)["Statement"]) {
		m := st.(map[string]any)
		if m["Effect"] != "Deny" || !cmp.Equal(m["Principal"], map[string]any{"AWS": "*"}) {
			t.Errorf("statement %v: want a Deny to every principal", m)
		}
		sts[fmt.Sprint(m["Sid"])] = m
	}
	w := sts["OnlyTheBackboneWrites"]
	for _, a := range []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:PartiQLDelete"} {
		if !slices.Contains(strs(w["Action"]), a) {
			t.Errorf("writes statement does not deny %s: %v", a, w["Action"])
		}
	}
	var writers []string
	for _, v := range list(w["Condition"].(map[string]any)["ArnNotEquals"].(map[string]any)["aws:PrincipalArn"]) {
		writers = append(writers, fmt.Sprint(v))
	}
	// The notary writes only its own chain rows (its role's LeadingKeys
	// condition, TestRoleAccess).
	for _, f := range []Function{s.stack.Durable.DurableConsumer, s.stack.ChangeFeed.Changefeed, s.stack.Reconcile.Function, s.stack.Repair.Function, s.stack.Notary.Function} {
		if !slices.Contains(writers, fmt.Sprint(getAtt(s.id(f.Role), "Arn"))) {
			t.Errorf("%s's role may not write the state table: %v", f.name, writers)
		}
	}
	if len(writers) != 5 {
		t.Errorf("%d writers, want the backbone's 5: %v", len(writers), writers)
	}
	// The notary's chain rows (what it extends and signs from) are its
	// alone: another writer of the state table could move a chain's row to
	// match a rewritten log.
	nr := sts["OnlyTheNotaryWritesItsRows"]
	if nr == nil {
		t.Error("no statement keeps the notary's rows to the notary")
	} else {
		cond := nr["Condition"].(map[string]any)
		if got := fmt.Sprint(cond["ForAnyValue:StringLike"]); got != "map[dynamodb:LeadingKeys:["+keys.StateNotaryPrefix+"*]]" {
			t.Errorf("notary rows statement matches %s, want the notary# partition keys", got)
		}
		if got, want := fmt.Sprint(cond["ArnNotEquals"]), fmt.Sprint(map[string]any{"aws:PrincipalArn": []any{getAtt(s.id(s.stack.Notary.Function.Role), "Arn")}}); got != want {
			t.Errorf("notary rows statement exempts %s, want only the notary's role %s", got, want)
		}
		if !cmp.Equal(strs(nr["Action"]), strs(w["Action"])) {
			t.Errorf("notary rows statement denies %v, want every state write %v", nr["Action"], w["Action"])
		}
	}
	for _, a := range []string{"dynamodb:DeleteTable", "dynamodb:UpdateTimeToLive", "dynamodb:UpdateContinuousBackups", "dynamodb:DeleteResourcePolicy"} {
		if !slices.Contains(strs(sts["TheStateTableStays"]["Action"]), a) {
			t.Errorf("the state table's policy does not deny %s", a)
		}
	}
	// Every role the template grants state-table writes is a listed writer
	// (tamper-watch only reads).
	for _, g := range grants(s.Doc) {
		if !strings.Contains(fmt.Sprint(g.Resources), `"`+LogicalStateTable+`"`) && !strings.Contains(fmt.Sprint(g.Resources), "["+LogicalStateTable+" ") ||
			!slices.ContainsFunc(g.Actions, func(a string) bool { return slices.Contains(stateWriteActions, a) }) {
			continue
		}
		for _, role := range g.Roles {
			if !slices.Contains(writers, fmt.Sprint(getAtt(role, "Arn"))) {
				t.Errorf("role %s is granted %v on the state table but the resource policy denies it", role, g.Actions)
			}
		}
	}
}
