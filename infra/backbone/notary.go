package backbone

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Pinned logical IDs of the notary's stateful resources: a replaced mapping
// would start again at TRIM_HORIZON (and, past the stream's 24 hours, see
// heads move from seqs it never saw: every chain an "unseen" finding).
const (
	LogicalNotaryESM = "NotaryMapping"
	LogicalNotaryDLQ = "NotaryDLQ"
)

// Notary mapping settings. The notary fails a batch only when it cannot
// read or write its own state or sign (a finding never fails it), so a
// failing batch is an outage of DynamoDB, KMS or S3: it retries long, then
// the batch's metadata goes to the on-failure queue, which alarms, and the
// notary reports the appends it did not see as "unseen" when it reads on.
const (
	notaryBatchSize     = 100
	notaryMaxRetries    = 10000
	notaryMaxRecordAgeS = 12 * 3600 // half the stream's 24 h retention: time left to read what it skipped
	// notaryLagThresholdMs: what the notary has not seen yet is not signed;
	// a minute behind for 3 minutes is a stuck notary.
	notaryLagThresholdMs = 60 * 1000
)

// NotaryProps wires the notary to the log.
type NotaryProps struct {
	Log           *EventLog
	Functions     FunctionOptions
	RemovalPolicy awscdk.RemovalPolicy
	// QueueKey, when set, encrypts the on-failure queue.
	QueueKey awskms.IKey
}

// Notary is the one signer of checkpoints (pkg/notary): a Lambda mapping on
// the events table's stream, unfiltered (every INSERT, MODIFY and REMOVE of
// the log). With the Pipe it is one of the stream's two readers per shard
// (DynamoDB allows two): it alone watches the log for changes no append
// makes. Its mapping has bisect on error, a retry limit, a maximum record age and an
// on-failure queue. It reads the events table (the head and the rows a batch
// leaves open), reads and writes its own rows of the state table, and
// (NewCheckpoints, given it) alone may sign with the checkpoint key and put
// checkpoint objects.
type Notary struct {
	constructs.Construct
	Function Function
	Mapping  awslambda.EventSourceMapping
	// DLQ is the mapping's on-failure destination: metadata of batches that
	// exhausted their retries or record age (standard queue).
	DLQ awssqs.Queue
}

// NewNotary creates the function, its mapping and its on-failure queue.
func NewNotary(scope constructs.Construct, id string, props *NotaryProps) *Notary {
	c := constructs.NewConstruct(scope, jsii.String(id))
	prefix := props.Log.LogicalIDPrefix()
	fn := newFunction(c, "Notary", props.Functions, functionSpec{
		name:        keys.FnNotary,
		description: "fourlanes notary: checks every append on the events stream and alone signs checkpoints of what it saw appended",
		timeout:     awscdk.Duration_Seconds(jsii.Number(60)),
		memoryMB:    256,
		integrity:   true, // its findings are evidence: one year by default
		env: map[string]*string{
			keys.EnvEventsTable: props.Log.Events.TableName(),
			keys.EnvStateTable:  props.Log.State.TableName(),
		},
	})
	allow(fn.Role, streamRead, props.Log.Events.TableStreamArn())
	listStreams(fn.Role)
	// The head and the rows a batch leaves open, strongly consistent.
	allow(fn.Role, []string{"dynamodb:GetItem", "dynamodb:Query"}, props.Log.Events.TableArn())
	// Its chain rows only (pk notary#<chain>): read, and a conditional put
	// (no update, no delete).
	fn.Role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("dynamodb:GetItem", "dynamodb:PutItem"),
		Resources: &[]*string{props.Log.State.TableArn()},
		Conditions: &map[string]interface{}{
			"ForAllValues:StringLike": map[string]interface{}{"dynamodb:LeadingKeys": []string{keys.StateNotaryPrefix + "*"}},
		},
	}))

	queueEnc, queueKey := queueEncryption(props.QueueKey)
	dlq := awssqs.NewQueue(c, jsii.String("DLQ"), &awssqs.QueueProps{
		Encryption:          queueEnc,
		EncryptionMasterKey: queueKey,
		EnforceSSL:          jsii.Bool(true),
		RetentionPeriod:     awscdk.Duration_Days(jsii.Number(14)),
		RemovalPolicy:       props.RemovalPolicy,
	})
	pin(dlq, prefix, LogicalNotaryDLQ)
	onlyTheseSend(dlq, fn.Role)
	suppressIsDLQ(dlq, "It is the notary mapping's on-failure destination: metadata of batches the notary could not apply; the notary then reports the appends it did not see.")

	mapping := awslambda.NewEventSourceMapping(c, jsii.String("Mapping"), &awslambda.EventSourceMappingProps{
		Target:             fn.Fn,
		EventSourceArn:     props.Log.Events.TableStreamArn(),
		StartingPosition:   awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:          jsii.Number(notaryBatchSize),
		BisectBatchOnError: jsii.Bool(true),
		RetryAttempts:      jsii.Number(notaryMaxRetries),
		MaxRecordAge:       awscdk.Duration_Seconds(jsii.Number(notaryMaxRecordAgeS)),
		// One reader per shard, in order: a chain's records are applied as
		// they were written.
		ParallelizationFactor: jsii.Number(1),
		OnFailure:             awslambdaeventsources.NewSqsDlq(dlq),
		// PolledEventCount: the NotaryStopped alarm.
		MetricsConfig: &awslambda.MetricsConfig{Metrics: &[]awslambda.MetricType{awslambda.MetricType_EVENT_COUNT}},
	})
	pin(mapping, prefix, LogicalNotaryESM)
	mapping.Node().AddDependency(fn.Role)
	return &Notary{Construct: c, Function: fn, Mapping: mapping, DLQ: dlq}
}

