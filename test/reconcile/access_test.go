package reconcile_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/fourlanes/fourlanes/pkg/reconcile"
)

// callAs invokes the handler with the fixture's request, signed (as the
// Function URL's AWS_IAM auth reports it) by callerARN.
func (e *env) callAs(t *testing.T, callerARN, query string) (int, map[string]any) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(request(t, "GET", "/", query), &m); err != nil {
		t.Fatal(err)
	}
	m["requestContext"].(map[string]any)["authorizer"].(map[string]any)["iam"].(map[string]any)["userArn"] = callerARN
	raw, _ := json.Marshal(m)
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "lambda-req-access"})
	out, err := lambda.NewHandler(e.handler.Handle).Invoke(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	var resp events.LambdaFunctionURLResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// TestTenantAccess: with RECONCILE_ACCESS, a caller sees only the tenants
// its IAM role is mapped to: its own tenants' reports (and their chain
// shards'), a 403 naming what it may see for any other tenant and for the
// all-tenant walk; a role mapped to "*" sees everything; an unmapped role
// sees nothing. No data of another tenant is in a refusal.
func TestTenantAccess(t *testing.T) {
	e := newEnv(t, nil)
	e.emit(t, "acme", 2)
	e.emit(t, "globex", 1)
	access, err := reconcile.ParseTenantAccess(`{"fourlanes-operator":["*"],"team-a-oncall":["acme"],"user/auditor":["globex"]}`)
	if err != nil {
		t.Fatal(err)
	}
	e.handler.WithAccess(access)
	const (
		operator = "arn:aws:sts::123456789012:assumed-role/fourlanes-operator/operator"
		teamA    = "arn:aws:sts::123456789012:assumed-role/team-a-oncall/alice"
		auditor  = "arn:aws:iam::123456789012:user/auditor"
		stranger = "arn:aws:sts::123456789012:assumed-role/someone-else/bob"
	)
	for _, c := range []struct {
		name, caller, query string
		status              int
		want                string // in the error, for a refusal
	}{
		{"operator, one tenant", operator, "tenant=globex", 200, ""},
		{"operator, every tenant", operator, "", 200, ""},
		{"team A, its tenant", teamA, "tenant=acme", 200, ""},
		{"team A, its tenant's chain shard", teamA, "tenant=acme~3", 200, ""},
		{"team A, another tenant", teamA, "tenant=globex", 403, `may not see tenant "globex" (it may see acme)`},
		{"team A, every tenant", teamA, "", 403, "may see tenants acme only"},
		{"an IAM user", auditor, "tenant=globex", 200, ""},
		{"an IAM user, another tenant", auditor, "tenant=acme", 403, `"user/auditor" may not see tenant "acme"`},
		{"an unmapped role", stranger, "tenant=acme", 403, `("someone-else") may see no tenant`},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := e.callAs(t, c.caller, c.query)
			if status != c.status {
				t.Fatalf("status %d %v, want %d", status, body, c.status)
			}
			if c.status != 200 {
				msg, _ := body["error"].(string)
				if !strings.Contains(msg, c.want) {
					t.Errorf("error %q, want it to say %q", msg, c.want)
				}
				if b, _ := json.Marshal(body); strings.Contains(string(b), "last_seq") || strings.Contains(string(b), "dead_letter") {
					t.Errorf("refusal %s carries a report", b)
				}
			}
		})
	}
	for _, bad := range []string{`[]`, `{"arn:aws:iam::1:role/x":["acme"]}`, `{"x":[]}`, `{"x":["*","acme"]}`, `{"x":["bad tenant"]}`} {
		if _, err := reconcile.ParseTenantAccess(bad); err == nil {
			t.Errorf("ParseTenantAccess(%s): got nil, want an error", bad)
		}
	}
}
