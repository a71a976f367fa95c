// Package stack is the orders example's CDK stack: its tables (orders, the
// tracked ORDER entity with its stream; search, the search module's
// projection) and the backbone (infra/backbone) running example.App.
package stack

import (
	"cmp"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/examples/orders/notifications"
	ordersmod "github.com/fourlanes/fourlanes/examples/orders/orders"
	searchmod "github.com/fourlanes/fourlanes/examples/orders/search"
	"github.com/fourlanes/fourlanes/infra/backbone"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Pinned logical IDs of the example's tables, and of its ORDER mapping
// (created before the mappings were per entity): an existing deployment must
// keep them.
const (
	LogicalOrdersTable = "OrdersTable"
	LogicalSearchTable = "SearchTable"
	logicalOrderESM    = backbone.LogicalChangeFeedESM
)

// OutputOrdersTable is the example's tracked table; no command reads it.
const OutputOrdersTable = "OrdersTableName"

// Stack is the example application's stack: its tables and the backbone.
type Stack struct {
	awscdk.Stack
	Backbone *backbone.Backbone
	Orders   awsdynamodb.Table
	Search   awsdynamodb.Table
}

// Props configures the example's stack: the stack's own props, and the
// backbone's (its App, Tracked and Tables are the example's; the rest is
// passed on).
type Props struct {
	awscdk.StackProps
	Backbone backbone.Props
	// NotificationsEmail is paged for the order email's dead letters (the
	// catalog's owner notifications.Owner), beside the stack's topic, when
	// Backbone.Owners does not name the owner. Empty: the stack's
	// Backbone.AlarmEmail, the same on-call; with neither, the synthesis
	// fails naming the owner unless Backbone.NoAlarmDestination says why
	// no one is paged.
	NotificationsEmail string
}

// NewStack creates the example's stack: the orders table (the tracked ORDER
// entity, with its stream), the search table (the search module's
// projection) and the backbone running example.App.
//
// The backbone's id is backbone.UnprefixedID: this is the reference
// deployment, whose stack existed before the backbone was a construct, and
// that id keeps every logical ID and output name it had.
func NewStack(scope constructs.Construct, id string, props *Props) *Stack {
	sp := props.StackProps
	if sp.Description == nil {
		sp.Description = jsii.String("fourlanes: serverless event backbone (insert-only log, Pipe to FIFO, change feed, reconcile, repair)")
	}
	st := awscdk.NewStack(scope, jsii.String(id), &sp)
	p := props.Backbone
	// The whole stack is the application's: its tables carry the tag too.
	awscdk.Tags_Of(st).Add(jsii.String("app"), jsii.String(example.App.Name), nil)
	removal := p.RemovalPolicy
	if removal == "" {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	tables := constructs.NewConstruct(st, jsii.String("Example"))
	orders := awsdynamodb.NewTable(tables, jsii.String("Orders"), &awsdynamodb.TableProps{
		PartitionKey:                     &awsdynamodb.Attribute{Name: jsii.String(ordersmod.AttrTenant), Type: awsdynamodb.AttributeType_STRING},
		SortKey:                          &awsdynamodb.Attribute{Name: jsii.String(ordersmod.AttrID), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:                      awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Stream:                           awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: jsii.Bool(true)},
		Encryption:                       awsdynamodb.TableEncryption_AWS_MANAGED,
		DeletionProtection:               jsii.Bool(true),
		RemovalPolicy:                    removal,
	})
	pin(orders, LogicalOrdersTable)
	search := awsdynamodb.NewTable(tables, jsii.String("Search"), &awsdynamodb.TableProps{
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

	p.App = example.App
	if _, named := p.Owners[notifications.Owner]; !named {
		owners := map[string]backbone.OwnerDestination{}
		for k, v := range p.Owners {
			owners[k] = v
		}
		if email := cmp.Or(props.NotificationsEmail, p.AlarmEmail); email != "" {
			owners[notifications.Owner] = backbone.OwnerDestination{Email: email}
		}
		p.Owners = owners
	}
	p.Tracked = map[string]awsdynamodb.ITable{ordersmod.Entity: orders}
	p.Tables = map[string]awsdynamodb.ITable{searchmod.EnvTable: search}
	b := backbone.New(st, backbone.UnprefixedID, &p)
	if m, ok := b.ChangeFeed.Mappings[ordersmod.Entity]; ok {
		pin(m, logicalOrderESM)
	}
	awscdk.NewCfnOutput(st, jsii.String(OutputOrdersTable), &awscdk.CfnOutputProps{
		Value: orders.TableName(), Description: jsii.String("Orders table (example tracked entity)"),
	})
	return &Stack{Stack: st, Backbone: b, Orders: orders, Search: search}
}

// pin gives c's resource a fixed logical ID: a stateful resource that an
// existing deployment has must keep its ID, or CloudFormation replaces it.
func pin(c constructs.Construct, logicalID string) {
	c.Node().DefaultChild().(awscdk.CfnResource).OverrideLogicalId(jsii.String(logicalID))
}
