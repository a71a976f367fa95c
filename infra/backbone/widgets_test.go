package backbone

import (
	"context"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// These tests deploy an application of their own, a widget workshop, the way
// a team would: its modules declared as any application declares them, its
// tables in its own stack, and the backbone added with NewBackbone.
//
//	widgets     writes the widgets table (the tracked entity WIDGET, with
//	            its stream) and emits widget.made
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

// widgetStack is the workshop's stack: its tables and the backbone.
type widgetStack struct {
	awscdk.Stack
	*Backbone
	Widgets awsdynamodb.Table // WIDGET's table, with its stream
	Listing awsdynamodb.Table // the listing module's projection
}

// newWidgetStack builds the workshop's stack as a team would: a plain stack,
// its own tables, and NewBackbone with props' App, Tracked and Tables set to
// the workshop's.
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
	return &widgetStack{Stack: st, Backbone: NewBackbone(st, &p), Widgets: widgets, Listing: listing}
}
