package backbone

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// ReconcileProps wires reconcile to the log.
type ReconcileProps struct {
	Log       *EventLog
	Functions FunctionOptions
	// ReservedConcurrency caps concurrent reconciles (each re-walks whole
	// chains); nil leaves the function unreserved.
	ReservedConcurrency *float64
}

// Reconcile re-walks each tenant's chain and counts dead letters, behind a
// Function URL that only SigV4-signed callers with CallerPolicy may invoke.
type Reconcile struct {
	constructs.Construct
	Function Function
	URL      awslambda.FunctionUrl
	// CallerPolicy lets a principal call the URL: since October 2025 a URL
	// with AWS_IAM auth needs both lambda:InvokeFunctionUrl and
	// lambda:InvokeFunction (the latter only via the URL). It holds what
	// Backbone.GrantReconcile grants, for principals outside the CDK app.
	CallerPolicy awsiam.ManagedPolicy
}

// NewReconcile creates the function, its URL and the caller policy.
func NewReconcile(scope constructs.Construct, id string, props *ReconcileProps) *Reconcile {
	c := constructs.NewConstruct(scope, jsii.String(id))
	fn := newFunction(c, "Reconcile", props.Functions, functionSpec{
		name:        keys.FnReconcile,
		description: "fourlanes reconcile: verify each tenant's chain, count dead letters",
		timeout:     awscdk.Duration_Seconds(jsii.Number(60)),
		memoryMB:    512,
		env: map[string]*string{
			keys.EnvEventsTable: props.Log.Events.TableName(),
			keys.EnvStateTable:  props.Log.State.TableName(),
		},
		reserved: props.ReservedConcurrency,
	})
	allow(fn.Role, tableRead, props.Log.Events.TableArn())
	allow(fn.Role, concat(tableRead, tableWrite), props.Log.State.TableArn())

	url := fn.Fn.AddFunctionUrl(&awslambda.FunctionUrlOptions{
		AuthType:   awslambda.FunctionUrlAuthType_AWS_IAM,
		InvokeMode: awslambda.InvokeMode_BUFFERED,
	})

	caller := awsiam.NewManagedPolicy(c, jsii.String("CallerPolicy"), &awsiam.ManagedPolicyProps{
		Description: jsii.String("fourlanes: call the reconcile Function URL (SigV4)"),
		Statements:  statements(reconcileCallerPermissions(fn.Fn.FunctionArn())),
	})
	return &Reconcile{Construct: c, Function: fn, URL: url, CallerPolicy: caller}
}

// ReconcileAccess names one caller of reconcile's Function URL and the
// tenants it may see (Props.ReconcileAccess).
type ReconcileAccess struct {
	// Role is a role of the app, or imported (awsiam.Role_FromRoleArn): it
	// is granted the URL (GrantReconcile) and named by its role name.
	Role awsiam.IRole
	// Name, instead of Role, names a caller the app does not hold: an IAM
	// role's name (not its ARN) or user/<name>. Grant it the URL yourself
	// (the ReconcileCallerPolicyArn output).
	Name string
	// Tenants it may see: tenant ids, or "*" alone for every tenant (and
	// GET / over all of them).
	Tenants []string
}

// limitAccess sets keys.EnvReconcileAccess from access (nothing when it is
// empty) and grants the URL to each Role; it returns what is wrong with an
// entry.
func (r *Reconcile) limitAccess(access []ReconcileAccess) []error {
	if len(access) == 0 {
		return nil
	}
	var errs []error
	// The JSON object, joined with each role's name (a token until deploy:
	// IAM names hold no quote or backslash, so it needs no escaping).
	parts := []*string{jsii.String("{")}
	names := map[string]bool{}
	for i, a := range access {
		what := fmt.Sprintf("Props.ReconcileAccess[%d]", i)
		var name *string
		switch {
		case a.Role != nil && a.Name != "":
			errs = append(errs, fmt.Errorf("%s: give Role or Name, not both", what))
			continue
		case a.Role != nil:
			name = a.Role.RoleName()
			grantAll(a.Role, reconcileCallerPermissions(r.Function.Fn.FunctionArn()))
		case a.Name == "" || strings.ContainsAny(a.Name, ":\"\\") || (strings.Contains(a.Name, "/") && !strings.HasPrefix(a.Name, "user/")):
			errs = append(errs, fmt.Errorf("%s: Name %q: give an IAM role's name (not its ARN) or user/<name>, or Role", what, a.Name))
			continue
		default:
			name = jsii.String(a.Name)
		}
		if !*awscdk.Token_IsUnresolved(name) {
			if names[*name] {
				errs = append(errs, fmt.Errorf("%s: caller %q is named twice", what, *name))
				continue
			}
			names[*name] = true
		}
		if len(a.Tenants) == 0 {
			errs = append(errs, fmt.Errorf("%s: no Tenants: list tenant ids, or \"*\" for every tenant", what))
			continue
		}
		ok := true
		for _, t := range a.Tenants {
			if t == "*" {
				if len(a.Tenants) > 1 {
					errs = append(errs, fmt.Errorf("%s: \"*\" stands alone (every tenant)", what))
					ok = false
				}
				continue
			}
			if err := tenancy.CheckTenant(t); err != nil {
				errs = append(errs, fmt.Errorf("%s: tenant %q: %v", what, t, err))
				ok = false
			}
		}
		if !ok {
			continue
		}
		tenants, _ := json.Marshal(a.Tenants)
		if len(parts) > 1 {
			parts = append(parts, jsii.String(","))
		}
		parts = append(parts, jsii.String(`"`), name, jsii.String(`":`+string(tenants)))
	}
	parts = append(parts, jsii.String("}"))
	if len(errs) == 0 {
		r.Function.Fn.AddEnvironment(jsii.String(keys.EnvReconcileAccess), awscdk.Fn_Join(jsii.String(""), &parts), nil)
	}
	return errs
}
