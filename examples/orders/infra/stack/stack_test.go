package stack

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	ordersmod "github.com/fourlanes/fourlanes/examples/orders/orders"
	searchmod "github.com/fourlanes/fourlanes/examples/orders/search"
	"github.com/fourlanes/fourlanes/infra/backbone"
	"github.com/fourlanes/fourlanes/infra/backbone/backbonetest"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// These tests check what the example's stack adds to the backbone: its
// tables, their pinned IDs, and the wiring of its application (which
// functions get which table, with what access). infra/backbone's tests check
// the backbone itself, on an application of their own.

// synthesized is the one synthesis of the example's stack that every test
// here shares: synthesis takes seconds, the assertions milliseconds.
type synthesized struct {
	*backbonetest.Synthesis
	st *Stack
}

func TestMain(m *testing.M) { backbonetest.Main(m) }

var shared = backbonetest.Shared(filepath.Join("..", "..", "..", ".."), func(app awscdk.App, codeRoot string) (awscdk.Stack, *Stack) {
	// As the example's app (../main.go) builds it.
	st := NewStack(app, "Fourlanes", &Props{Backbone: backbone.Props{CodeRoot: codeRoot, AlarmEmail: "ops@example.com", ReserveConcurrency: true}})
	return st.Stack, st
})

// synth returns the shared synthesis, running it on first use.
func synth(t *testing.T) *synthesized {
	t.Helper()
	syn, st := shared(t)
	return &synthesized{Synthesis: syn, st: st}
}

// id returns the logical ID of a construct's CloudFormation resource.
func (s *synthesized) id(c constructs.IConstruct) string {
	return *s.st.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
}

// TestSynthTime reports how long the shared synthesis took.
func TestSynthTime(t *testing.T) {
	s := synth(t)
	t.Logf("synth + template + annotations: %v", s.Took.Round(time.Millisecond))
}

// TestPinnedLogicalIDs: the example's stateful resources keep the logical
// IDs an existing deployment has (the tables, the ORDER mapping on the
// orders stream) and its output keeps its name; a new ID would make
// CloudFormation replace the table. If this fails, restore the ID rather than
// update the test.
func TestPinnedLogicalIDs(t *testing.T) {
	s := synth(t)
	// The exact strings, so renaming a constant is caught too.
	for id, typ := range map[string]string{
		"OrdersTable":       "AWS::DynamoDB::Table",
		"SearchTable":       "AWS::DynamoDB::Table",
		"ChangeFeedMapping": "AWS::Lambda::EventSourceMapping",
	} {
		if _, ok := s.Doc.Resources(typ)[id]; !ok {
			t.Errorf("no %s with logical ID %s", typ, id)
		}
	}
	for id, typ := range map[string]string{
		LogicalOrdersTable: "AWS::DynamoDB::Table",
		LogicalSearchTable: "AWS::DynamoDB::Table",
		logicalOrderESM:    "AWS::Lambda::EventSourceMapping",
	} {
		if _, ok := s.Doc.Resources(typ)[id]; !ok {
			t.Errorf("resource %s: no %s", id, typ)
		}
	}
	// Stack.Orders and Stack.Search are those tables (GetLogicalId would
	// give the ID before the override; a reference resolves to the final one).
	for id, table := range map[string]awsdynamodb.Table{LogicalOrdersTable: s.st.Orders, LogicalSearchTable: s.st.Search} {
		if diff := cmp.Diff(backbonetest.Ref(id), s.st.Resolve(table.TableName())); diff != "" {
			t.Errorf("a reference to the table (-want +got):\n%s", diff)
		}
	}
	src := backbonetest.Props(s.Doc.Resources("AWS::Lambda::EventSourceMapping")[logicalOrderESM])["EventSourceArn"]
	if diff := cmp.Diff(backbonetest.GetAtt(LogicalOrdersTable, "StreamArn"), src); diff != "" {
		t.Errorf("%s's EventSourceArn (-want +got):\n%s", logicalOrderESM, diff)
	}
	// The backbone's id is UnprefixedID: its outputs keep the names the
	// stack had before the backbone was a construct, which scripts and the
	// CLI's -stack read.
	for _, name := range keys.OutputNames {
		if _, ok := s.Doc.Outputs()[name]; !ok {
			t.Errorf("no output %s: the backbone's outputs have a prefix (%q)", name, s.st.Backbone.Prefix())
		}
	}
	if OutputOrdersTable != "OrdersTableName" {
		t.Errorf("OutputOrdersTable = %q, want OrdersTableName", OutputOrdersTable)
	}
	out, _ := s.Doc.Outputs()[OutputOrdersTable].(map[string]any)
	if diff := cmp.Diff(backbonetest.Ref(LogicalOrdersTable), out["Value"]); diff != "" {
		t.Errorf("output %s (-want +got):\n%s", OutputOrdersTable, diff)
	}
}

