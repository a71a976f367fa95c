package backbone

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
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
	// Key, when set, encrypts both tables (a customer-managed key).
	Key awskms.IKey
	// LogicalIDPrefix begins the pinned logical IDs of the log's stateful
	// resources and of those of every construct built on it (New passes the
	// backbone's keys.BackbonePrefix): "" pins EventsTable, "Orders" pins
	// OrdersEventsTable.
	LogicalIDPrefix string
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
	// PutItem and ConditionCheckItem only inside TransactWriteItems, GetItem
	// and Query. It has no UpdateItem, DeleteItem, BatchWriteItem or PartiQL
	// action: the head moves by a conditional Put in the same transaction as
	// the events. New adds the tracked tables' transactional writes, so it
	// holds what Backbone.GrantEmit grants, for principals outside the CDK
	// app.
	EmitterPolicy awsiam.ManagedPolicy
	prefix        string
}

// LogicalIDPrefix is EventLogProps.LogicalIDPrefix: the constructs built on
// the log pin their logical IDs with it too.
func (l *EventLog) LogicalIDPrefix() string { return l.prefix }

// logDenied are the actions the events table's resource policy denies to
// every principal, whatever their identity policies allow: nothing in the
// stack needs them, and each could rewrite or destroy the log.
//
// PartiQLInsert cannot overwrite (an INSERT of an existing key fails), but it
// is denied too: it writes one row outside Emit's transaction, so it could
// plant a row above a tenant's head (blocking its next Emit) or one no chain
// links to. UpdateTimeToLive is denied because TTL would delete rows "by
// design"; the log has none.
//
// The table's own settings are the log's too: UpdateTable could turn its
// stream off (blinding the Pipe, tamper-watch and the notary: a rewrite
// leaves no record) or its deletion protection; UpdateContinuousBackups
// could turn point-in-time recovery off; DeleteResourcePolicy would take
// these denies away (AWS lets the account's root user call it anyway, "to
// make sure that you don't inadvertently lock yourself out": DynamoDB API
// Reference, DeleteResourcePolicy); ExportTableToPointInTime copies every
// tenant's events out of the account's reach. Each of these, wanted on
// purpose, is a change made by the root user (docs/operations.md, "Changing
// the events table"). What the policy cannot deny: PutResourcePolicy (the
// deploy puts the next version of this policy with it), RestoreTableTo
// PointInTime (it writes a new table, and is the recovery path) and
// ImportTable (it creates a new table; this policy is not on it).
var logDenied = []string{
	"dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem",
	"dynamodb:PartiQLInsert", "dynamodb:PartiQLUpdate", "dynamodb:PartiQLDelete",
	"dynamodb:DeleteTable", "dynamodb:UpdateTimeToLive",
	"dynamodb:UpdateTable", "dynamodb:UpdateContinuousBackups", "dynamodb:DeleteResourcePolicy",
	"dynamodb:ExportTableToPointInTime",
}

// transactionOnly is the condition that lets an action run only as part of
// TransactWriteItems. AWS: "Permissions for Put, Update, Delete, and Get
// actions are governed by the permissions used for the underlying PutItem,
// UpdateItem, DeleteItem, and GetItem operations", and the example "Allow only
// transactional operations" uses this condition
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html).
// A single-item PutItem carries no enclosing operation, so it is not allowed.
func transactionOnly() map[string]map[string]any {
	return map[string]map[string]any{
		"ForAnyValue:StringEquals": {"dynamodb:EnclosingOperation": []string{"TransactWriteItems"}},
	}
}

// LogResourcePolicy is the events table's resource policy: an explicit Deny
// of logDenied to every principal ("*"), which no Allow anywhere overrides.
// Its resource is "*" (this table): the table's own ARN would make the table
// depend on itself.
//
// What it cannot deny: PutItem, which Emit needs and which overwrites an
// existing row when its caller leaves out the condition. The emitter policy
// allows it only inside TransactWriteItems, which narrows who can but not
// what they can write; tamper-watch reports every such overwrite as it
// happens (pkg/tamper).
func LogResourcePolicy() awsiam.PolicyDocument {
	return awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &[]awsiam.PolicyStatement{
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("TheLogIsInsertOnly"),
			Effect:     awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
			Actions:    jsii.Strings(logDenied...),
			Resources:  jsii.Strings("*"),
		}),
	}})
}

// DeadLetterIndexArn is the ARN of the state table's dead-letter index
// (keys.IndexDeadTenants).
func (l *EventLog) DeadLetterIndexArn() *string {
	return awscdk.Fn_Join(jsii.String(""), &[]*string{l.State.TableArn(), jsii.String("/index/" + keys.IndexDeadTenants)})
}

