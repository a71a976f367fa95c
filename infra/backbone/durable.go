package backbone

import (
	"encoding/json"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awspipes"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Pinned logical IDs of the DurableLane's stateful resources. The Pipe is
// pinned too: a replaced Pipe starts again at TRIM_HORIZON and re-sends up to
// 24 hours of events, far outside the FIFO queue's 5-minute dedup window.
const (
	LogicalDurableQueue = "DurableQueue"
	LogicalDurableDLQ   = "DurableDLQ"
	LogicalPipeDLQ      = "PipeDLQ"
	LogicalEventsPipe   = "EventsPipe"
)

// Durable lane settings. The consumer's timeout fixes the queue's visibility
// timeout (AWS: at least 6 × the function timeout).
const (
	durableConsumerTimeoutSeconds = 30
	visibilityFactor              = 6
	durableMaxReceiveCount        = 5
	// pipeBatchSize: the SQS target takes at most 10 per batch.
	pipeBatchSize = 10
	// pipeMaxRetries then the Pipe DLQ; a poison record holds its shard for
	// at most this many attempts (bisecting does not count).
	pipeMaxRetries = 10
	// pipeMaxRecordAgeSeconds is well under the stream's 24 h retention, so
	// dlq-repair has 18 hours to fetch a dead-lettered range from the stream.
	pipeMaxRecordAgeSeconds = 6 * 3600
)

// DurableLaneProps wires the lane to the log.
type DurableLaneProps struct {
	Log       *EventLog
	Functions FunctionOptions
	// ConsumerMaxConcurrency caps durable-consumer's concurrent invocations
	// from the queue (2–1000), bounding its writes to the state table.
	ConsumerMaxConcurrency float64
	RemovalPolicy          awscdk.RemovalPolicy
	// QueueKey, when set, encrypts the three queues (a customer-managed key).
	QueueKey awskms.IKey
}

// DurableLane carries event rows from the log's stream through an EventBridge
// Pipe (filter: event rows only; enrichment: stream-filter) into a FIFO queue
// with one message group per tenant, and on to durable-consumer.
type DurableLane struct {
	constructs.Construct
	Queue           awssqs.Queue
	DLQ             awssqs.Queue
	PipeDLQ         awssqs.Queue
	Pipe            awspipes.CfnPipe
	PipeRole        awsiam.Role
	PipeLogs        awslogs.LogGroup
	StreamFilter    Function
	DurableConsumer Function
}

// PipeFilterPattern passes event rows only: a head row (kind = head) and any
// record without a NewImage (REMOVE) are dropped. eventName is not filterable
// in Pipes, so the filter is on the image.
func PipeFilterPattern() string {
	b, err := json.Marshal(map[string]any{
		"dynamodb": map[string]any{
			"NewImage": map[string]any{
				keys.AttrKind: map[string]any{"S": []string{keys.KindEvent}},
			},
		},
	})
	if err != nil {
		panic(err) // a constant map
	}
	return string(b)
}

// Target paths, evaluated by the Pipe on each envelope stream-filter returns.
// The envelope's JSON field names are the log's attribute names.
const (
	PipeMessageGroupPath = "$." + keys.AttrTenant
	PipeDedupIDPath      = "$." + keys.AttrID
)

// NewDurableLane creates the Pipe, the queues and the two functions.
func NewDurableLane(scope constructs.Construct, id string, props *DurableLaneProps) *DurableLane {
	c := constructs.NewConstruct(scope, jsii.String(id))
	stack := awscdk.Stack_Of(c)
	log := props.Log
	queueEnc, queueKey := queueEncryption(props.QueueKey)

	// Stream sources dead-letter metadata about the failed batch (a standard
	// queue; FIFO is not allowed there).
	pipeDLQ := awssqs.NewQueue(c, jsii.String("PipeDLQ"), &awssqs.QueueProps{
		Encryption:          queueEnc,
		EncryptionMasterKey: queueKey,
		EnforceSSL:          jsii.Bool(true),
		RetentionPeriod:     awscdk.Duration_Days(jsii.Number(14)),
		RemovalPolicy:       props.RemovalPolicy,
	})
	prefix := log.LogicalIDPrefix()
	pin(pipeDLQ, prefix, LogicalPipeDLQ)
	suppressIsDLQ(pipeDLQ, "It is the Pipe's DeadLetterConfig target: it receives batch metadata the Pipe could not deliver; dlq-repair drains it.")

	fifo := func(cid string, dlq *awssqs.DeadLetterQueue, visibility awscdk.Duration, retention float64) awssqs.Queue {
		return awssqs.NewQueue(c, jsii.String(cid), &awssqs.QueueProps{
			Fifo: jsii.Bool(true),
			// Dedup ids are explicit (the event id); the body must not decide.
			ContentBasedDeduplication: jsii.Bool(false),
			DeduplicationScope:        awssqs.DeduplicationScope_MESSAGE_GROUP,
			FifoThroughputLimit:       awssqs.FifoThroughputLimit_PER_MESSAGE_GROUP_ID,
			Encryption:                queueEnc,
			EncryptionMasterKey:       queueKey,
			EnforceSSL:                jsii.Bool(true),
			VisibilityTimeout:         visibility,
			RetentionPeriod:           awscdk.Duration_Days(jsii.Number(retention)),
			DeadLetterQueue:           dlq,
			RemovalPolicy:             props.RemovalPolicy,
		})
	}
	visibility := awscdk.Duration_Seconds(jsii.Number(visibilityFactor * durableConsumerTimeoutSeconds))
	dlq := fifo("DurableDLQ", nil, visibility, 14)
	pin(dlq, prefix, LogicalDurableDLQ)
	queue := fifo("DurableQueue", &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(durableMaxReceiveCount)}, visibility, 4)
	pin(queue, prefix, LogicalDurableQueue)

	streamFilter := newFunction(c, "StreamFilter", props.Functions, functionSpec{
		name:        keys.FnStreamFilter,
		description: "fourlanes Pipe enrichment: stream records of event rows to envelopes",
		timeout:     awscdk.Duration_Seconds(jsii.Number(10)),
		memoryMB:    256,
	})

	consumer := newFunction(c, "DurableConsumer", props.Functions, functionSpec{
		name:        keys.FnDurableConsumer,
		description: "fourlanes DURABLE lane: claims and runs subscriptions per event",
		timeout:     awscdk.Duration_Seconds(jsii.Number(durableConsumerTimeoutSeconds)),
		memoryMB:    256,
		env: map[string]*string{
			keys.EnvEventsTable:   log.Events.TableName(),
			keys.EnvStateTable:    log.State.TableName(),
			keys.EnvDurableDLQURL: dlq.QueueUrl(),
		},
	})
	allow(consumer.Role, tableRead, log.Events.TableArn())
	allow(consumer.Role, concat(tableRead, tableWrite), log.State.TableArn())
	// A poison message goes to the DLQ at its first receive (pkg/consumer),
	// rather than holding its tenant's lane for maxReceiveCount receives.
	allow(consumer.Role, []string{"sqs:SendMessage"}, dlq.QueueArn())
	consumer.Fn.AddEventSource(awslambdaeventsources.NewSqsEventSource(queue, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(10),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(props.ConsumerMaxConcurrency),
	}))

	pipeLogs := awslogs.NewLogGroup(c, jsii.String("PipeLogs"), &awslogs.LogGroupProps{
		Retention:     props.Functions.LogRetention,
		EncryptionKey: props.Functions.LogKey,
	})

	// The Pipe's role. Inline policies, so the permissions exist before the
	// Pipe is created and validated.
	pipeRole := awsiam.NewRole(c, jsii.String("PipeRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("pipes.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]interface{}{
				"StringEquals": map[string]interface{}{"aws:SourceAccount": stack.Account()},
			},
		}),
		Description: jsii.String("fourlanes events Pipe: read the log's stream, enrich, send to the FIFO queue"),
		InlinePolicies: &map[string]awsiam.PolicyDocument{
			"pipe": awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &[]awsiam.PolicyStatement{
				statement(streamRead, log.Events.TableStreamArn()),
				statement([]string{"dynamodb:ListStreams"}, jsii.String("*")),
				statement([]string{"lambda:InvokeFunction"}, streamFilter.Fn.FunctionArn()),
				statement([]string{"sqs:SendMessage"}, queue.QueueArn()),
				statement([]string{"sqs:SendMessage"}, pipeDLQ.QueueArn()),
				statement([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, pipeLogs.LogGroupArn()),
			}}),
		},
	})
	cdknag.NagSuppressions_AddResourceSuppressions(pipeRole, &[]*cdknag.NagPackSuppression{{
		Id:        jsii.String("AwsSolutions-IAM5"),
		Reason:    jsii.String("dynamodb:ListStreams supports no resource-level permissions; it lists stream ARNs, never data. Reading the stream is granted on its ARN only."),
		AppliesTo: &[]interface{}{jsii.String("Resource::*")},
	}}, jsii.Bool(true))

	pipe := awspipes.NewCfnPipe(c, jsii.String("Pipe"), &awspipes.CfnPipeProps{
		Description: jsii.String("fourlanes: event rows of the log to the DURABLE FIFO queue, one message group per tenant"),
		RoleArn:     pipeRole.RoleArn(),
		Source:      log.Events.TableStreamArn(),
		SourceParameters: &awspipes.CfnPipe_PipeSourceParametersProperty{
			DynamoDbStreamParameters: &awspipes.CfnPipe_PipeSourceDynamoDBStreamParametersProperty{
				StartingPosition:          jsii.String("TRIM_HORIZON"),
				BatchSize:                 jsii.Number(pipeBatchSize),
				OnPartialBatchItemFailure: jsii.String("AUTOMATIC_BISECT"),
				MaximumRetryAttempts:      jsii.Number(pipeMaxRetries),
				MaximumRecordAgeInSeconds: jsii.Number(pipeMaxRecordAgeSeconds),
				DeadLetterConfig:          &awspipes.CfnPipe_DeadLetterConfigProperty{Arn: pipeDLQ.QueueArn()},
			},
			FilterCriteria: &awspipes.CfnPipe_FilterCriteriaProperty{
				Filters: &[]*awspipes.CfnPipe_FilterProperty{{Pattern: jsii.String(PipeFilterPattern())}},
			},
		},
		Enrichment: streamFilter.Fn.FunctionArn(),
		Target:     queue.QueueArn(),
		TargetParameters: &awspipes.CfnPipe_PipeTargetParametersProperty{
			SqsQueueParameters: &awspipes.CfnPipe_PipeTargetSqsQueueParametersProperty{
				MessageGroupId:         jsii.String(PipeMessageGroupPath),
				MessageDeduplicationId: jsii.String(PipeDedupIDPath),
			},
		},
		// Errors only, and no execution data: payloads are tenant data.
		LogConfiguration: &awspipes.CfnPipe_PipeLogConfigurationProperty{
			Level:                        jsii.String("ERROR"),
			CloudwatchLogsLogDestination: &awspipes.CfnPipe_CloudwatchLogsLogDestinationProperty{LogGroupArn: pipeLogs.LogGroupArn()},
		},
	})
	pipe.OverrideLogicalId(jsii.String(prefix + LogicalEventsPipe))

	return &DurableLane{
		Construct: c, Queue: queue, DLQ: dlq, PipeDLQ: pipeDLQ, Pipe: pipe, PipeRole: pipeRole, PipeLogs: pipeLogs,
		StreamFilter: streamFilter, DurableConsumer: consumer,
	}
}

