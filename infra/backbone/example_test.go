package backbone

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// A team's stack: its own table (the tracked entity's, with the stream the
// change feed reads), its own service, and the backbone beside them. The
// service emits in the same transaction as its writes (GrantEmit), the
// on-call role calls reconcile (GrantReconcile), and the team alarms on
// the change feed's lag (MetricIteratorAge).
func ExampleNew() {
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Workshop"), nil)

	widgets := awsdynamodb.NewTable(stack, jsii.String("Widgets"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("tenant"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String("widget_id"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Stream:       awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
	})
	listing := awsdynamodb.NewTable(stack, jsii.String("Listing"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
	})
	b := New(stack, "Workshop", &Props{
		App:      widgetApp,
		Tracked:  map[string]awsdynamodb.ITable{"WIDGET": widgets},
		Tables:   map[string]awsdynamodb.ITable{"LISTING_TABLE": listing},
		CodeRoot: "build",
		// Every alarm notifies a topic the backbone creates, with this
		// address subscribed (AlarmTopic names a team's own topic instead).
		AlarmEmail: "oncall@example.com",
	})

	bench := awslambda.NewFunction(stack, jsii.String("Bench"), &awslambda.FunctionProps{
		Runtime: awslambda.Runtime_PROVIDED_AL2023(),
		Handler: jsii.String("bootstrap"),
		Code:    awslambda.Code_FromAsset(jsii.String("build/bench"), nil),
	})
	b.GrantEmit(bench)
	widgets.GrantReadData(bench)

	onCall := awsiam.NewRole(stack, jsii.String("OnCall"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
	b.GrantReconcile(onCall)
	b.GrantRead(onCall)

	awscloudwatch.NewAlarm(stack, jsii.String("ListingLag"), &awscloudwatch.AlarmProps{
		Metric:            b.MetricIteratorAge(nil),
		Threshold:         jsii.Number(60_000),
		EvaluationPeriods: jsii.Number(3),
	})
	app.Synth(nil)
}
