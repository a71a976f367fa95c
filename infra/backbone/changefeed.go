package backbone

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Pinned logical IDs of the ChangeFeed's stateful resources. Each tracked
// entity's stream mapping is pinned too (LogicalChangeFeedESM + the entity's
// name, letters and digits only): a replaced mapping starts again at
// TRIM_HORIZON.
const (
	LogicalChangeFeedTable = "ChangeFeedTable"
	LogicalChangeFeedDLQ   = "ChangeFeedDLQ"
	LogicalChangeFeedESM   = "ChangeFeedMapping"
)

// Change-feed mapping settings.
const (
	changefeedBatchSize     = 100
	changefeedMaxRetries    = 10
	changefeedMaxRecordAgeS = 6 * 3600 // well under the stream's 24 h retention
)

// ChangeFeedProps wires the change feed to the state table.
type ChangeFeedProps struct {
	Log           *EventLog
	Functions     FunctionOptions
	RemovalPolicy awscdk.RemovalPolicy
	// TableKey and QueueKey, when set, encrypt the change-feed table and the
	// on-failure queue (customer-managed keys).
	TableKey, QueueKey awskms.IKey
}

// ChangeFeed is the BEST_EFFORT lane: each tracked entity's table streams
// into changefeed (Track), which writes record.written.<ENTITY> /
// record.deleted.<ENTITY> rows to the TTL'd change-feed table and runs the
// application's BEST_EFFORT subscriptions.
type ChangeFeed struct {
	constructs.Construct
	ChangeFeed awsdynamodb.Table
	// DLQ is the mappings' on-failure destination: metadata about batches
	// that exhausted their retries (standard queue; FIFO is not allowed).
	DLQ        awssqs.Queue
	Changefeed Function
	// Mappings holds each tracked entity's stream mapping, by entity name.
	Mappings map[string]awslambda.EventSourceMapping
	// Tables holds each tracked entity's table, by entity name.
	Tables map[string]awsdynamodb.ITable
	prefix string
}

// NewChangeFeed creates the change-feed table, the function and its
// on-failure queue; Track maps a tracked entity's stream to it.
func NewChangeFeed(scope constructs.Construct, id string, props *ChangeFeedProps) *ChangeFeed {
	c := constructs.NewConstruct(scope, jsii.String(id))
	removal := props.RemovalPolicy
	tableEnc, tableKey := tableEncryption(props.TableKey)
	queueEnc, queueKey := queueEncryption(props.QueueKey)
	prefix := props.Log.LogicalIDPrefix()

	feed := awsdynamodb.NewTable(c, jsii.String("ChangeFeed"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String(keys.AttrPK), Type: awsdynamodb.AttributeType_STRING},
		SortKey:             &awsdynamodb.Attribute{Name: jsii.String(keys.AttrSK), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String(keys.AttrExpiresAt),
		Encryption:          tableEnc,
		EncryptionKey:       tableKey,
		DeletionProtection:  jsii.Bool(true),
		RemovalPolicy:       removal,
	})
	pin(feed, prefix, LogicalChangeFeedTable)
	cdknag.NagSuppressions_AddResourceSuppressions(feed, &[]*cdknag.NagPackSuppression{{
		Id:     jsii.String("AwsSolutions-DDB3"),
		Reason: jsii.String("Change-feed rows expire by TTL and are derived from the tracked tables' streams; those tables, their source, are the application's (and should have point-in-time recovery)."),
	}}, jsii.Bool(false))

	dlq := awssqs.NewQueue(c, jsii.String("DLQ"), &awssqs.QueueProps{
		Encryption:          queueEnc,
		EncryptionMasterKey: queueKey,
		EnforceSSL:          jsii.Bool(true),
		RetentionPeriod:     awscdk.Duration_Days(jsii.Number(14)),
		RemovalPolicy:       removal,
	})
	pin(dlq, prefix, LogicalChangeFeedDLQ)
	suppressIsDLQ(dlq, "It is the changefeed mappings' on-failure destination: it receives metadata of batches that exhausted their retries; dlq-repair drains it.")

	fn := newFunction(c, "Changefeed", props.Functions, functionSpec{
		name:        keys.FnChangefeed,
		description: "fourlanes BEST_EFFORT lane: tracked-entity changes to change events and projections",
		timeout:     awscdk.Duration_Seconds(jsii.Number(60)),
		memoryMB:    256,
		env: map[string]*string{
			keys.EnvChangeFeedTable: feed.TableName(),
			keys.EnvStateTable:      props.Log.State.TableName(),
		},
	})
	allow(fn.Role, tableWrite, feed.TableArn())
	allow(fn.Role, concat(tableRead, tableWrite), props.Log.State.TableArn())
	listStreams(fn.Role)

	return &ChangeFeed{Construct: c, ChangeFeed: feed, DLQ: dlq, Changefeed: fn, Mappings: map[string]awslambda.EventSourceMapping{}, Tables: map[string]awsdynamodb.ITable{}, prefix: prefix}
}

// Track maps a tracked entity's table stream to changefeed: the function
// gets the table's name under the entity's TableEnv, reads the table and its
// stream, and the mapping is pinned as LogicalChangeFeedESM + the entity's
// name (after the log's prefix). The table must have a stream (New checks).
func (c *ChangeFeed) Track(e catalog.Entity, table awsdynamodb.ITable) awslambda.EventSourceMapping {
	fn := c.Changefeed
	fn.Fn.AddEnvironment(jsii.String(e.TableEnv), table.TableName(), nil)
	allow(fn.Role, tableRead, table.TableArn())
	allow(fn.Role, streamRead, table.TableStreamArn())

	mapping := awslambda.NewEventSourceMapping(c.Construct, jsii.String("Mapping"+alnum(e.Name)), &awslambda.EventSourceMappingProps{
		Target:                  fn.Fn,
		EventSourceArn:          table.TableStreamArn(),
		StartingPosition:        awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:               jsii.Number(changefeedBatchSize),
		BisectBatchOnError:      jsii.Bool(true),
		RetryAttempts:           jsii.Number(changefeedMaxRetries),
		MaxRecordAge:            awscdk.Duration_Seconds(jsii.Number(changefeedMaxRecordAgeS)),
		ReportBatchItemFailures: jsii.Bool(true),
		ParallelizationFactor:   jsii.Number(1),
		OnFailure:               awslambdaeventsources.NewSqsDlq(c.DLQ),
		// The mapping's own polled count (PolledEventCount) is what tells a
		// stopped mapping from an idle table (ChangeFeedStopped alarms).
		MetricsConfig: &awslambda.MetricsConfig{Metrics: &[]awslambda.MetricType{awslambda.MetricType_EVENT_COUNT}},
	})
	pin(mapping, c.prefix, LogicalChangeFeedESM+alnum(e.Name))
	// The mapping is created only once the role may read the stream.
	mapping.Node().AddDependency(fn.Role)
	c.Mappings[e.Name] = mapping
	c.Tables[e.Name] = table
	return mapping
}

// alnum keeps the letters and digits of s (logical IDs allow no others).
func alnum(s string) string {
	return strings.Map(func(r rune) rune {
		if ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return -1
	}, s)
}

// OnlyBackboneSends denies sqs:SendMessage on the on-failure queue to every
// principal but changefeed's role (a mapping's on-failure destination is
// sent to with the function's execution role) and the given senders
// (dlq-repair's role, which re-parks what it cannot fix).
func (c *ChangeFeed) OnlyBackboneSends(senders ...awsiam.IRole) {
	onlyTheseSend(c.DLQ, append([]awsiam.IRole{c.Changefeed.Role}, senders...)...)
}