// NewEventLog creates the events and state tables and the emitter policy.
func NewEventLog(scope constructs.Construct, id string, props *EventLogProps) *EventLog {
	c := constructs.NewConstruct(scope, jsii.String(id))
	removal := props.RemovalPolicy
	encryption, key := tableEncryption(props.Key)

	events := awsdynamodb.NewTable(c, jsii.String("Events"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String(keys.AttrTenant), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String(keys.AttrSeq), Type: awsdynamodb.AttributeType_NUMBER},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Stream:       awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		Encryption:         encryption,
		EncryptionKey:      key,
		DeletionProtection: jsii.Bool(true),
		ResourcePolicy:     LogResourcePolicy(),
		RemovalPolicy:      removal,
	})
	pin(events, props.LogicalIDPrefix, LogicalEventsTable)

	state := awsdynamodb.NewTable(c, jsii.String("State"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String(keys.AttrPK), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String(keys.AttrSK), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		// tamper-watch reads it for deletes of dead letters, claims and
		// watermarks (pkg/tamper InspectState).
		Stream:              awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
		TimeToLiveAttribute: jsii.String(keys.AttrExpiresAt),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		Encryption:         encryption,
		EncryptionKey:      key,
		DeletionProtection: jsii.Bool(true),
		RemovalPolicy:      removal,
	})
	pin(state, props.LogicalIDPrefix, LogicalStateTable)
	// The dead-letter index: sparse (dead-letter rows only) and keys only,
	// so that dlq-repair finds the tenants with dead letters without a
	// Scan of the state table.
	state.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(keys.IndexDeadTenants),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String(keys.AttrDeadIndex), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String(keys.AttrTenant), Type: awsdynamodb.AttributeType_STRING},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	})

	// The description stays as it is: CloudFormation replaces a managed
	// policy whose description changes, and a principal attached to it by
	// ARN would lose it.
	emitter := awsiam.NewManagedPolicy(c, jsii.String("EmitterPolicy"), &awsiam.ManagedPolicyProps{
		Description: jsii.String("fourlanes: append events to the log (Emit): Put and ConditionCheck only inside TransactWriteItems, GetItem, Query. No UpdateItem, DeleteItem, BatchWriteItem or PartiQL."),
		Statements:  statements(logEmitPermissions(events.TableArn())),
	})

	return &EventLog{Construct: c, Events: events, State: state, EmitterPolicy: emitter, prefix: props.LogicalIDPrefix}
}

// stateWriteActions are the state table's item writes.
var stateWriteActions = []string{
	"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem",
	"dynamodb:PartiQLInsert", "dynamodb:PartiQLUpdate", "dynamodb:PartiQLDelete",
}

// stateDenied are what the state table's resource policy denies to every
// principal: nothing in the stack needs them. UpdateTimeToLive could point
// TTL at an attribute every dead letter holds; the others as for the log
// (logDenied). UpdateTable is not denied: a deploy adds the stream
// tamper-watch reads with it, and a stream turned off stops tamper-watch's
// state mapping, which its Errors and IteratorAge alarms do not see;
// TamperWatchStateStopped alarms on exactly that.
var stateDenied = []string{
	"dynamodb:DeleteTable", "dynamodb:UpdateTimeToLive", "dynamodb:UpdateContinuousBackups",
	"dynamodb:DeleteResourcePolicy", "dynamodb:ExportTableToPointInTime",
}

// ProtectState puts the state table's resource policy: its item writes are
// denied to every principal but writers (the backbone's functions, and the
// roles a team names for `fourlanes effects -redo|-done`), whatever their
// identity policies allow; stateDenied is denied to all. Reads stay with IAM
// (GrantRead). New calls it once every writer exists.
func (l *EventLog) ProtectState(writers ...awsiam.IRole) {
	var arns []*string
	for _, r := range writers {
		arns = append(arns, r.RoleArn())
	}
	l.State.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlyTheBackboneWrites"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings(stateWriteActions...),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"ArnNotEquals": map[string]any{"aws:PrincipalArn": arns}},
	}))
	l.State.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("TheStateTableStays"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings(stateDenied...),
		Resources:  jsii.Strings("*"),
	}))
}

// ProtectNotaryRows denies every principal but the notary's role item
// writes on the notary's own rows of the state table (pk notary#<chain>):
// the last (seq, hash) per chain the notary extends and signs from. Any
// other writer of the state table (durable-consumer, changefeed,
// reconcile, dlq-repair, an operator) could otherwise move a chain's row
// to match a rewritten log, and the notary would sign the forgery's next
// append. The notary's own role is held to those rows by its LeadingKeys
// condition (notary.go).
func (l *EventLog) ProtectNotaryRows(notary awsiam.IRole) {
	l.State.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlyTheNotaryWritesItsRows"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings(stateWriteActions...),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{
			"ForAnyValue:StringLike": map[string]any{"dynamodb:LeadingKeys": []string{keys.StateNotaryPrefix + "*"}},
			"ArnNotEquals":           map[string]any{"aws:PrincipalArn": []*string{notary.RoleArn()}},
		},
	}))
}