// TestTables: the orders table (the tracked ORDER entity) streams both
// images and has point-in-time recovery; the search table is its projection.
// Both are encrypted, refuse DeleteTable, survive a stack delete and a
// replacement, and have generated names.
func TestTables(t *testing.T) {
	s := synth(t)
	keySchema := func(hash, rng string) []any {
		return []any{
			map[string]any{"AttributeName": hash, "KeyType": "HASH"},
			map[string]any{"AttributeName": rng, "KeyType": "RANGE"},
		}
	}
	attrs := func(hash, rng string) any {
		return assertions.Match_ArrayEquals(&[]any{
			map[string]any{"AttributeName": hash, "AttributeType": "S"},
			map[string]any{"AttributeName": rng, "AttributeType": "S"},
		})
	}
	sse := map[string]any{"SSEEnabled": true}
	for _, tt := range []struct {
		id    string
		props map[string]any
	}{
		{LogicalOrdersTable, map[string]any{
			"KeySchema":                        keySchema(ordersmod.AttrTenant, ordersmod.AttrID),
			"AttributeDefinitions":             attrs(ordersmod.AttrTenant, ordersmod.AttrID),
			"StreamSpecification":              map[string]any{"StreamViewType": "NEW_AND_OLD_IMAGES"},
			"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
			"SSESpecification":                 sse,
			"BillingMode":                      "PAY_PER_REQUEST",
			"DeletionProtectionEnabled":        true,
		}},
		{LogicalSearchTable, map[string]any{
			"KeySchema":                 keySchema(keys.AttrPK, keys.AttrSK),
			"AttributeDefinitions":      attrs(keys.AttrPK, keys.AttrSK),
			"SSESpecification":          sse,
			"BillingMode":               "PAY_PER_REQUEST",
			"DeletionProtectionEnabled": true,
		}},
	} {
		t.Run(tt.id, func(t *testing.T) {
			got := s.Template.FindResources(jsii.String("AWS::DynamoDB::Table"), map[string]any{"Properties": tt.props})
			if _, ok := (*got)[tt.id]; !ok {
				t.Errorf("table %s does not have %v", tt.id, tt.props)
			}
			r := s.Doc.Resources("AWS::DynamoDB::Table")[tt.id]
			if r["DeletionPolicy"] != "Retain" || r["UpdateReplacePolicy"] != "Retain" {
				t.Errorf("DeletionPolicy %v, UpdateReplacePolicy %v; want Retain", r["DeletionPolicy"], r["UpdateReplacePolicy"])
			}
			if v, ok := backbonetest.Props(r)["TableName"]; ok {
				t.Errorf("fixed TableName %v; names are generated", v)
			}
		})
	}
}

// TestNag: cdk-nag's AwsSolutions pack finds no unsuppressed error in the
// example's stack; the search table has no point-in-time recovery, and its
// suppression of AwsSolutions-DDB3 says why.
func TestNag(t *testing.T) {
	s := synth(t)
	for _, e := range s.NagErrors {
		t.Errorf("unsuppressed: %s", e)
	}
	rows, err := s.NagReport()
	if err != nil {
		t.Fatal(err)
	}
	search := s.st.Search.Node().DefaultChild().Node().Path()
	var found bool
	for _, r := range rows {
		if r.Rule != "AwsSolutions-DDB3" || r.Resource != *search {
			continue
		}
		found = true
		if comp, reason := r.Compliance, r.Reason; comp != "Suppressed" || !strings.Contains(reason, "projection") {
			t.Errorf("AwsSolutions-DDB3 on the search table: %s, reason %q; want Suppressed, saying it is a projection", comp, reason)
		}
	}
	if !found {
		t.Errorf("the nag report has no AwsSolutions-DDB3 row for %s", *search)
	}
	// The orders table, the source of truth, needs no suppression.
	orders := s.st.Orders.Node().DefaultChild().Node().Path()
	for _, r := range rows {
		if r.Resource == *orders && r.Compliance == "Suppressed" {
			t.Errorf("%s on the orders table is suppressed: %q", r.Rule, r.Reason)
		}
	}
}

