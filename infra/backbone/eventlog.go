package backbone

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Pinned logical IDs of the EventLog's stateful resources.
const (
	LogicalEventsTable = "EventsTable"
	LogicalStateTable  = "StateTable"
)

// EventLogProps configures the EventLog.
type EventLogProps struct {
	// RemovalPolicy of both tables.
	RemovalPolicy awscdk.RemovalPolicy
}

// EventLog is the per-tenant, hash-chained, insert-only events table, the
// state table beside it (claims, dead letters, checkpoints, parked records:
// everything that is updated, so the log never is), and the managed policy
// that services attach to emit events.
type EventLog struct {
	constructs.Construct
	Events awsdynamodb.Table
	State  awsdynamodb.Table
	// EmitterPolicy grants exactly what Emit needs on the events table:
	// PutItem, ConditionCheckItem, GetItem and Query. It has no UpdateItem,
	// DeleteItem, BatchWriteItem or PartiQL action: the head moves by a
	// conditional PutItem.
	EmitterPolicy awsiam.ManagedPolicy
}

// NewEventLog creates the events and state tables and the emitter policy.
func NewEventLog(scope constructs.Construct, id string, props *EventLogProps) *EventLog {
	c := constructs.NewConstruct(scope, jsii.String(id))
	removal := props.RemovalPolicy

	events := awsdynamodb.NewTable(c, jsii.String("Events"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String(keys.AttrTenant), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String(keys.AttrSeq), Type: awsdynamodb.AttributeType_NUMBER},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Stream:       awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		Encryption:    awsdynamodb.TableEncryption_AWS_MANAGED,
		RemovalPolicy: removal,
	})
	pin(events, LogicalEventsTable)

	state := awsdynamodb.NewTable(c, jsii.String("State"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String(keys.AttrPK), Type: awsdynamodb.AttributeType_STRING},
		SortKey:             &awsdynamodb.Attribute{Name: jsii.String(keys.AttrSK), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String(keys.AttrExpiresAt),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		Encryption:    awsdynamodb.TableEncryption_AWS_MANAGED,
		RemovalPolicy: removal,
	})
	pin(state, LogicalStateTable)

	emitter := awsiam.NewManagedPolicy(c, jsii.String("EmitterPolicy"), &awsiam.ManagedPolicyProps{
		Description: jsii.String("fourlanes: append events to the log (Emit). Insert-only: no UpdateItem, DeleteItem, BatchWriteItem or PartiQL."),
		Statements:  &[]awsiam.PolicyStatement{statement(logAppend, events.TableArn())},
	})

	return &EventLog{Construct: c, Events: events, State: state, EmitterPolicy: emitter}
}
