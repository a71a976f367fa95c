package backbone

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
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
	OutputDashboard             = keys.OutputDashboard
	OutputDurableDLQ            = keys.OutputDurableDLQ
	OutputPipeDLQ               = keys.OutputPipeDLQ
	OutputChangeFeedDLQ         = keys.OutputChangeFeedDLQ
	OutputAlarmTopic            = keys.OutputAlarmTopic
)

// Props configures the backbone.
type Props struct {
	// StackProps are the stack's, when an application's stack function (the
	// example's stack.NewStack) creates it; NewBackbone ignores them.
	awscdk.StackProps
	// App is the application the backbone runs: its modules decide which
	// tables each function reads and which streams feed changefeed.
	App app.Application
	// Tracked holds each tracked entity's table (the application's own), by
	// entity name (catalog.Entity.Name). Each must have a stream with
	// NEW_AND_OLD_IMAGES.
	Tracked map[string]awsdynamodb.ITable
	// Tables holds the table of each environment variable the application's
	// modules read (App.Env), by variable name. A variable that names a
	// tracked entity's table (its TableEnv) may be left out.
	Tables map[string]awsdynamodb.ITable
	// Tags are added to every resource of the stack (Tags.Of); nil means
	// app=<App.Name>.
	Tags map[string]string
	// CodeRoot holds build/<function>/bootstrap (the app passes "build").
	CodeRoot string
	// AlarmEmail, when set, is subscribed to the stack's alarm topic.
	AlarmEmail string
	// ReserveConcurrency reserves 2 for reconcile and 1 for dlq-repair. An
	// account whose concurrency quota is still 10 cannot reserve any: set it
	// false there.
	ReserveConcurrency bool
	// PerPairClaimsGone tells durable-consumer and dlq-repair that no per-pair
	// claim of the layout before the per-event claim item can come back, so
	// a prefetch reads one item per event instead of 1 + N
	// (keys.EnvPerPairClaims; pkg/delivery WithoutPerPairClaims). Set it 28
	// days after upgrading a stack deployed before that layout (a FIFO queue
	// keeps a message 14 days, its DLQ 14 more), and never after rolling back
	// to a version that writes per-pair claims; a new stack may set it at once.
	PerPairClaimsGone bool
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

// Backbone is the whole fourlanes backbone, running one application.
type Backbone struct {
	Log        *EventLog
	Durable    *DurableLane
	ChangeFeed *ChangeFeed
	Reconcile  *Reconcile
	Repair     *Repair
	Tamper     *TamperWatch
	Alarms     *Alarms
	Schedules  *Schedules
}

// NewBackbone adds the backbone to scope (a team's own stack, say), wired to
// props.App: a stream mapping on each tracked table, and on each function
// that runs a lane the environment of the modules bound there, with read and
// write on their tables. What props lack (a tracked table, a stream, an
// environment variable's table) fails the synthesis with an error that says
// what to give.
func NewBackbone(scope constructs.Construct, props *Props) *Backbone {
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
	tags := p.Tags
	if tags == nil {
		tags = map[string]string{"app": p.App.Name}
	}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		awscdk.Tags_Of(awscdk.Stack_Of(scope)).Add(jsii.String(k), jsii.String(tags[k]), nil)
	}
	w := resolve(&p)
	for _, err := range w.errs {
		awscdk.Annotations_Of(scope).AddError(jsii.String(err.Error()))
	}

	s := &Backbone{}
	fo := FunctionOptions{CodeRoot: p.CodeRoot, LogRetention: p.LogRetention}
	var reconcileRC, repairRC *float64
	if p.ReserveConcurrency {
		reconcileRC, repairRC = jsii.Number(2), jsii.Number(1)
	}

	s.Log = NewEventLog(scope, "EventLog", &EventLogProps{RemovalPolicy: p.RemovalPolicy})
	s.Durable = NewDurableLane(scope, "Durable", &DurableLaneProps{
		Log: s.Log, Functions: fo, ConsumerMaxConcurrency: p.DurableMaxConcurrency, RemovalPolicy: p.RemovalPolicy,
	})
	s.ChangeFeed = NewChangeFeed(scope, "ChangeFeed", &ChangeFeedProps{Log: s.Log, Functions: fo, RemovalPolicy: p.RemovalPolicy})
	s.Reconcile = NewReconcile(scope, "Reconcile", &ReconcileProps{Log: s.Log, Functions: fo, ReservedConcurrency: reconcileRC})
	NewCheckpoints(scope, "Checkpoints", &CheckpointsProps{Reconcile: s.Reconcile})
	s.Repair = NewRepair(scope, "Repair", &RepairProps{
		Log: s.Log, Durable: s.Durable, ChangeFeed: s.ChangeFeed, Functions: fo, ReservedConcurrency: repairRC,
	})
	s.Durable.OnlyBackboneSends(s.Repair.Function.Role)
	s.Tamper = NewTamperWatch(scope, "TamperWatch", &TamperWatchProps{Log: s.Log, Functions: fo})

	for _, t := range w.tracked {
		s.ChangeFeed.Track(t.entity, t.table)
		s.Repair.Track(t.entity, t.table)
	}
	if p.PerPairClaimsGone {
		for _, f := range []Function{s.Durable.DurableConsumer, s.Repair.Function} {
			f.Fn.AddEnvironment(jsii.String(keys.EnvPerPairClaims), jsii.String(keys.PerPairClaimsGone), nil)
		}
	}
	useTables(s.Durable.DurableConsumer, w.env[catalog.Durable])
	useTables(s.ChangeFeed.Changefeed, w.env[catalog.BestEffort])
	useTables(s.Repair.Function, w.env[catalog.Durable], w.env[catalog.BestEffort])

	s.Alarms = NewAlarms(scope, "Alarms", &AlarmsProps{
		Log: s.Log, Durable: s.Durable, ChangeFeed: s.ChangeFeed, Reconcile: s.Reconcile, Repair: s.Repair,
		TamperWatch: s.Tamper, AlarmEmail: p.AlarmEmail, TrackedStreams: w.streams(p.App.Name),
	})
	s.Schedules = NewSchedules(scope, "Schedules", &SchedulesProps{Reconcile: s.Reconcile, Repair: s.Repair})

	out := func(name, description string, value *string) {
		awscdk.NewCfnOutput(scope, jsii.String(name), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(description)})
	}
	out(OutputReconcileURL, "reconcile Function URL (AWS_IAM: sign requests with SigV4, service lambda)", s.Reconcile.URL.Url())
	out(OutputReconcileCallerPolicy, "Managed policy to attach to whoever calls the reconcile URL", s.Reconcile.CallerPolicy.ManagedPolicyArn())
	out(OutputEmitterPolicy, "Managed policy to attach to services that emit events", s.Log.EmitterPolicy.ManagedPolicyArn())
	out(OutputRepairFunction, "dlq-repair function name (invoke it to drain the dead-letter queues)", s.Repair.Function.Fn.FunctionName())
	out(OutputEventsTable, "Events table (the log)", s.Log.Events.TableName())
	out(OutputStateTable, "State table (claims, delivery watermarks, reconcile's rounds): fourlanes watermarks -state-table", s.Log.State.TableName())
	out(OutputDashboard, "CloudWatch dashboard", s.Alarms.Dashboard.DashboardName())
	out(OutputDurableDLQ, "DURABLE FIFO dead-letter queue", s.Durable.DLQ.QueueUrl())
	out(OutputPipeDLQ, "Pipe dead-letter queue (batch metadata)", s.Durable.PipeDLQ.QueueUrl())
	out(OutputChangeFeedDLQ, "Change-feed on-failure queue (batch metadata)", s.ChangeFeed.DLQ.QueueUrl())
	out(OutputAlarmTopic, "SNS topic every alarm notifies (ALARM and OK); subscribe people to it", s.Alarms.Topic.TopicArn())
	return s
}

