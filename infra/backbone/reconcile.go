package backbone

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/pkg/keys"
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