// notaryAlarm is one alarm NewAlarms creates for the notary.
type notaryAlarm struct {
	name, description string
	metric            awscloudwatch.IMetric
	threshold         float64
	periods           float64
	missing           awscloudwatch.TreatMissingData
}

// alarms are the notary's alarms: a finding, at once; its on-failure queue
// holding a batch; and a notary behind the stream.
func (n *Notary) alarms() []notaryAlarm {
	return []notaryAlarm{
		{"NotaryFinding",
			"The notary saw the log changed in a way no append makes, and signs nothing more of that chain (EMF NotaryFinding, by Finding: rewrite, removed, rollback, gap, link, planted, unseen, unreadable, row_changed, checkpoint_occupied). This is a data-integrity incident: the notary's ERROR line 'notary finding' names the chain, the seq and what it saw; call reconcile for the tenant (its 'findings' and 'notary' say the same), then follow docs/notary.md, 'Runbook: notary findings'.",
			emfQuery("SUM", keys.MetricNotaryFinding, minutes(1)), 1, 1, awscloudwatch.TreatMissingData_NOT_BREACHING},
		{"NotaryDLQDepth",
			"A batch of the events stream exhausted the notary's retries or record age (its on-failure queue holds the batch's metadata). The notary could not read or write its state or sign; what it skipped is not signed, and it reports those appends as 'unseen' when it reads on. Check the notary's errors (DynamoDB, KMS, S3), then docs/notary.md, 'Runbook: notary findings'.",
			visible(n.DLQ), 1, 1, awscloudwatch.TreatMissingData_NOT_BREACHING},
		{"NotaryDLQOldestMessage",
			"A batch's metadata has waited in the notary's on-failure queue for more than 6 hours: nobody has looked at why the notary could not apply it. Follow docs/notary.md, 'Runbook: notary findings' (an outage of the notary's state or signer), then delete the message: the records it names are not re-read (the notary reports the appends it missed as 'unseen').",
			oldestMessage(n.DLQ, minutes(5)), dlqAgeThresholdS, 1, awscloudwatch.TreatMissingData_NOT_BREACHING},
		{"NotaryIteratorAge",
			"The notary is more than a minute behind the events stream for 3 minutes: appends are not being checked or signed as they happen. Check the notary's errors; a failing batch holds its shard (bisected, retried) until its records are 12 hours old.",
			iteratorAge(n.Function), notaryLagThresholdMs, 3, awscloudwatch.TreatMissingData_NOT_BREACHING},
	}
}
