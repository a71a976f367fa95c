package backbone

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Stack output names: pkg/keys spells them, for the CLI that reads them.
const (
	OutputReconcileURL          = keys.OutputReconcileURL
	OutputReconcileCallerPolicy = keys.OutputReconcileCallerPolicy
	OutputEmitterPolicy         = keys.OutputEmitterPolicy
	OutputRepairFunction        = keys.OutputRepairFunction
	OutputEventsTable           = keys.OutputEventsTable
	OutputStateTable            = keys.OutputStateTable
	OutputOrdersTable           = "OrdersTableName" // the example's; no command reads it
	OutputDashboard             = keys.OutputDashboard
	OutputDurableDLQ            = keys.OutputDurableDLQ
	OutputPipeDLQ               = keys.OutputPipeDLQ
	OutputChangeFeedDLQ         = keys.OutputChangeFeedDLQ
	OutputAlarmTopic            = keys.OutputAlarmTopic
)

// Props configures the stack.
type Props struct {
	awscdk.StackProps
	// CodeRoot holds build/<function>/bootstrap (the app passes "build").
	CodeRoot string
	// AlarmEmail, when set, is subscribed to the stack's alarm topic.
	AlarmEmail string
	// ReserveConcurrency reserves 2 for reconcile and 1 for dlq-repair. An
	// account whose concurrency quota is still 10 cannot reserve any: set it
	// false there.
	ReserveConcurrency bool
	// RemovalPolicy of tables and queues; the zero value means RETAIN. Every
	// table has deletion protection (and the events table a resource policy
	// denying DeleteTable), so DESTROY deletes the queues only: turn
	// deletion protection off by hand first to delete a table.
	RemovalPolicy awscdk.RemovalPolicy
	// LogRetention of every function's and the Pipe's log group; zero means
	// one month.
	LogRetention awslogs.RetentionDays
	// DurableMaxConcurrency caps durable-consumer's concurrency from the
	// queue; zero means 10.
	DurableMaxConcurrency float64
}

// Stack is the whole fourlanes backbone.
type Stack struct {
	awscdk.Stack
	Log        *EventLog
	Durable    *DurableLane
	ChangeFeed *ChangeFeed
	Reconcile  *Reconcile
	Repair     *Repair
	Tamper     *TamperWatch
	Alarms     *Alarms
	Schedules  *Schedules
}

// NewStack composes the constructs.
func NewStack(scope constructs.Construct, id string, props *Props) *Stack {
	p := *props
	if p.RemovalPolicy == "" {
		p.RemovalPolicy = awscdk.RemovalPolicy_RETAIN
	}
	if p.LogRetention == "" {
		p.LogRetention = awslogs.RetentionDays_ONE_MONTH
	}
	if p.DurableMaxConcurrency == 0 {
		p.DurableMaxConcurrency = 10
	}
	sp := p.StackProps
	if sp.Description == nil {
		sp.Description = jsii.String("fourlanes: serverless event backbone (insert-only log, Pipe to FIFO, change feed, reconcile, repair)")
	}
	st := awscdk.NewStack(scope, jsii.String(id), &sp)
	s := &Stack{Stack: st}
	fo := FunctionOptions{CodeRoot: p.CodeRoot, LogRetention: p.LogRetention}
	var reconcileRC, repairRC *float64
	if p.ReserveConcurrency {
		reconcileRC, repairRC = jsii.Number(2), jsii.Number(1)
	}

	s.Log = NewEventLog(st, "EventLog", &EventLogProps{RemovalPolicy: p.RemovalPolicy})
	s.Durable = NewDurableLane(st, "Durable", &DurableLaneProps{
		Log: s.Log, Functions: fo, ConsumerMaxConcurrency: p.DurableMaxConcurrency, RemovalPolicy: p.RemovalPolicy,
	})
	s.ChangeFeed = NewChangeFeed(st, "ChangeFeed", &ChangeFeedProps{Log: s.Log, Functions: fo, RemovalPolicy: p.RemovalPolicy})
	s.Reconcile = NewReconcile(st, "Reconcile", &ReconcileProps{Log: s.Log, Functions: fo, ReservedConcurrency: reconcileRC})
	NewCheckpoints(st, "Checkpoints", &CheckpointsProps{Reconcile: s.Reconcile})
	s.Repair = NewRepair(st, "Repair", &RepairProps{
		Log: s.Log, Durable: s.Durable, ChangeFeed: s.ChangeFeed, Functions: fo, ReservedConcurrency: repairRC,
	})
	s.Durable.OnlyBackboneSends(s.Repair.Function.Role)
	s.Tamper = NewTamperWatch(st, "TamperWatch", &TamperWatchProps{Log: s.Log, Functions: fo})
	s.Alarms = NewAlarms(st, "Alarms", &AlarmsProps{
		Log: s.Log, Durable: s.Durable, ChangeFeed: s.ChangeFeed, Reconcile: s.Reconcile, Repair: s.Repair,
		TamperWatch: s.Tamper, AlarmEmail: p.AlarmEmail,
	})
	s.Schedules = NewSchedules(st, "Schedules", &SchedulesProps{Reconcile: s.Reconcile, Repair: s.Repair})

	out := func(name, description string, value *string) {
		awscdk.NewCfnOutput(st, jsii.String(name), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(description)})
	}
	out(OutputReconcileURL, "reconcile Function URL (AWS_IAM: sign requests with SigV4, service lambda)", s.Reconcile.URL.Url())
	out(OutputReconcileCallerPolicy, "Managed policy to attach to whoever calls the reconcile URL", s.Reconcile.CallerPolicy.ManagedPolicyArn())
	out(OutputEmitterPolicy, "Managed policy to attach to services that emit events", s.Log.EmitterPolicy.ManagedPolicyArn())
	out(OutputRepairFunction, "dlq-repair function name (invoke it to drain the dead-letter queues)", s.Repair.Function.Fn.FunctionName())
	out(OutputEventsTable, "Events table (the log)", s.Log.Events.TableName())
	out(OutputStateTable, "State table (claims, delivery watermarks, reconcile's rounds): fourlanes watermarks -state-table", s.Log.State.TableName())
	out(OutputOrdersTable, "Orders table (example tracked entity)", s.ChangeFeed.Orders.TableName())
	out(OutputDashboard, "CloudWatch dashboard", s.Alarms.Dashboard.DashboardName())
	out(OutputDurableDLQ, "DURABLE FIFO dead-letter queue", s.Durable.DLQ.QueueUrl())
	out(OutputPipeDLQ, "Pipe dead-letter queue (batch metadata)", s.Durable.PipeDLQ.QueueUrl())
	out(OutputChangeFeedDLQ, "Change-feed on-failure queue (batch metadata)", s.ChangeFeed.DLQ.QueueUrl())
	out(OutputAlarmTopic, "SNS topic every alarm notifies (ALARM and OK); subscribe people to it", s.Alarms.Topic.TopicArn())
	return s
}

// AddChecks applies cdk-nag's AwsSolutions pack to everything under scope;
// the app and the tests both call it, so they check the same thing.
func AddChecks(scope constructs.Construct) {
	awscdk.Aspects_Of(scope).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{
		Verbose: jsii.Bool(true),
	}), nil)
}