// TestWiring: the backbone runs the example's application: no synthesis
// error, one change-feed mapping (ORDER's), and exactly the functions that
// run search (BEST_EFFORT: changefeed, dlq-repair) get the orders table
// (ORDERS_TABLE: read it and its stream) and the search table
// (SEARCH_TABLE: read and write it). notifications (DURABLE) reads no table
// of its own, so durable-consumer gets neither.
func TestWiring(t *testing.T) {
	s := synth(t)
	for _, e := range s.Errors {
		t.Errorf("synthesis error: %s", e)
	}
	if _, ok := s.st.Backbone.ChangeFeed.Mappings[ordersmod.Entity]; !ok || len(s.st.Backbone.ChangeFeed.Mappings) != 1 {
		t.Errorf("changefeed's mappings %v, want %s's only", s.st.Backbone.ChangeFeed.Mappings, ordersmod.Entity)
	}
	if ordersmod.Entity != "ORDER" {
		t.Errorf("orders tracks %s; the pinned mapping %s is ORDER's", ordersmod.Entity, logicalOrderESM)
	}

	fns := s.Doc.Resources("AWS::Lambda::Function")
	gs := s.Doc.Grants()
	read := []string{"dynamodb:GetItem", "dynamodb:Query"}
	write := []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
	stream := []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}
	has := func(got []string, want ...string) bool {
		for _, a := range want {
			if !slices.Contains(got, a) {
				return false
			}
		}
		return true
	}
	for _, tt := range []struct {
		name  string
		fn    backbone.Function
		wired bool
	}{
		{keys.FnChangefeed, s.st.Backbone.ChangeFeed.Changefeed, true},
		{keys.FnDLQRepair, s.st.Backbone.Repair.Function, true},
		{keys.FnDurableConsumer, s.st.Backbone.Durable.DurableConsumer, false},
		{keys.FnStreamFilter, s.st.Backbone.Durable.StreamFilter, false},
		{keys.FnReconcile, s.st.Backbone.Reconcile.Function, false},
		{keys.FnTamperWatch, s.st.Backbone.Tamper.Function, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := backbonetest.Env(fns[s.id(tt.fn.Fn)])
			acc := backbonetest.Access(gs, s.id(tt.fn.Role))
			if !tt.wired {
				for _, v := range []string{ordersmod.EnvTable, searchmod.EnvTable} {
					if got, ok := env[v]; ok {
						t.Errorf("%s = %v; none of its modules reads it", v, got)
					}
				}
				for k := range acc {
					if strings.HasPrefix(k, LogicalOrdersTable+".") || strings.HasPrefix(k, LogicalSearchTable+".") {
						t.Errorf("may %v on %s; none of its modules uses it", acc[k], k)
					}
				}
				return
			}
			for v, id := range map[string]string{ordersmod.EnvTable: LogicalOrdersTable, searchmod.EnvTable: LogicalSearchTable} {
				if diff := cmp.Diff(backbonetest.Ref(id), env[v]); diff != "" {
					t.Errorf("%s (-want +got):\n%s", v, diff)
				}
			}
			orders, ordersStream, search := acc[LogicalOrdersTable+".Arn"], acc[LogicalOrdersTable+".StreamArn"], acc[LogicalSearchTable+".Arn"]
			if !has(orders, read...) || slices.ContainsFunc(orders, func(a string) bool { return slices.Contains(write, a) }) {
				t.Errorf("orders table: may %v, want reads (%v) and no writes", orders, read)
			}
			if !has(ordersStream, stream...) {
				t.Errorf("orders stream: may %v, want %v", ordersStream, stream)
			}
			if !has(search, append(read, write...)...) {
				t.Errorf("search table: may %v, want reads and writes", search)
			}
		})
	}
}
