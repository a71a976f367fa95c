package backbone

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Pinned logical IDs of the ChangeFeed's stateful resources. The stream
// mapping is pinned too: a replaced mapping starts again at TRIM_HORIZON.
const (
	LogicalOrdersTable     = "OrdersTable"
	LogicalChangeFeedTable = "ChangeFeedTable"
	LogicalSearchTable     = "SearchTable"
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
}

// ChangeFeed is the BEST_EFFORT lane: the orders table (the example tracked
// entity) streams into changefeed, which writes record.written.ORDER /
// record.deleted.ORDER rows to the TTL'd change-feed table and applies the
// search projection by version.
type ChangeFeed struct {
	constructs.Construct
	Orders     awsdynamodb.Table
	ChangeFeed awsdynamodb.Table
	Search     awsdynamodb.Table
	// DLQ is the mapping's on-failure destination: metadata about batches
	// that exhausted their retries (standard queue; FIFO is not allowed).
	DLQ        awssqs.Queue
	Changefeed Function
	Mapping    awslambda.EventSourceMapping
}

// NewChangeFeed creates the tables, the function and its stream mapping.
func NewChangeFeed(scope constructs.Construct, id string, props *ChangeFeedProps) *ChangeFeed {
	c := constructs.NewConstruct(scope, jsii.String(id))
	removal := props.RemovalPolicy
	pitr := &awsdynamodb.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: jsii.Bool(true)}

	orders := awsdynamodb.NewTable(c, jsii.String("Orders"), &awsdynamodb.TableProps{
		PartitionKey:                     &awsdynamodb.Attribute{Name: jsii.String(keys.AttrOrderTenant), Type: awsdynamodb.AttributeType_STRING},
		SortKey:                          &awsdynamodb.Attribute{Name: jsii.String(keys.AttrOrderID), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:                      awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Stream:                           awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
		PointInTimeRecoverySpecification: pitr,
		Encryption:                       awsdynamodb.TableEncryption_AWS_MANAGED,
		DeletionProtection:               jsii.Bool(true),
		RemovalPolicy:                    removal,
	})
	pin(orders, LogicalOrdersTable)

	feed := awsdynamodb.NewTable(c, jsii.String("ChangeFeed"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String(keys.AttrPK), Type: awsdynamodb.AttributeType_STRING},
		SortKey:             &awsdynamodb.Attribute{Name: jsii.String(keys.AttrSK), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String(keys.AttrExpiresAt),
		Encryption:          awsdynamodb.TableEncryption_AWS_MANAGED,
		DeletionProtection:  jsii.Bool(true),
		RemovalPolicy:       removal,
	})
	pin(feed, LogicalChangeFeedTable)
	cdknag.NagSuppressions_AddResourceSuppressions(feed, &[]*cdknag.NagPackSuppression{{
		Id:     jsii.String("AwsSolutions-DDB3"),
		Reason: jsii.String("Change-feed rows expire by TTL and are derived from the orders stream; the orders table, their source, has point-in-time recovery."),
	}}, jsii.Bool(false))

	search := awsdynamodb.NewTable(c, jsii.String("Search"), &awsdynamodb.TableProps{
		PartitionKey:       &awsdynamodb.Attribute{Name: jsii.String(keys.AttrPK), Type: awsdynamodb.AttributeType_STRING},
		SortKey:            &awsdynamodb.Attribute{Name: jsii.String(keys.AttrSK), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:        awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Encryption:         awsdynamodb.TableEncryption_AWS_MANAGED,
		DeletionProtection: jsii.Bool(true),
		RemovalPolicy:      removal,
	})
	pin(search, LogicalSearchTable)
	cdknag.NagSuppressions_AddResourceSuppressions(search, &[]*cdknag.NagPackSuppression{{
		Id:     jsii.String("AwsSolutions-DDB3"),
		Reason: jsii.String("The search table is a projection, rebuilt from the orders table (which has point-in-time recovery) by re-applying versions."),
	}}, jsii.Bool(false))

	dlq := awssqs.NewQueue(c, jsii.String("DLQ"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
		RemovalPolicy:   removal,
	})
	pin(dlq, LogicalChangeFeedDLQ)
	suppressIsDLQ(dlq, "It is the changefeed mapping's on-failure destination: it receives metadata of batches that exhausted their retries; dlq-repair drains it.")

	fn := newFunction(c, "Changefeed", props.Functions, functionSpec{
		name:        keys.FnChangefeed,
		description: "fourlanes BEST_EFFORT lane: tracked-entity changes to change events and projections",
		timeout:     awscdk.Duration_Seconds(jsii.Number(60)),
		memoryMB:    256,
		env: map[string]*string{
			keys.EnvChangeFeedTable: feed.TableName(),
			keys.EnvSearchTable:     search.TableName(),
			keys.EnvStateTable:      props.Log.State.TableName(),
			keys.EnvOrdersTable:     orders.TableName(),
		},
	})
	allow(fn.Role, tableWrite, feed.TableArn())
	allow(fn.Role, concat(tableRead, tableWrite), search.TableArn())
	allow(fn.Role, concat(tableRead, tableWrite), props.Log.State.TableArn())
	allow(fn.Role, tableRead, orders.TableArn())
	allow(fn.Role, streamRead, orders.TableStreamArn())
	listStreams(fn.Role)

	mapping := awslambda.NewEventSourceMapping(c, jsii.String("Mapping"), &awslambda.EventSourceMappingProps{
		Target:                  fn.Fn,
		EventSourceArn:          orders.TableStreamArn(),
		StartingPosition:        awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:               jsii.Number(changefeedBatchSize),
		BisectBatchOnError:      jsii.Bool(true),
		RetryAttempts:           jsii.Number(changefeedMaxRetries),
		MaxRecordAge:            awscdk.Duration_Seconds(jsii.Number(changefeedMaxRecordAgeS)),
		ReportBatchItemFailures: jsii.Bool(true),
		ParallelizationFactor:   jsii.Number(1),
		OnFailure:               awslambdaeventsources.NewSqsDlq(dlq),
	})
	pin(mapping, LogicalChangeFeedESM)
	// The mapping is created only once the role may read the stream.
	mapping.Node().AddDependency(fn.Role)

	return &ChangeFeed{Construct: c, Orders: orders, ChangeFeed: feed, Search: search, DLQ: dlq, Changefeed: fn, Mapping: mapping}
}
