package backbone

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// logRewrites are the actions that would let anyone rewrite or destroy the
// insert-only log: no policy may allow any of them on the events table.
var logRewrites = []string{
	"dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem",
	"dynamodb:PartiQLInsert", "dynamodb:PartiQLUpdate", "dynamodb:PartiQLDelete",
	"dynamodb:DeleteTable", "dynamodb:UpdateTimeToLive",
}

// actionAllows reports whether an IAM action pattern (case-insensitive,
// '*' and '?' wildcards) covers action.
func actionAllows(pattern, action string) bool {
	ok, err := path.Match(strings.ToLower(pattern), strings.ToLower(action))
	return err == nil && ok
}

// touches reports whether a statement's resource can be the resource with
// logical ID id: it references id, or is a literal with a wildcard.
func touches(resource any, id string) bool {
	b, _ := json.Marshal(resource)
	if strings.Contains(string(b), `"`+id+`"`) {
		return true
	}
	var wild bool
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			wild = wild || strings.Contains(t, "*")
		case []any:
			for _, e := range t {
				walk(e)
			}
		case map[string]any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(resource)
	return wild
}

// logViolations lists the statements that allow rewriting the events table.
func logViolations(gs []grant) []string {
	var out []string
	for _, g := range gs {
		actions, hit := g.Actions, g.Not
		if g.Not {
			actions = []string{"*"}
		}
		for _, res := range g.Resources {
			hit = hit || touches(res, LogicalEventsTable)
		}
		if !hit {
			continue
		}
		for _, a := range actions {
			for _, bad := range logRewrites {
				if actionAllows(a, bad) {
					out = append(out, g.Policy+": "+a+" allows "+bad)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestNoPolicyRewritesTheLog checks every identity policy in the template.
func TestNoPolicyRewritesTheLog(t *testing.T) {
	s := synth(t)
	gs := grants(s.Doc)
	if len(gs) < 10 {
		t.Fatalf("found only %d statements; the walker is missing policies", len(gs))
	}
	if v := logViolations(gs); len(v) > 0 {
		t.Errorf("policies allow rewriting the log:\n%s", strings.Join(v, "\n"))
	}
	// Only the emitter policy and the team's emitter (GrantEmit) may put
	// items into the log, and only inside TransactWriteItems.
	if diff := cmp.Diff(s.logPutters(), logPutters(t, gs)); diff != "" {
		t.Errorf("policies that can PutItem on the log (-want +got):\n%s", diff)
	}
}

// logPutters are the policies that may PutItem on the log: the emitter
// policy, the bench's (GrantEmit) and the heartbeat writer's, sorted.
func (s *synthesized) logPutters() []string {
	return sorted([]string{s.id(s.stack.Log.EmitterPolicy), s.id(s.stack.Bench.Role().Node().TryFindChild(jsii.String("DefaultPolicy"))),
		s.id(s.stack.Heartbeat.Function.Role.Node().TryFindChild(jsii.String("DefaultPolicy")))})
}

// logPutters lists the policies with a statement that allows PutItem on the
// log, sorted; each such statement must hold only inside TransactWriteItems
// (the heartbeat writer's, also only on the heartbeat chain's items).
func logPutters(t *testing.T, gs []grant) []string {
	t.Helper()
	var out []string
	for _, g := range gs {
		for _, res := range g.Resources {
			for _, a := range g.Actions {
				if !actionAllows(a, "dynamodb:PutItem") || !touches(res, LogicalEventsTable) {
					continue
				}
				out = append(out, g.Policy)
				if !cmp.Equal(g.Condition, anyJSON(transactionOnly())) && !cmp.Equal(g.Condition, anyJSON(heartbeatAppendOnly())) {
					t.Errorf("%s allows PutItem on the log with condition %v, want only inside TransactWriteItems", g.Policy, g.Condition)
				}
			}
		}
	}
	return sorted(out)
}

// anyJSON is v as the template holds it (plain JSON values).
func anyJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

// TestLogViolationsDetects proves the checker above is not vacuous.
func TestLogViolationsDetects(t *testing.T) {
	events := map[string]any{"Fn::GetAtt": []any{LogicalEventsTable, "Arn"}}
	other := map[string]any{"Fn::GetAtt": []any{LogicalStateTable, "Arn"}}
	tests := []struct {
		name string
		g    grant
		bad  bool
	}{
		{"update on log", grant{Actions: []string{"dynamodb:UpdateItem"}, Resources: []any{events}}, true},
		{"wildcard on star", grant{Actions: []string{"dynamodb:*"}, Resources: []any{"*"}}, true},
		{"glob action", grant{Actions: []string{"dynamodb:Batch*"}, Resources: []any{events}}, true},
		{"partiql", grant{Actions: []string{"dynamodb:PartiQL*"}, Resources: []any{events}}, true},
		{"index arn", grant{Actions: []string{"dynamodb:DeleteItem"}, Resources: []any{map[string]any{"Fn::Join": []any{"", []any{events, "/index/*"}}}}}, true},
		{"not action", grant{Actions: []string{"s3:GetObject"}, Resources: []any{other}, Not: true}, true},
		{"append on log", grant{Actions: concat(logAppendWrite, logAppendRead), Resources: []any{events}}, false},
		{"update elsewhere", grant{Actions: []string{"dynamodb:UpdateItem"}, Resources: []any{other}}, false},
	}
	for _, tt := range tests {
		tt.g.Policy = tt.name
		if got := len(logViolations([]grant{tt.g})) > 0; got != tt.bad {
			t.Errorf("%s: violation = %v, want %v", tt.name, got, tt.bad)
		}
	}
}

// TestEmitterPolicyIsExactlyEmit: the managed policy services attach. Its
// writes (PutItem, ConditionCheckItem) hold only inside TransactWriteItems
// (dynamodb:EnclosingOperation, as AWS's "Allow only transactional
// operations" example); its reads are GetItem and Query.
func TestEmitterPolicyIsExactlyEmit(t *testing.T) {
	s := synth(t)
	doc := props(s.resources("AWS::IAM::ManagedPolicy")[s.id(s.stack.Log.EmitterPolicy)])["PolicyDocument"].(map[string]any)
	events := getAtt(LogicalEventsTable, "Arn")
	want := []any{
		map[string]any{
			"Sid": "AppendInsideTransactWriteItems", "Effect": "Allow",
			"Action":   []any{"dynamodb:ConditionCheckItem", "dynamodb:PutItem"}, // sorted: the feature flag @aws-cdk/aws-iam:minimizePolicies (cdk.json)
			"Resource": events,
			"Condition": map[string]any{"ForAnyValue:StringEquals": map[string]any{
				"dynamodb:EnclosingOperation": []any{"TransactWriteItems"},
			}},
		},
		map[string]any{
			"Sid": "ReadTheHeadAndTheLog", "Effect": "Allow",
			"Action":   []any{"dynamodb:GetItem", "dynamodb:Query"},
			"Resource": events,
		},
		// The tracked table's writes in Emit's transaction (what GrantEmit
		// gives a team's service).
		map[string]any{
			"Sid": "WriteTrackedTablesInsideTransactWriteItems", "Effect": "Allow",
			"Action":   []any{"dynamodb:ConditionCheckItem", "dynamodb:DeleteItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
			"Resource": getAtt(s.id(s.stack.Widgets), "Arn"),
			"Condition": map[string]any{"ForAnyValue:StringEquals": map[string]any{
				"dynamodb:EnclosingOperation": []any{"TransactWriteItems"},
			}},
		},
	}
	if diff := cmp.Diff(want, doc["Statement"]); diff != "" {
		t.Errorf("emitter policy statements (-want +got):\n%s", diff)
	}
}

// TestLogResourcePolicy: the events table itself refuses every action that
// could rewrite or destroy the log, to every principal, whatever any
// identity policy allows (an explicit Deny wins).
func TestLogResourcePolicy(t *testing.T) {
	s := synth(t)
	rp, _ := props(s.resources("AWS::DynamoDB::Table")[LogicalEventsTable])["ResourcePolicy"].(map[string]any)
	if rp == nil {
		t.Fatal("the events table has no resource policy")
	}
	stmts := list(rp["PolicyDocument"].(map[string]any)["Statement"])
	if len(stmts) != 1 {
		t.Fatalf("%d statements, want 1: %v", len(stmts), stmts)
	}
	st := stmts[0].(map[string]any)
	if st["Effect"] != "Deny" || !cmp.Equal(st["Principal"], map[string]any{"AWS": "*"}) || st["Resource"] != "*" || st["Condition"] != nil {
		t.Errorf("statement %v: want an unconditional Deny to every principal on this table", st)
	}
	denied := strs(st["Action"])
	for _, a := range append(slices.Clone(logRewrites),
		// The table's settings: its stream, backups, these denies, an export.
		"dynamodb:UpdateTable", "dynamodb:UpdateContinuousBackups", "dynamodb:DeleteResourcePolicy", "dynamodb:ExportTableToPointInTime") {
		if !slices.Contains(denied, a) {
			t.Errorf("the resource policy does not deny %s", a)
		}
	}
	if slices.Contains(denied, "dynamodb:PutItem") || slices.Contains(denied, "dynamodb:ConditionCheckItem") {
		t.Errorf("the resource policy denies %v: Emit needs PutItem and ConditionCheckItem", denied)
	}
	// The other tables are updated by design: no resource policy there but
	// the state table's (TestStateResourcePolicy).
	for id, tb := range s.resources("AWS::DynamoDB::Table") {
		if id != LogicalEventsTable && id != LogicalStateTable && props(tb)["ResourcePolicy"] != nil {
			t.Errorf("table %s has a resource policy", id)
		}
	}
}

// TestWhatPutItemCanStillDo says it plainly, and checks what catches it.
//
// The emitter policy allows PutItem on the events table inside
// TransactWriteItems, and nothing can forbid that: Emit moves the head and
// writes each event with a Put. IAM cannot require a Put to carry a
// condition, so whoever holds the emitter policy (or steals a role that has
// it) can Put without one, in a transaction of their own, and overwrite any
// event row or head row, re-hashed to look consistent. That reaches the
// events stream as a MODIFY. What catches it: the notary's mapping on the
// stream (a reader of its own, unfiltered, so the Pipe's filter, which drops
// MODIFYs, cannot hide it) hands every MODIFY and REMOVE to the notary,
// which reports it (ERROR line, EMF NotaryFinding "rewrite", pkg/notary's
// tests), signs nothing more of that chain, and the NotaryFinding alarm
// pages within a minute.
func TestWhatPutItemCanStillDo(t *testing.T) {
	s := synth(t)
	// 1. PutItem on the log is allowed (inside a transaction) by exactly the
	// emitter policy and the grants of GrantEmit, and denied by no resource
	// policy.
	if diff := cmp.Diff(s.logPutters(), logPutters(t, grants(s.Doc))); diff != "" {
		t.Errorf("policies that can PutItem on the log (-want +got):\n%s", diff)
	}
	// 2. An overwrite reaches the notary: its mapping reads the events
	// stream and passes the MODIFY such a Put makes.
	m := s.mappingOf(t, getAtt(LogicalEventsTable, "StreamArn"), s.stack.Notary.Function.Fn)
	if !cmp.Equal(m["FunctionName"], ref(s.id(s.stack.Notary.Function.Fn))) {
		t.Fatalf("the events stream's mapping runs %v, want the notary", m["FunctionName"])
	}
	overwrite, err := os.ReadFile(filepath.Join("..", "..", "pkg", "tamper", "testdata", "event-modify.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !mappingPasses(t, m, overwrite) {
		t.Error("the notary's mapping drops an overwrite of an event row")
	}
	// 3. And the report pages someone.
	if _, ok := s.alarmOnQuery(`SELECT SUM(` + keys.MetricNotaryFinding + `)`); !ok {
		t.Error("no alarm on NotaryFinding")
	}
}

func contains(xs []string, x string) bool {
	for _, e := range xs {
		if e == x {
			return true
		}
	}
	return false
}

func sorted(sets ...[]string) []string {
	out := concat(sets...)
	sort.Strings(out)
	return out
}

// TestRoleAccess pins what each role may do, resource by resource.
func TestRoleAccess(t *testing.T) {
	s := synth(t)
	st := s.stack
	gs := grants(s.Doc)
	xray := []string{"xray:PutTelemetryRecords", "xray:PutTraceSegments"}
	logs := func(f Function) (string, []string) {
		return s.id(f.Logs) + ".Arn", []string{"logs:CreateLogStream", "logs:PutLogEvents"}
	}
	rw := sorted(tableRead, tableWrite)
	read := sorted(tableRead)
	stream := sorted(streamRead)
	sqsConsume := []string{"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:ReceiveMessage"}
	sqsSend := []string{"sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"}
	drain := sorted(queueDrain)
	widgets, listing := s.id(st.Widgets), s.id(st.Listing)

	tests := []struct {
		name string
		fn   Function
		want map[string][]string
	}{
		{"stream-filter", st.Durable.StreamFilter, map[string][]string{}},
		{"durable-consumer", st.Durable.DurableConsumer, map[string][]string{
			LogicalEventsTable + ".Arn":  read,
			LogicalStateTable + ".Arn":   rw,
			LogicalDurableQueue + ".Arn": sqsConsume,
			LogicalDurableDLQ + ".Arn":   {"sqs:SendMessage"}, // a poison message, at its first receive
		}},
		{"changefeed", st.ChangeFeed.Changefeed, map[string][]string{
			LogicalChangeFeedTable + ".Arn": sorted(tableWrite),
			listing + ".Arn":                rw,
			LogicalStateTable + ".Arn":      rw,
			widgets + ".Arn":                read,
			widgets + ".StreamArn":          stream,
			LogicalChangeFeedDLQ + ".Arn":   sqsSend,
			"*+dynamodb:ListStreams":        nil, // checked below
		}},
		{"reconcile", st.Reconcile.Function, map[string][]string{
			LogicalEventsTable + ".Arn": read,
			LogicalStateTable + ".Arn":  rw,
			// Signed checkpoints (checkpoint.go): read the public key,
			// get/list checkpoint objects; the notary alone signs and puts.
			LogicalCheckpointKey + ".Arn":    {"kms:GetPublicKey"},
			LogicalCheckpointBucket + ".Arn": {"s3:ListBucket", "s3:ListBucketVersions"},
			`{"Fn::Join":["",[{"Fn::GetAtt":["` + LogicalCheckpointBucket + `","Arn"]},"/checkpoints/*"]]}`: {"s3:GetObject", "s3:GetObjectVersion"},
		}},
		{"notary", st.Notary.Function, map[string][]string{
			LogicalEventsTable + ".StreamArn": stream,
			LogicalEventsTable + ".Arn":       {"dynamodb:GetItem", "dynamodb:Query"},
			LogicalStateTable + ".Arn":        {"dynamodb:GetItem", "dynamodb:PutItem"},
			LogicalNotaryDLQ + ".Arn":         sqsSend,
			LogicalCheckpointKey + ".Arn":     {"kms:GetPublicKey", "kms:Sign"},
			LogicalCheckpointBucket + ".Arn":  {"s3:ListBucket", "s3:ListBucketVersions"},
			`{"Fn::Join":["",[{"Fn::GetAtt":["` + LogicalCheckpointBucket + `","Arn"]},"/checkpoints/*"]]}`: {"s3:GetObject", "s3:GetObjectVersion", "s3:PutObject"},
			"*+dynamodb:ListStreams": nil,
		}},
		{"tamper-watch", st.Tamper.Function, map[string][]string{
			LogicalTamperDLQ + ".Arn":        sqsSend,
			LogicalStateTable + ".StreamArn": stream,
			LogicalStateTable + ".Arn":       {"dynamodb:GetItem"},
			"*+dynamodb:ListStreams":         nil,
		}},
		{"dlq-repair", st.Repair.Function, map[string][]string{
			LogicalDurableDLQ + ".Arn":        drain,
			LogicalPipeDLQ + ".Arn":           drain,
			LogicalChangeFeedDLQ + ".Arn":     drain,
			LogicalEventsTable + ".Arn":       read,
			widgets + ".Arn":                  read,
			LogicalEventsTable + ".StreamArn": stream,
			widgets + ".StreamArn":            stream,
			LogicalStateTable + ".Arn":        rw,
			listing + ".Arn":                  rw,
			LogicalChangeFeedTable + ".Arn":   sorted(tableWrite),
			// The tenants with dead letters, from the dead-letter index.
			`{"Fn::Join":["",[{"Fn::GetAtt":["` + LogicalStateTable + `","Arn"]},"/index/` + keys.IndexDeadTenants + `"]]}`: {"dynamodb:Query"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := map[string][]string{}
			star := xray
			for k, v := range tt.want {
				if k == "*+dynamodb:ListStreams" {
					star = sorted(xray, []string{"dynamodb:ListStreams"})
					continue
				}
				want[k] = v
			}
			want["*"] = star
			lk, lv := logs(tt.fn)
			want[lk] = lv
			got := access(gs, s.id(tt.fn.Role))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s role access (-want +got):\n%s", tt.name, diff)
			}
		})
	}

	// Reconcile finds a tenant's chain shards with one BatchGetItem of their
	// head rows (eventstore.Store.ChainsOf); the twin does not enforce IAM,
	// so the template is where a missing grant would show. Spelled out, not
	// taken from tableRead, so that trimming tableRead fails here.
	if got := access(gs, s.id(st.Reconcile.Function.Role))[LogicalEventsTable+".Arn"]; !slices.Contains(got, "dynamodb:BatchGetItem") {
		t.Errorf("reconcile's role on the events table: %v; want dynamodb:BatchGetItem (chain shards' head rows)", got)
	}

	for name, role := range st.Schedules.Roles {
		t.Run("scheduler "+name, func(t *testing.T) {
			var fn Function
			switch name {
			case keys.FnReconcile:
				fn = st.Reconcile.Function
			case keys.FnDLQRepair:
				fn = st.Repair.Function
			case keys.FnHeartbeat:
				fn = st.Heartbeat.Function
			default:
				t.Fatalf("a schedule role for %s", name)
			}
			want := map[string][]string{s.id(fn.Fn) + ".Arn": {"lambda:InvokeFunction"}}
			if diff := cmp.Diff(want, access(gs, s.id(role))); diff != "" {
				t.Errorf("scheduler role access (-want +got):\n%s", diff)
			}
			trust, _ := json.Marshal(props(s.resources("AWS::IAM::Role")[s.id(role)])["AssumeRolePolicyDocument"])
			for _, want := range []string{`"Service":"scheduler.amazonaws.com"`, `"aws:SourceAccount":{"Ref":"AWS::AccountId"}`} {
				if !strings.Contains(string(trust), want) {
					t.Errorf("scheduler role trust policy %s lacks %s", trust, want)
				}
			}
		})
	}
	if len(st.Schedules.Roles) != 3 {
		t.Errorf("%d scheduler roles, want 3 (reconcile, dlq-repair, heartbeat)", len(st.Schedules.Roles))
	}

	t.Run("pipe", func(t *testing.T) {
		want := map[string][]string{
			LogicalEventsTable + ".StreamArn": stream,
			"*":                               {"dynamodb:ListStreams"},
			s.id(st.Durable.StreamFilter.Fn) + ".Arn": {"lambda:InvokeFunction"},
			LogicalDurableQueue + ".Arn":              {"sqs:SendMessage"},
			LogicalPipeDLQ + ".Arn":                   {"sqs:SendMessage"},
			s.id(st.Durable.PipeLogs) + ".Arn":        {"logs:CreateLogStream", "logs:PutLogEvents"},
		}
		if diff := cmp.Diff(want, access(gs, s.id(st.Durable.PipeRole))); diff != "" {
			t.Errorf("pipe role access (-want +got):\n%s", diff)
		}
		trust := props(s.resources("AWS::IAM::Role")[s.id(st.Durable.PipeRole)])["AssumeRolePolicyDocument"]
		b, _ := json.Marshal(trust)
		for _, want := range []string{`"Service":"pipes.amazonaws.com"`, `"aws:SourceAccount":{"Ref":"AWS::AccountId"}`} {
			if !strings.Contains(string(b), want) {
				t.Errorf("pipe role trust policy %s lacks %s", b, want)
			}
		}
	})
}

// TestReconcileCallerPolicy: both actions a SigV4 caller of an AWS_IAM URL
// needs, and InvokeFunction only through the URL.
func TestReconcileCallerPolicy(t *testing.T) {
	s := synth(t)
	doc := props(s.resources("AWS::IAM::ManagedPolicy")[s.id(s.stack.Reconcile.CallerPolicy)])["PolicyDocument"]
	b, _ := json.Marshal(doc)
	fn := s.id(s.stack.Reconcile.Function.Fn)
	for _, want := range []string{
		`"Action":"lambda:InvokeFunctionUrl"`,
		`"lambda:FunctionUrlAuthType":"AWS_IAM"`,
		`"Action":"lambda:InvokeFunction"`,
		`"lambda:InvokedViaFunctionUrl":"true"`,
		`"Resource":{"Fn::GetAtt":["` + fn + `","Arn"]}`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("caller policy %s lacks %s", b, want)
		}
	}
}
