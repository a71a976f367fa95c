package reconcile

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// TenantAccess says which tenants each caller of the Function URL may see.
// The Function URL's AWS_IAM auth verifies the caller's SigV4 signature and
// hands the function its identity (requestContext.authorizer.iam.userArn),
// but neither its tags nor its policies: so the map is kept beside the
// function, in keys.EnvReconcileAccess, keyed by IAM role name (the role of
// an assumed-role session, or of a role ARN) or "user/<name>" for an IAM
// user, each naming tenant ids or "*" (every tenant, and GET / over all of
// them). A caller it does not name sees nothing (403); a restricted caller
// asks for its tenants one at a time (GET /?tenant=T, or a chain shard of
// T). Without a map, every caller the URL admits sees every tenant.
type TenantAccess struct {
	callers map[string][]string // caller name → sorted tenant ids, or ["*"]
}

// ParseTenantAccess reads the JSON object of keys.EnvReconcileAccess, e.g.
// {"fourlanes-operator":["*"],"team-a-oncall":["acme","globex"]}. "" is no
// map (nil).
func ParseTenantAccess(s string) (*TenantAccess, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var m map[string][]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("%s: %v; want a JSON object of role name (or user/<name>) to tenant ids or [\"*\"], e.g. {\"oncall\":[\"acme\"]}", keys.EnvReconcileAccess, err)
	}
	a := &TenantAccess{callers: map[string][]string{}}
	for name, ts := range m {
		if name == "" || strings.Contains(name, ":") {
			return nil, fmt.Errorf("%s: caller %q: name an IAM role (its name, not its ARN) or user/<name>", keys.EnvReconcileAccess, name)
		}
		if len(ts) == 0 {
			return nil, fmt.Errorf("%s: caller %q has no tenants; list tenant ids, or [\"*\"] for every tenant, or remove it", keys.EnvReconcileAccess, name)
		}
		for _, t := range ts {
			if t == "*" {
				if len(ts) > 1 {
					return nil, fmt.Errorf("%s: caller %q: \"*\" stands alone (every tenant)", keys.EnvReconcileAccess, name)
				}
				continue
			}
			if err := tenancy.CheckTenant(t); err != nil {
				return nil, fmt.Errorf("%s: caller %q: tenant %q: %v", keys.EnvReconcileAccess, name, t, err)
			}
		}
		ts = slices.Clone(ts)
		sort.Strings(ts)
		a.callers[name] = ts
	}
	return a, nil
}

// callerName is the name TenantAccess keys a caller ARN by: the role of
// arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION or arn:aws:iam::ACCOUNT:role/PATH/ROLE,
// or user/NAME of arn:aws:iam::ACCOUNT:user/PATH/NAME; "" for anything else.
func callerName(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" {
		return ""
	}
	res := strings.Split(parts[5], "/")
	switch {
	case parts[2] == "sts" && res[0] == "assumed-role" && len(res) >= 3:
		return res[1]
	case parts[2] == "iam" && res[0] == "role" && len(res) >= 2:
		return res[len(res)-1]
	case parts[2] == "iam" && res[0] == "user" && len(res) >= 2:
		return "user/" + res[len(res)-1]
	}
	return ""
}

// check says why the caller may not see what the request asks, or "":
// tenant is the chain asked for ("" for every tenant).
func (a *TenantAccess) check(callerARN, chain string, all bool) string {
	name := callerName(callerARN)
	ts, ok := a.callers[name]
	switch {
	case !ok:
		return fmt.Sprintf("caller %s (%q) may see no tenant: %s names it not; ask the stack's operator", callerARN, name, keys.EnvReconcileAccess)
	case len(ts) == 1 && ts[0] == "*":
		return ""
	case all:
		return fmt.Sprintf("caller %q may see tenants %s only: ask for each with GET /?tenant=<tenant>", name, strings.Join(ts, ", "))
	case !slices.Contains(ts, tenancy.TenantOf(chain)):
		return fmt.Sprintf("caller %q may not see tenant %q (it may see %s)", name, tenancy.TenantOf(chain), strings.Join(ts, ", "))
	}
	return ""
}