// suppressIsDLQ answers AwsSolutions-SQS3 for a queue that is itself a
// dead-letter destination but not through an SQS redrive policy.
func suppressIsDLQ(q awssqs.Queue, why string) {
	cdknag.NagSuppressions_AddResourceSuppressions(q, &[]*cdknag.NagPackSuppression{{
		Id:     jsii.String("AwsSolutions-SQS3"),
		Reason: jsii.String(why + " A DLQ of a DLQ would only hide failures; the depth alarm pages instead."),
	}}, jsii.Bool(false))
}

// OnlyBackboneSends denies sqs:SendMessage (which also authorizes
// SendMessageBatch) on the DURABLE FIFO queue and its DLQ to every principal
// but the Pipe's role and the given senders (dlq-repair's role, which
// re-parks messages): an explicit Deny in each queue's resource policy,
// which no identity policy in the account can override. aws:PrincipalArn is
// the role's ARN for a request made with a session of the role; a request
// without it (a service principal acting on its own) does not match
// ArnNotEquals's list either, so it is denied too (IAM User Guide, "AWS
// global condition context keys", aws:PrincipalArn; "Condition operators":
// a negated operator is true when the key is absent). The queue's redrive
// to its DLQ is SQS's own move, not a SendMessage, so it is not affected.
// durable-consumer delivers only events it finds in the log as well
// (pkg/delivery, batch.go): the policy keeps forgeries out, the check keeps
// anything that still gets in from being delivered.
//
// The Pipe DLQ gets the same policy: only the Pipe (its dead-letter config
// sends with the Pipe's role) and the senders may put a message there, so a
// forged "failed batch" cannot send dlq-repair to a range of its choosing.
// durable-consumer's role may send to the DLQ alone: it dead-letters a
// poison message there.
func (l *DurableLane) OnlyBackboneSends(senders ...awsiam.IRole) {
	base := append([]awsiam.IRole{l.PipeRole}, senders...)
	onlyTheseSend(l.Queue, base...)
	onlyTheseSend(l.PipeDLQ, base...)
	onlyTheseSend(l.DLQ, append(slices.Clone(base), l.DurableConsumer.Role)...)
}

// onlyTheseSend denies sqs:SendMessage on q to every principal but the
// given roles (see DurableLane.OnlyBackboneSends for why this condition
// also refuses a request without a principal ARN). The queue's EnforceSSL
// statement denies any request without TLS beside it.
func onlyTheseSend(q awssqs.Queue, senders ...awsiam.IRole) {
	var arns []*string
	for _, r := range senders {
		arns = append(arns, r.RoleArn())
	}
	q.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlyTheBackboneSends"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("sqs:SendMessage"),
		Resources:  &[]*string{q.QueueArn()},
		Conditions: &map[string]interface{}{
			"ArnNotEquals": map[string]interface{}{"aws:PrincipalArn": arns},
		},
	}))
}
