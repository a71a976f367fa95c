package backbone

import (
	"encoding/json"
	"sort"
	"testing"

	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// statementsOf returns the statements of the identity policy of one role
// (its default policy, or a managed policy), without their Sids: a grant
// and the managed policy with the same permissions differ only there.
func (s *synthesized) statementsOf(policy constructs.IConstruct, typ string) []any {
	doc, _ := props(s.resources(typ)[s.id(policy)])["PolicyDocument"].(map[string]any)
	var out []any
	for _, st := range list(doc["Statement"]) {
		m := map[string]any{}
		for k, v := range st.(map[string]any) {
			if k != "Sid" {
				m[k] = v
			}
		}
		out = append(out, m)
	}
	return out
}

// defaultPolicy is the default policy CDK's grants write for a role.
func defaultPolicy(role constructs.IConstruct) constructs.IConstruct {
	return role.Node().TryFindChild(jsii.String("DefaultPolicy"))
}

// TestGrantEmit: the team's bench gets what Emit needs and nothing more: on
// the log, Put and ConditionCheck inside TransactWriteItems, GetItem and
// Query; on the tracked widgets table, the writes Emit's transaction
// carries, inside TransactWriteItems too. The emitter policy (for
// principals outside the app) holds exactly the same statements. The
// bench's own read of its table (widgets.GrantReadData) is its own grant,
// beside them, and touches neither the log nor the state table.
func TestGrantEmit(t *testing.T) {
	s := synth(t)
	emitter := s.statementsOf(s.stack.Log.EmitterPolicy, "AWS::IAM::ManagedPolicy")
	if len(emitter) != 3 {
		t.Fatalf("the emitter policy has %d statements, want 3: %v", len(emitter), emitter)
	}
	bench := map[string]any{}
	for _, st := range s.statementsOf(defaultPolicy(s.stack.Bench.Role()), "AWS::IAM::Policy") {
		bench[statementString(st)] = st
	}
	for _, st := range emitter {
		if _, ok := bench[statementString(st)]; !ok {
			t.Errorf("the bench's policy lacks the emitter policy's %s", statementString(st))
		}
		delete(bench, statementString(st))
	}
	for k, st := range bench {
		res := st.(map[string]any)["Resource"]
		if touches(res, LogicalEventsTable) || touches(res, LogicalStateTable) {
			t.Errorf("the bench has %s beyond GrantEmit", k)
		}
	}
}

// statementString is a statement as JSON, to compare statements as a set.
func statementString(st any) string {
	b, err := json.Marshal(st)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func statementStrings(sts []any) []string {
	out := make([]string, len(sts))
	for i, st := range sts {
		out[i] = statementString(st)
	}
	sort.Strings(out)
	return out
}

// TestGrantReconcile: the operator gets exactly the reconcile caller
// policy's statements: InvokeFunctionUrl (AWS_IAM auth) and InvokeFunction
// only through the URL, on reconcile alone.
func TestGrantReconcile(t *testing.T) {
	s := synth(t)
	caller := s.statementsOf(s.stack.Reconcile.CallerPolicy, "AWS::IAM::ManagedPolicy")
	operator := s.statementsOf(defaultPolicy(s.stack.Operator), "AWS::IAM::Policy")
	if len(caller) != 2 {
		t.Fatalf("the caller policy has %d statements, want 2: %v", len(caller), caller)
	}
	if diff := cmp.Diff(statementStrings(caller), statementStrings(operator)); diff != "" {
		t.Errorf("the operator's grants from GrantReconcile (-caller policy +operator):\n%s", diff)
	}
}

// TestGrantRead: the auditor may read the log and the state table (GetItem,
// BatchGetItem, Query, Scan), the signed checkpoints and the public half of
// their key, and write nothing.
func TestGrantRead(t *testing.T) {
	s := synth(t)
	read := []string{"dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:Query", "dynamodb:Scan"}
	want := map[string][]string{
		LogicalEventsTable + ".Arn": read,
		LogicalStateTable + ".Arn":  read,
		`{"Fn::Join":["",[{"Fn::GetAtt":["` + LogicalStateTable + `","Arn"]},"/index/` + keys.IndexDeadTenants + `"]]}`: {"dynamodb:Query"},
		LogicalCheckpointBucket + ".Arn": {"s3:ListBucket"},
		`{"Fn::Join":["",[{"Fn::GetAtt":["` + LogicalCheckpointBucket + `","Arn"]},"/checkpoints/*"]]}`: {"s3:GetObject"},
		LogicalCheckpointKey + ".Arn": {"kms:GetPublicKey"},
	}
	if diff := cmp.Diff(want, access(grants(s.Doc), s.id(s.stack.Auditor))); diff != "" {
		t.Errorf("the auditor's access (-want +got):\n%s", diff)
	}
}