// useTables gives fn each table under its environment variable, with read
// and write on it: the handlers bound in fn keep their own state there.
func useTables(fn Function, envs ...map[string]awsdynamodb.ITable) {
	for _, env := range envs {
		for _, name := range slices.Sorted(maps.Keys(env)) {
			t := env[name]
			fn.Fn.AddEnvironment(jsii.String(name), t.TableName(), nil)
			allow(fn.Role, concat(tableRead, tableWrite), t.TableArn())
		}
	}
}

// trackedTable is a tracked entity and its table.
type trackedTable struct {
	entity catalog.Entity
	table  awsdynamodb.ITable
}

// wiring is what the backbone takes from props.App and its tables.
type wiring struct {
	tracked []trackedTable
	// env holds, per lane, the table of each variable its modules read.
	env  map[catalog.Lane]map[string]awsdynamodb.ITable
	errs []error
}

// streams names the tracked streams for the alarms' descriptions.
func (w wiring) streams(appName string) string {
	var names []string
	for _, t := range w.tracked {
		names = append(names, t.entity.Name)
	}
	return fmt.Sprintf("the %s application's tracked streams (%s)", appName, strings.Join(names, ", "))
}

// resolve matches the application's tracked entities and environment to
// props' tables; each error says what to give.
func resolve(p *Props) wiring {
	w := wiring{env: map[catalog.Lane]map[string]awsdynamodb.ITable{}}
	fail := func(format string, a ...any) { w.errs = append(w.errs, fmt.Errorf("backbone: "+format, a...)) }
	if err := p.App.Validate(); err != nil {
		fail("%v", err)
	}
	cat, err := p.App.Catalog()
	if err != nil {
		return w
	}
	byEnv := map[string]awsdynamodb.ITable{}
	for _, e := range cat.Entities() {
		t, ok := p.Tracked[e.Name]
		switch {
		case !ok || t == nil:
			fail("application %s tracks entity %s: give its table (with a NEW_AND_OLD_IMAGES stream) in Props.Tracked[%q]", p.App.Name, e.Name, e.Name)
			continue
		case t.TableStreamArn() == nil:
			fail("tracked entity %s: its table has no stream, and the change feed reads it: create the table with Stream: NEW_AND_OLD_IMAGES (or import it with TableStreamArn)", e.Name)
			continue
		}
		if view, known := streamView(t); known && view != awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES {
			fail("tracked entity %s: its table's stream has view %s; the change feed needs both images: set Stream: NEW_AND_OLD_IMAGES", e.Name, view)
			continue
		}
		w.tracked = append(w.tracked, trackedTable{entity: e, table: t})
		byEnv[e.TableEnv] = t
	}
	for _, name := range slices.Sorted(maps.Keys(p.Tracked)) {
		if _, ok := cat.Entity(name); !ok {
			fail("Props.Tracked[%q]: application %s tracks no entity %s (it tracks %v)", name, p.App.Name, name, entityNames(cat.Entities()))
		}
	}
	missing := map[string]bool{}
	for _, lane := range []catalog.Lane{catalog.Durable, catalog.BestEffort} {
		w.env[lane] = map[string]awsdynamodb.ITable{}
		for _, m := range p.App.Runs(lane) {
			for _, name := range m.Env {
				t, ok := p.Tables[name]
				if !ok || t == nil {
					t, ok = byEnv[name]
				}
				if !ok || t == nil {
					if !missing[name] {
						missing[name] = true
						fail("module %s of application %s reads environment variable %s and Props.Tables has no table for it: give one in Props.Tables[%q]", m.Spec.Name, p.App.Name, name, name)
					}
					continue
				}
				w.env[lane][name] = t
			}
		}
	}
	// A table no function here reads is a mistake the props would hide: a
	// misspelt variable, or a module that moved to another lane.
	for _, name := range slices.Sorted(maps.Keys(p.Tables)) {
		_, durable := w.env[catalog.Durable][name]
		_, bestEffort := w.env[catalog.BestEffort][name]
		if !durable && !bestEffort && !missing[name] {
			var read []string
			for _, lane := range []catalog.Lane{catalog.Durable, catalog.BestEffort} {
				read = append(read, slices.Collect(maps.Keys(w.env[lane]))...)
			}
			slices.Sort(read)
			fail("Props.Tables[%q]: no DURABLE or BEST_EFFORT module of application %s reads %s (they read %v): remove it, or add it to the Env of the module that reads it",
				name, p.App.Name, name, slices.Compact(read))
		}
	}
	return w
}

func entityNames(es []catalog.Entity) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Name
	}
	return out
}

// streamView returns the stream view of a table this app creates; of an
// imported table it knows nothing (known is false).
func streamView(t awsdynamodb.ITable) (view awsdynamodb.StreamViewType, known bool) {
	cfn, ok := t.Node().DefaultChild().(awsdynamodb.CfnTable)
	if !ok {
		return "", false
	}
	switch spec := cfn.StreamSpecification().(type) {
	case *awsdynamodb.CfnTable_StreamSpecificationProperty:
		return awsdynamodb.StreamViewType(*spec.StreamViewType), true
	case map[string]any:
		if v, ok := spec["streamViewType"].(string); ok {
			return awsdynamodb.StreamViewType(v), true
		}
	}
	return "", false
}

// AddChecks applies cdk-nag's AwsSolutions pack to everything under scope;
// the app and the tests both call it, so they check the same thing.
func AddChecks(scope constructs.Construct) {
	awscdk.Aspects_Of(scope).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{
		Verbose: jsii.Bool(true),
	}), nil)
}
