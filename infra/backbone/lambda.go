package backbone

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// FunctionOptions are the settings every function shares.
type FunctionOptions struct {
	// CodeRoot holds one folder per function, named as in keys.Functions,
	// each with a `bootstrap` binary (the app passes "build").
	CodeRoot string
	// LogRetention applies to every function's log group but those of the
	// watchers (IntegrityLogRetention).
	LogRetention awslogs.RetentionDays
	// IntegrityLogRetention applies to the log groups of the functions whose
	// lines are evidence (tamper-watch's findings, the notary's): an
	// auditor asks months later. Zero means one year.
	IntegrityLogRetention awslogs.RetentionDays
	// ApplicationLogLevel filters the functions' own log lines (Lambda's
	// LoggingConfig, JSON format). Lambda passes it to the function as
	// AWS_LAMBDA_LOG_LEVEL, which obs.Setup follows, and the console changes
	// it without a deploy. Default INFO. Above INFO, Lambda also drops the
	// EMF metric lines (a line without a level counts as INFO), and the
	// alarms on those metrics see nothing.
	ApplicationLogLevel awslambda.ApplicationLogLevel
	// SystemLogLevel filters Lambda's own lines (start, report). Default INFO.
	SystemLogLevel awslambda.SystemLogLevel
	// LogKey, when set, encrypts every log group (a customer-managed KMS
	// key whose policy lets the CloudWatch Logs service use it).
	LogKey awskms.IKey
	// Tracing is each function's X-Ray mode; the zero value means ACTIVE.
	Tracing awslambda.Tracing
	// TraceEndpoint, with Tracing ACTIVE or PASS_THROUGH, turns on the
	// functions' OpenTelemetry spans (pkg/tracing): FOURLANES_TRACING=otel,
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OTEL_SERVICE_NAME (the
	// function's name). Empty, FOURLANES_TRACING=off.
	TraceEndpoint string
	// TraceLayers are added to every function (the ADOT collector layer).
	TraceLayers []awslambda.ILayerVersion
}

// functionSpec is what differs between functions.
type functionSpec struct {
	name        string // keys.Fn*
	description string
	timeout     awscdk.Duration
	memoryMB    float64
	env         map[string]*string
	// reserved caps concurrency (nil: unreserved).
	reserved *float64
	// integrity: its log lines are evidence (IntegrityLogRetention).
	integrity bool
}

// Function is a Go Lambda function with its own role and log group, so it
// gets no AWS managed policy and nothing but what its construct grants.
type Function struct {
	name string // keys.Fn*
	Fn   awslambda.Function
	Role awsiam.Role
	Logs awslogs.LogGroup
}

func newFunction(scope constructs.Construct, id string, opts FunctionOptions, spec functionSpec) Function {
	role := awsiam.NewRole(scope, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("fourlanes " + spec.name + " function"),
	})
	retention := opts.LogRetention
	if spec.integrity {
		retention = opts.IntegrityLogRetention
		if retention == "" {
			retention = awslogs.RetentionDays_ONE_YEAR
		}
	}
	logs := awslogs.NewLogGroup(scope, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		Retention:     retention,
		EncryptionKey: opts.LogKey,
	})
	logs.GrantWrite(role)

	appLevel, sysLevel := opts.ApplicationLogLevel, opts.SystemLogLevel
	switch appLevel {
	case "":
		appLevel = awslambda.ApplicationLogLevel_INFO
	case awslambda.ApplicationLogLevel_WARN, awslambda.ApplicationLogLevel_ERROR, awslambda.ApplicationLogLevel_FATAL:
		// Fail the synthesis: the integrity alarms would go blind in silence.
		awscdk.Annotations_Of(scope).AddError(jsii.String(fmt.Sprintf(
			"function %s: ApplicationLogLevel %s would make Lambda drop the EMF metric lines (a line without a level counts as INFO), "+
				"and the alarms on them would see nothing; use INFO, DEBUG or TRACE", spec.name, appLevel)))
	}
	if sysLevel == "" {
		sysLevel = awslambda.SystemLogLevel_INFO
	}
	tracing := opts.Tracing
	if tracing == "" {
		tracing = awslambda.Tracing_ACTIVE
	}
	traced := tracing != awslambda.Tracing_DISABLED
	env := map[string]*string{keys.EnvTracing: jsii.String(tracingOff)}
	if traced && opts.TraceEndpoint != "" {
		env[keys.EnvTracing] = jsii.String(tracingOTel)
		env[keys.EnvOTLPTracesEndpoint] = jsii.String(opts.TraceEndpoint)
		env[keys.EnvOTelServiceName] = jsii.String(spec.name)
	}
	var layers *[]awslambda.ILayerVersion
	if len(opts.TraceLayers) > 0 {
		layers = &opts.TraceLayers
	}
	for k, v := range spec.env {
		env[k] = v
	}
	fn := awslambda.NewFunction(scope, jsii.String(id), &awslambda.FunctionProps{
		Description:                  jsii.String(spec.description),
		Runtime:                      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture:                 awslambda.Architecture_ARM_64(),
		Handler:                      jsii.String("bootstrap"),
		Code:                         functionCode(scope, id, opts.CodeRoot, spec.name),
		Timeout:                      spec.timeout,
		MemorySize:                   jsii.Number(spec.memoryMB),
		Environment:                  &env,
		Tracing:                      tracing,
		Role:                         role,
		LogGroup:                     logs,
		LoggingFormat:                awslambda.LoggingFormat_JSON,
		ApplicationLogLevelV2:        appLevel,
		SystemLogLevelV2:             sysLevel,
		ReservedConcurrentExecutions: spec.reserved,
		Layers:                       layers,
	})
	if traced {
		// Tracing adds xray:PutTraceSegments and xray:PutTelemetryRecords on
		// "*" to the role.
		cdknag.NagSuppressions_AddResourceSuppressions(role, &[]*cdknag.NagPackSuppression{{
			Id:        jsii.String("AwsSolutions-IAM5"),
			Reason:    jsii.String("X-Ray's PutTraceSegments and PutTelemetryRecords support no resource-level permissions; CDK's active tracing grants them on *."),
			AppliesTo: &[]interface{}{jsii.String("Resource::*")},
		}}, jsii.Bool(true))
	}
	return Function{name: spec.name, Fn: fn, Role: role, Logs: logs}
}

