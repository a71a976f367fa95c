package backbone

import (
	"context"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// These tests deploy an application of their own, a widget workshop, the way
// a team would: its modules declared as any application declares them, its
// tables and its own service in its own stack, and the backbone added with
// New.
//
//	widgets     writes the widgets table (the tracked entity WIDGET, with
//	            its stream) and emits widget.made, from the team's bench
//	            function (granted GrantEmit)
//	inspection  DURABLE: one inspection per widget event (its records in the
//	            backbone's state table, so it reads no table of its own)
//	listing     BEST_EFFORT: projects WIDGET changes into the listing table
//	            (LISTING_TABLE)
//
// The construct needs the declarations only; the handlers never run here.
const (
	widgetEntity    = "WIDGET"
	envWidgetsTable = "WIDGETS_TABLE"
	envListingTable = "LISTING_TABLE"
	typeWidgetMade  = "widget.made"
)

// Attributes of a widget item (the widgets table's keys and version).
const (
	attrWidgetTenant  = "tenant"
	attrWidgetID      = "widget_id"
	attrWidgetVersion = "version"
)

// widgetMadeV1 is widget.made schema version 1.
type widgetMadeV1 struct {
	WidgetID string `json:"widget_id"`
	Colour   string `json:"colour"`
}

var widgetsModule = catalog.Module[catalog.NoHandlers]{
	Name:  "widgets",
	Doc:   "Widget bench. Writes the widgets table and announces each widget made.",
	Emits: []catalog.EventType{{Name: typeWidgetMade, Doc: "A widget came off the bench.", Versions: []catalog.Version{catalog.V[widgetMadeV1](1)}}},
	Tracks: []catalog.Entity{{Name: widgetEntity, Doc: "One item per widget, versioned from 1.",
		TableEnv: envWidgetsTable, TenantAttr: attrWidgetTenant, IDAttr: attrWidgetID, VersionAttr: attrWidgetVersion}},
}

// inspector and lister are the handler receivers; the construct never runs
// them.
type (
	inspector struct{}
	lister    struct{}
)

func (inspector) inspect(context.Context, envelope.Envelope) error { return nil }
func (lister) apply(context.Context, envelope.Envelope) error      { return nil }

var inspectionModule = catalog.Module[inspector]{
	Name: "inspection",
	Doc:  "Quality inspection.",
	Subscribes: []catalog.Subscription[inspector]{
		{Name: "inspection.made", Types: "widget.*", Lane: catalog.Durable, Reads: []int{1},
			Doc: "One inspection per widget event.", Handler: inspector.inspect},
	},
}

var listingModule = catalog.Module[lister]{
	Name: "listing",
	Doc:  "Widget listing projection.",
	Subscribes: []catalog.Subscription[lister]{
		{Name: "listing.widgets", Types: "record.*." + widgetEntity, Lane: catalog.BestEffort, Reads: []int{catalog.ChangeSchemaVersion},
			Doc: "Apply widget writes and deletes by version.", Handler: lister.apply},
	},
}

// widgetApp is the workshop as the construct takes it.
var widgetApp = app.Application{
	Name: "widgets",
	Modules: []app.Module{
		{Spec: widgetsModule.Spec()},
		{Spec: inspectionModule.Spec(), Bind: func(app.Runtime) (app.Bound, error) {
			return app.Bound{Binding: inspectionModule.Bind(inspector{})}, nil
		}},
		{Spec: listingModule.Spec(), Env: []string{envListingTable}, Bind: func(app.Runtime) (app.Bound, error) {
			return app.Bound{Binding: listingModule.Bind(lister{})}, nil
		}},
	},
}

// widgetStack is the workshop's stack: its tables, its own service and the
// people who read and reconcile, and the backbone.
type widgetStack struct {
	awscdk.Stack
	*Backbone
	Widgets awsdynamodb.Table // WIDGET's table, with its stream
	Listing awsdynamodb.Table // the listing module's projection
	// Bench is the team's service: a plain Lambda function, as a team writes
	// one (CDK's default role, with AWS's basic execution managed policy),
	// that emits widget.made in the same transaction as its widget writes
	// (GrantEmit).
	Bench awslambda.Function
	// Auditor exports and verifies (GrantRead); Operator calls reconcile
	// (GrantReconcile).
	Auditor, Operator awsiam.Role
}

// newWidgetStack builds the workshop's stack as a team would: a plain stack,
// its own tables and service, and New with props' App, Tracked and Tables
// set to the workshop's. The backbone has the id UnprefixedID, as a stack
// deployed before New had ids keeps: the pinned logical IDs and output names
// below are those.
func newWidgetStack(scope constructs.Construct, id string, props *Props) *widgetStack {
	st := awscdk.NewStack(scope, jsii.String(id), &awscdk.StackProps{
		Description: jsii.String("fourlanes backbone tests: the widget workshop"),
	})
	table := func(id string, stream awsdynamodb.StreamViewType) awsdynamodb.Table {
		tp := &awsdynamodb.TableProps{
			PartitionKey:                     &awsdynamodb.Attribute{Name: jsii.String(attrWidgetTenant), Type: awsdynamodb.AttributeType_STRING},
			SortKey:                          &awsdynamodb.Attribute{Name: jsii.String(attrWidgetID), Type: awsdynamodb.AttributeType_STRING},
			BillingMode:                      awsdynamodb.BillingMode_PAY_PER_REQUEST,
			PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: jsii.Bool(true)},
			Encryption:                       awsdynamodb.TableEncryption_AWS_MANAGED,
			DeletionProtection:               jsii.Bool(true),
			RemovalPolicy:                    awscdk.RemovalPolicy_RETAIN,
		}
		if stream != "" {
			tp.Stream = stream
		}
		return awsdynamodb.NewTable(st, jsii.String(id), tp)
	}
	widgets := table("Widgets", awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES)
	listing := table("Listing", "")

	p := *props
	p.App = widgetApp
	p.Tracked = map[string]awsdynamodb.ITable{widgetEntity: widgets}
	p.Tables = map[string]awsdynamodb.ITable{envListingTable: listing}
	b := New(st, UnprefixedID, &p)

	bench := awslambda.NewFunction(st, jsii.String("Bench"), &awslambda.FunctionProps{
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(p.CodeRoot, keys.FnStreamFilter)), nil),
		Environment:  &map[string]*string{envWidgetsTable: widgets.TableName(), keys.EnvEventsTable: b.Log.Events.TableName()},
	})
	b.GrantEmit(bench)
	widgets.GrantReadData(bench)
	person := func(id string) awsiam.Role {
		return awsiam.NewRole(st, jsii.String(id), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
	}
	auditor, operator := person("Auditor"), person("Operator")
	b.GrantRead(auditor)
	b.GrantReconcile(operator)
	return &widgetStack{Stack: st, Backbone: b, Widgets: widgets, Listing: listing, Bench: bench, Auditor: auditor, Operator: operator}
}
