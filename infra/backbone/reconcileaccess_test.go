package backbone

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/infra/backbone/backbonetest"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
)

// reconcileEnv returns the environment of the template's reconcile
// function.
func reconcileEnv(t *testing.T, tmpl backbonetest.Template) map[string]any {
	t.Helper()
	for id, fn := range tmpl.Resources("AWS::Lambda::Function") {
		p := props(fn)
		if d, _ := p["Description"].(string); !strings.HasPrefix(d, "fourlanes reconcile:") {
			continue
		}
		env, _ := p["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		if vars == nil {
			t.Fatalf("reconcile function %s has no environment", id)
		}
		return vars
	}
	t.Fatal("no reconcile function in the template")
	return nil
}

// joined renders an Fn::Join of strings and Refs, each Ref as refs names it.
func joined(t *testing.T, v any, refs map[string]string) string {
	t.Helper()
	if s, ok := v.(string); ok {
		return s
	}
	j, _ := v.(map[string]any)["Fn::Join"].([]any)
	if len(j) != 2 || j[0] != "" {
		t.Fatalf("not an Fn::Join with no separator: %v", v)
	}
	var b strings.Builder
	for _, part := range j[1].([]any) {
		switch p := part.(type) {
		case string:
			b.WriteString(p)
		case map[string]any:
			id, _ := p["Ref"].(string)
			name, ok := refs[id]
			if !ok {
				t.Fatalf("part %v of the join is not a Ref to a role of the test", p)
			}
			b.WriteString(name)
		}
	}
	return b.String()
}

// TestReconcileAccessFromProps: Props.ReconcileAccess gives reconcile the
// caller → tenants map it enforces (keys.EnvReconcileAccess), naming a
// role of the app by its role name (resolved at deploy) and a caller
// outside it by name; the map is one pkg/reconcile reads; the app's role
// is granted the Function URL. Without it reconcile has no map.
func TestReconcileAccessFromProps(t *testing.T) {
	if vars := reconcileEnv(t, backbonetest.Template(synthLibrary(t, nil).doc)); vars[keys.EnvReconcileAccess] != nil {
		t.Errorf("without Props.ReconcileAccess reconcile has %s = %v, want none", keys.EnvReconcileAccess, vars[keys.EnvReconcileAccess])
	}
	var roleID string
	ls := synthLibrary(t, func(st awscdk.Stack, p *Props) {
		role := awsiam.NewRole(st, jsii.String("TeamAOncall"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
		roleID = *st.GetLogicalId(role.Node().DefaultChild().(awscdk.CfnElement))
		p.ReconcileAccess = []ReconcileAccess{
			{Role: role, Tenants: []string{"acme", "globex"}},
			{Name: "fourlanes-operator", Tenants: []string{"*"}},
			{Name: "user/auditor", Tenants: []string{"acme"}},
		}
	})
	if len(ls.errors) > 0 {
		t.Fatalf("synthesis errors: %v", ls.errors)
	}
	lintDoc(t, ls.doc)
	tmpl := backbonetest.Template(ls.doc)
	raw := joined(t, reconcileEnv(t, tmpl)[keys.EnvReconcileAccess], map[string]string{roleID: "team-a-oncall"})
	var got map[string][]string
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatalf("%s = %s: %v", keys.EnvReconcileAccess, raw, err)
	}
	want := map[string][]string{"team-a-oncall": {"acme", "globex"}, "fourlanes-operator": {"*"}, "user/auditor": {"acme"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", keys.EnvReconcileAccess, diff)
	}
	if _, err := reconcile.ParseTenantAccess(raw); err != nil {
		t.Errorf("reconcile refuses the map the construct writes: %v", err)
	}
	var granted bool
	for _, pol := range tmpl.Resources("AWS::IAM::Policy") {
		p := props(pol)
		if b, _ := json.Marshal(p["Roles"]); string(b) != fmt.Sprintf(`[{"Ref":%q}]`, roleID) {
			continue
		}
		b, _ := json.Marshal(p["PolicyDocument"])
		granted = granted || strings.Contains(string(b), `"lambda:InvokeFunctionUrl"`)
	}
	if !granted {
		t.Error("the role in Props.ReconcileAccess is not granted lambda:InvokeFunctionUrl")
	}
}

// TestReconcileAccessRefused: an entry that names no caller, both a role
// and a name, an ARN, a caller twice, no tenant, "*" beside a tenant or a
// tenant id that is not one fails the synthesis naming the entry.
func TestReconcileAccessRefused(t *testing.T) {
	for _, tt := range []struct {
		name   string
		access func(st awscdk.Stack) []ReconcileAccess
		want   string
	}{
		{"no caller", func(awscdk.Stack) []ReconcileAccess { return []ReconcileAccess{{Tenants: []string{"acme"}}} },
			"Props.ReconcileAccess[0]: Name \"\": give an IAM role's name"},
		{"role and name", func(st awscdk.Stack) []ReconcileAccess {
			r := awsiam.NewRole(st, jsii.String("R"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
			return []ReconcileAccess{{Role: r, Name: "x", Tenants: []string{"acme"}}}
		}, "Props.ReconcileAccess[0]: give Role or Name, not both"},
		{"an ARN", func(awscdk.Stack) []ReconcileAccess {
			return []ReconcileAccess{{Name: "arn:aws:iam::111122223333:role/oncall", Tenants: []string{"acme"}}}
		}, "not its ARN"},
		{"twice", func(awscdk.Stack) []ReconcileAccess {
			return []ReconcileAccess{{Name: "oncall", Tenants: []string{"acme"}}, {Name: "oncall", Tenants: []string{"globex"}}}
		}, `Props.ReconcileAccess[1]: caller "oncall" is named twice`},
		{"no tenant", func(awscdk.Stack) []ReconcileAccess { return []ReconcileAccess{{Name: "oncall"}} },
			"Props.ReconcileAccess[0]: no Tenants"},
		{"star and tenant", func(awscdk.Stack) []ReconcileAccess {
			return []ReconcileAccess{{Name: "oncall", Tenants: []string{"*", "acme"}}}
		}, `"*" stands alone`},
		{"bad tenant", func(awscdk.Stack) []ReconcileAccess {
			return []ReconcileAccess{{Name: "oncall", Tenants: []string{"a b"}}}
		}, `Props.ReconcileAccess[0]: tenant "a b"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ls := synthLibrary(t, func(st awscdk.Stack, p *Props) { p.ReconcileAccess = tt.access(st) })
			if len(ls.errors) != 1 || !strings.Contains(ls.errors[0], tt.want) {
				t.Errorf("synthesis errors %q, want one containing %q", ls.errors, tt.want)
			}
		})
	}
}