// functionCode is <codeRoot>/<name> as the function's code asset. Without
// its bootstrap, CDK would stop the synthesis at the asset with a
// JavaScript error; instead the synthesis fails with an error that names
// Props.CodeRoot and the fix, and the function gets a placeholder that no
// template of a successful synthesis holds.
func functionCode(scope constructs.Construct, id, codeRoot, name string) awslambda.Code {
	dir := filepath.Join(codeRoot, name)
	if _, err := os.Stat(filepath.Join(dir, "bootstrap")); err == nil {
		return awslambda.Code_FromAsset(jsii.String(dir), nil)
	}
	awscdk.Annotations_Of(scope).AddError(jsii.String(fmt.Sprintf(
		"function %s: %s is missing: give Props.CodeRoot the folder that holds <function>/bootstrap for every function (the examples pass \"build\"), and build them first (make build)",
		name, filepath.Join(dir, "bootstrap"))))
	missing := awss3.Bucket_FromBucketName(scope, jsii.String(id+"MissingCode"), jsii.String("fourlanes-missing-code"))
	return awslambda.Code_FromBucket(missing, jsii.String(name+".zip"), nil)
}

// FOURLANES_TRACING's values (tracing.ModeOTel, tracing.ModeOff; infra does
// not link the runtime's tracing package).
const (
	tracingOTel = "otel"
	tracingOff  = "off"
)

// DynamoDB and SQS action sets. The events table only ever gets
// logAppendWrite/logAppendRead and tableRead (plus streamRead): see
// policy_test.go.
var (
	// logAppendWrite and logAppendRead are exactly what Emit needs: the
	// conditional head and event Puts and the caller's condition checks
	// (only inside TransactWriteItems), and the head read and read path.
	logAppendWrite = []string{"dynamodb:PutItem", "dynamodb:ConditionCheckItem"}
	logAppendRead  = []string{"dynamodb:GetItem", "dynamodb:Query"}
	tableRead      = []string{"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:Scan", "dynamodb:ConditionCheckItem"}
	// tableWrite is for tables that are updated (never the log).
	tableWrite = []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
	streamRead = []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}
	// queueDrain lets dlq-repair read, settle and re-park messages.
	queueDrain = []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"}
)

func concat(sets ...[]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range sets {
		for _, a := range s {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// statement builds an Allow statement; resources are ARNs (tokens).
func statement(actions []string, resources ...*string) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	})
}

// allow adds an Allow statement to a role's default policy.
func allow(role awsiam.IRole, actions []string, resources ...*string) {
	role.AddToPrincipalPolicy(statement(actions, resources...))
}

// listStreams is dynamodb:ListStreams, which has no resource-level
// permissions; stream consumers (the Pipe, a Lambda mapping) call it.
func listStreams(role awsiam.IRole) {
	allow(role, []string{"dynamodb:ListStreams"}, jsii.String("*"))
	cdknag.NagSuppressions_AddResourceSuppressions(role, &[]*cdknag.NagPackSuppression{{
		Id:        jsii.String("AwsSolutions-IAM5"),
		Reason:    jsii.String("dynamodb:ListStreams supports no resource-level permissions; it lists stream ARNs, never data. Reading a stream is granted on its ARN only."),
		AppliesTo: &[]interface{}{jsii.String("Resource::*")},
	}}, jsii.Bool(true))
}

// pin fixes the logical ID of a construct's CloudFormation resource, so a
// refactor of construct paths can never replace a stateful resource. New
// passes its prefix (keys.BackbonePrefix) to every construct it composes, so
// two backbones in one stack pin different IDs.
func pin(c constructs.Construct, prefix, logicalID string) {
	c.Node().DefaultChild().(awscdk.CfnResource).OverrideLogicalId(jsii.String(prefix + logicalID))
}
