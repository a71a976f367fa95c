package backbone

import (
	"fmt"
	"hash/fnv"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Output names (pkg/keys spells them, for the CLI that reads them). A
// backbone declares each after its prefix (Backbone.OutputName).
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
	OutputCheckpointBucket      = keys.OutputCheckpointBucket
	OutputCheckpointKey         = keys.OutputCheckpointKey
	OutputSubjectKeysTable      = keys.OutputSubjectKeysTable
	OutputDataKey               = keys.OutputDataKey
	OutputEraserPolicy          = keys.OutputEraserPolicy
)

// UnprefixedID is the construct id that keeps a stack deployed with the
// backbone before it was a construct (NewBackbone(stack, props)) as it is:
// CDK leaves the id "Default" out of logical IDs, and so does the backbone's
// prefix, so New(stack, UnprefixedID, props) synthesizes the same logical
// IDs and output names. One backbone per stack can have it.
const UnprefixedID = keys.HiddenID

// Props configures a backbone.
type Props struct {
	// App is the application the backbone runs: its modules decide which
	// tables each function reads and which streams feed changefeed.
	App app.Application
	// Tracked holds each tracked entity's table (the application's own), by
	// entity name (catalog.Entity.Name). Each must have a stream with
	// NEW_AND_OLD_IMAGES. GrantEmit covers their writes in Emit's
	// transaction.
	Tracked map[string]awsdynamodb.ITable
	// Tables holds the table of each environment variable the application's
	// modules read (App.Env), by variable name. A variable that names a
	// tracked entity's table (its TableEnv) may be left out.
	Tables map[string]awsdynamodb.ITable
	// Tags are added to every resource of the backbone (Tags.Of, on the
	// construct, not on the rest of the stack); nil means app=<App.Name>.
	Tags map[string]string
	// CodeRoot holds build/<function>/bootstrap (the app passes "build").
	CodeRoot string
	// Tracing is the functions' X-Ray mode: the zero value means
	// awslambda.Tracing_ACTIVE (as before the prop existed);
	// awslambda.Tracing_DISABLED turns tracing off (no X-Ray permissions, and
	// the functions do not instrument their AWS SDK calls);
	// awslambda.Tracing_PASS_THROUGH traces what arrives sampled.
	Tracing awslambda.Tracing
	// TraceEndpoint is the OTLP/HTTP traces endpoint the functions send
	// their OpenTelemetry spans to (pkg/tracing): with the ADOT collector
	// layer in TraceLayers, "http://localhost:4318/v1/traces". Empty, the
	// functions record no spans of their own (FOURLANES_TRACING=off) and
	// Lambda's active tracing still records each invocation. It needs
	// Tracing ACTIVE or PASS_THROUGH, whose X-Ray permissions the collector
	// uses.
	TraceEndpoint string
	// TraceLayers are added to every function: the ADOT collector layer
	// (arn:aws:lambda:<region>:901920570463:layer:aws-otel-collector-arm64-…,
	// awslambda.LayerVersion_FromLayerVersionArn) that receives on
	// localhost:4318 and exports to X-Ray.
	TraceLayers []awslambda.ILayerVersion
	// AlarmTopic, when set, is the topic every alarm notifies (ALARM and
	// OK), one of the team's own say; nil creates one (output
	// AlarmTopicArn either way).
	//
	// Alarms must reach someone: the synthesis fails unless AlarmTopic (or
	// AlarmTopicArn), AlarmEmail or NoAlarmDestination is set.
	AlarmTopic awssns.ITopic
	// AlarmTopicArn names an existing topic by its ARN, in place of
	// AlarmTopic (the backbone imports it).
	AlarmTopicArn string
	// AlarmEmail, when set, is subscribed to the alarm topic (AlarmTopic, or
	// the one the backbone creates).
	AlarmEmail string
	// NoAlarmDestination is the reason the alarms may reach no one (a
	// sandbox account, the local twin), for a backbone given neither
	// AlarmTopic nor AlarmEmail. The template records it: in the metadata
	// of the topic the backbone creates (keys.MetadataNoAlarmDestination)
	// and in the AlarmTopicArn output's description. It cannot be combined
	// with AlarmTopic or AlarmEmail.
	NoAlarmDestination string
	// AuditTrail adds a CloudTrail trail of the data events on the events
	// table and the checkpoint bucket (who wrote, read or tried to delete
	// what), delivered to a bucket of its own. Off by default: the account
	// may have an organization trail already, and data events are charged
	// per event. The tamper and checkpoint alarms send responders to these
	// events.
	AuditTrail bool
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
	// IntegrityLogRetention of the log groups of tamper-watch and the
	// notary, whose ERROR lines are the evidence of a tampered log; zero
	// means one year.
	IntegrityLogRetention awslogs.RetentionDays
	// DurableMaxConcurrency caps durable-consumer's concurrency from the
	// queue; zero means 10.
	DurableMaxConcurrency float64
	// TableKey, QueueKey and LogKey are optional customer-managed KMS keys
	// for the backbone's tables (and their streams), its queues and its log
	// groups; nil keeps the AWS managed key (tables), SQS-managed SSE
	// (queues) and CloudWatch Logs' own encryption (log groups). The
	// backbone's roles, the emitter policy and GrantEmit/GrantRead get use
	// of the keys they need; a LogKey created in the stack gets a statement
	// letting CloudWatch Logs use it, an imported one must have it already.
	TableKey awskms.IKey
	QueueKey awskms.IKey
	LogKey   awskms.IKey
	// StateOperators are the roles, besides the backbone's own functions,
	// that may write the state table: whoever runs `fourlanes effects -redo
	// KEY` or `-done KEY`. Every other principal's writes are denied by the
	// table's resource policy.
	StateOperators []awsiam.IRole
	// Owners maps each owner a module or subscription of the catalog names
	// (catalog.Module.Owner, Subscription.Owner) to where its alarms go.
	// Each owner gets alarms of its own on its DURABLE subscriptions' dead
	// letters, its LOCAL handlers' failures and its modules' event types
	// that matched no subscription, notifying its destination beside the
	// stack's topic. An owner the catalog names without a destination
	// here fails the synthesis, unless NoAlarmDestination says why the
	// alarms reach no one: then the owner's topic, like the stack's, has
	// no subscriber and the template records the reason. One here the
	// catalog does not name fails it too.
	Owners map[string]OwnerDestination
	// ReconcileAccess, when set, limits what each caller of reconcile's
	// Function URL sees to its tenants (pkg/reconcile, TenantAccess: the
	// function reads the caller's role from the SigV4-verified identity the
	// URL hands it; keys.EnvReconcileAccess). A Role entry is granted the URL
	// too. A caller not named sees nothing (403), so name every caller,
	// operators with Tenants {"*"}. Unset: every caller the URL admits sees
	// every tenant.
	ReconcileAccess []ReconcileAccess
	// FailOnTeamFindings makes cdk-nag's findings on the stack's other
	// resources (the team's) errors that fail the synthesis, as findings on
	// the backbone's own resources are. By default they are warnings, in the
	// synthesis output and in the stack's nag report (the cloud assembly's
	// AwsSolutions-…-NagReport.csv), and the synthesis goes on. AddChecks
	// asks the same for every stack of an app.
	FailOnTeamFindings bool
}

// Backbone is the whole fourlanes backbone, running one application: a
// construct a team adds to its own stack, beside its tables and services.
// Its resources' names are generated and its outputs and pinned logical IDs
// begin with its prefix (keys.BackbonePrefix of its construct path), so a
// stack holds as many as it needs.
type Backbone struct {
	constructs.Construct
	Log         *EventLog
	Durable     *DurableLane
	ChangeFeed  *ChangeFeed
	Reconcile   *Reconcile
	Checkpoints *Checkpoints
	Repair      *Repair
	Tamper      *TamperWatch
	Notary      *Notary
	// Heartbeat writes the stack's heartbeat every minute (heartbeat.go).
	Heartbeat *Heartbeat
	Alarms    *Alarms
	Schedules *Schedules
	// Erasure is the subject-keys table and data-key KMS key, made only
	// when the application's catalog declares personal fields (nil
	// otherwise).
	Erasure *Erasure
	// Trail is the audit trail (Props.AuditTrail); nil without one.
	Trail *AuditTrail

	prefix   string
	tracked  []trackedTable
	tableKey awskms.IKey
}

// New adds a backbone with the given id to scope (a team's own stack, say),
// wired to props.App: a stream mapping on each tracked table, and on each
// function that runs a lane the environment of the modules bound there, with
// read and write on their tables. What props lack (a tracked table, a
// stream, an environment variable's table) fails the synthesis with an error
// that says what to give. It applies cdk-nag's AwsSolutions pack to the
// stack (see Props.FailOnTeamFindings).
func New(scope constructs.Construct, id string, props *Props) *Backbone {
	var p Props
	if props != nil {
		p = *props
	}
	c := constructs.NewConstruct(scope, jsii.String(id))
	b := &Backbone{Construct: c}
	fail := func(format string, a ...any) {
		awscdk.Annotations_Of(c).AddError(jsii.String(fmt.Sprintf("backbone %s: %s", *c.Node().Path(), fmt.Sprintf(format, a...))))
	}
	stack := awscdk.Stack_Of(c)
	b.prefix = keys.BackbonePrefix(pathBelow(stack, c))
	if other := stackChecks(stack).add(*c.Node().Path(), b.prefix, p.FailOnTeamFindings); other != "" {
		fail("its id %q gives the prefix %q of its logical IDs and outputs, as backbone %s's does in stack %s: give one of them another id",
			id, b.prefix, other, *stack.StackName())
		// A prefix of its own, so the synthesis gets as far as reporting it.
		h := fnv.New32a()
		h.Write([]byte(*c.Node().Path()))
		b.prefix = fmt.Sprintf("%sX%08x", b.prefix, h.Sum32())
	}

	if p.RemovalPolicy == "" {
		p.RemovalPolicy = awscdk.RemovalPolicy_RETAIN
	}
	if p.LogRetention == "" {
		p.LogRetention = awslogs.RetentionDays_ONE_MONTH
	}
	if p.DurableMaxConcurrency == 0 {
		p.DurableMaxConcurrency = 10
	}
	switch p.Tracing {
	case "":
		p.Tracing = awslambda.Tracing_ACTIVE
	case awslambda.Tracing_ACTIVE, awslambda.Tracing_PASS_THROUGH, awslambda.Tracing_DISABLED:
	default:
		fail("Props.Tracing %q: use awslambda.Tracing_ACTIVE, Tracing_PASS_THROUGH or Tracing_DISABLED (or leave it empty for ACTIVE)", p.Tracing)
		p.Tracing = awslambda.Tracing_ACTIVE
	}
	if p.TraceEndpoint != "" {
		if u, err := url.Parse(p.TraceEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			fail("Props.TraceEndpoint %q: give the OTLP/HTTP traces URL, e.g. http://localhost:4318/v1/traces for the ADOT collector layer", p.TraceEndpoint)
		}
		if p.Tracing == awslambda.Tracing_DISABLED {
			fail("Props.TraceEndpoint is set but Props.Tracing is DISABLED: the collector needs the X-Ray permissions ACTIVE or PASS_THROUGH grant; leave Tracing empty (ACTIVE) or drop TraceEndpoint")
		}
	}
	tags := p.Tags
	if tags == nil {
		tags = map[string]string{"app": p.App.Name}
	}
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		awscdk.Tags_Of(c).Add(jsii.String(k), jsii.String(tags[k]), nil)
	}
	p.NoAlarmDestination = strings.TrimSpace(p.NoAlarmDestination)
	for _, err := range alarmDestinationErrors(&p) {
		fail("%v", err)
	}
	if p.AlarmTopic == nil && isTopicArn(p.AlarmTopicArn) {
		p.AlarmTopic = awssns.Topic_FromTopicArn(c, jsii.String("AlarmTopic"), jsii.String(p.AlarmTopicArn))
	}
	for _, err := range ownerErrors(p.App, p.Owners, p.NoAlarmDestination) {
		fail("%v", err)
	}
	w := resolve(&p)
	for _, err := range w.errs {
		fail("%v", err)
	}
	b.tracked = w.tracked

	fo := FunctionOptions{CodeRoot: p.CodeRoot, LogRetention: p.LogRetention, IntegrityLogRetention: p.IntegrityLogRetention, LogKey: p.LogKey, Tracing: p.Tracing,
		TraceEndpoint: p.TraceEndpoint, TraceLayers: p.TraceLayers}
	var reconcileRC, repairRC *float64
	if p.ReserveConcurrency {
		reconcileRC, repairRC = jsii.Number(2), jsii.Number(1)
	}

	b.Log = NewEventLog(c, "EventLog", &EventLogProps{RemovalPolicy: p.RemovalPolicy, LogicalIDPrefix: b.prefix, Key: p.TableKey})
	b.Durable = NewDurableLane(c, "Durable", &DurableLaneProps{
		Log: b.Log, Functions: fo, ConsumerMaxConcurrency: p.DurableMaxConcurrency, RemovalPolicy: p.RemovalPolicy, QueueKey: p.QueueKey,
	})
	b.ChangeFeed = NewChangeFeed(c, "ChangeFeed", &ChangeFeedProps{Log: b.Log, Functions: fo, RemovalPolicy: p.RemovalPolicy, TableKey: p.TableKey, QueueKey: p.QueueKey})
	b.Reconcile = NewReconcile(c, "Reconcile", &ReconcileProps{Log: b.Log, Functions: fo, ReservedConcurrency: reconcileRC})
	for _, err := range b.Reconcile.limitAccess(p.ReconcileAccess) {
		fail("%v", err)
	}
	b.Notary = NewNotary(c, "Notary", &NotaryProps{Log: b.Log, Functions: fo, RemovalPolicy: p.RemovalPolicy, QueueKey: p.QueueKey})
	b.Checkpoints = NewCheckpoints(c, "Checkpoints", &CheckpointsProps{Log: b.Log, Reconcile: b.Reconcile, Notary: b.Notary})
	b.Repair = NewRepair(c, "Repair", &RepairProps{
		Log: b.Log, Durable: b.Durable, ChangeFeed: b.ChangeFeed, Functions: fo, ReservedConcurrency: repairRC,
	})
	b.Durable.OnlyBackboneSends(b.Repair.Function.Role)
	b.Log.ProtectState(append([]awsiam.IRole{
		b.Durable.DurableConsumer.Role, b.ChangeFeed.Changefeed.Role, b.Reconcile.Function.Role, b.Repair.Function.Role,
		b.Notary.Function.Role, // its own notary# rows only (notary.go)
	}, p.StateOperators...)...)
	b.Log.ProtectNotaryRows(b.Notary.Function.Role)
	b.ChangeFeed.OnlyBackboneSends(b.Repair.Function.Role)
	b.Heartbeat = NewHeartbeat(c, "Heartbeat", &HeartbeatProps{Log: b.Log, Functions: fo})
	b.Tamper = NewTamperWatch(c, "TamperWatch", &TamperWatchProps{Log: b.Log, Functions: fo, RemovalPolicy: p.RemovalPolicy, QueueKey: p.QueueKey})
	b.grantKeys(&p)
	b.tableKey = p.TableKey

	for _, t := range w.tracked {
		b.ChangeFeed.Track(t.entity, t.table)
		b.Repair.Track(t.entity, t.table)
	}
	if arns := b.trackedArns(); len(arns) > 0 {
		b.Log.EmitterPolicy.AddStatements(trackedWritePermission(arns).statement())
	}
	if p.PerPairClaimsGone {
		for _, f := range []Function{b.Durable.DurableConsumer, b.Repair.Function} {
			f.Fn.AddEnvironment(jsii.String(keys.EnvPerPairClaims), jsii.String(keys.PerPairClaimsGone), nil)
		}
	}
	if cat, err := p.App.Catalog(); err == nil && cat.Personal() {
		b.Erasure = NewErasure(c, "Erasure", &ErasureProps{RemovalPolicy: p.RemovalPolicy})
		b.Erasure.seal(b.Durable.DurableConsumer)
		b.Erasure.seal(b.Repair.Function)
		b.Erasure.open(b.ChangeFeed.Changefeed)
		b.Log.EmitterPolicy.AddStatements(*statements(b.Erasure.sealPermissions())...)
	}
	useTables(b.Durable.DurableConsumer, w.env[catalog.Durable])
	useTables(b.ChangeFeed.Changefeed, w.env[catalog.BestEffort])
	useTables(b.Repair.Function, w.env[catalog.Durable], w.env[catalog.BestEffort])
	if p.App.EmitsFollowOn() {
		// DURABLE handlers emit follow-on events (eventstore.EmitterFrom):
		// the two functions that run them may append to the log exactly as
		// Emit does, only inside TransactWriteItems.
		for _, f := range []Function{b.Durable.DurableConsumer, b.Repair.Function} {
			followOnPermission(b.Log.Events.TableArn()).grant(f.Role)
		}
	}

	b.Alarms = NewAlarms(c, "Alarms", &AlarmsProps{
		Log: b.Log, Durable: b.Durable, ChangeFeed: b.ChangeFeed, Reconcile: b.Reconcile, Repair: b.Repair,
		TamperWatch: b.Tamper, Notary: b.Notary, Heartbeat: b.Heartbeat, Topic: p.AlarmTopic, AlarmEmail: p.AlarmEmail, NoDestination: p.NoAlarmDestination,
		TrackedStreams: w.streams(p.App.Name), App: p.App, Owners: p.Owners, Subscriptions: w.subscriptions,
	})
	if p.AuditTrail {
		b.Trail = NewAuditTrail(c, "AuditTrail", &AuditTrailProps{Log: b.Log, Checkpoints: b.Checkpoints})
	}
	b.Schedules = NewSchedules(c, "Schedules", &SchedulesProps{Reconcile: b.Reconcile, Repair: b.Repair, Heartbeat: b.Heartbeat})

	out := func(name, description string, value *string) {
		o := awscdk.NewCfnOutput(c, jsii.String(name), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(description)})
		o.OverrideLogicalId(jsii.String(b.OutputName(name)))
	}
	out(OutputReconcileURL, "reconcile Function URL (AWS_IAM: sign requests with SigV4, service lambda)", b.Reconcile.URL.Url())
	out(OutputReconcileCallerPolicy, "Managed policy to attach to whoever calls the reconcile URL", b.Reconcile.CallerPolicy.ManagedPolicyArn())
	out(OutputEmitterPolicy, "Managed policy to attach to services that emit events", b.Log.EmitterPolicy.ManagedPolicyArn())
	out(OutputRepairFunction, "dlq-repair function name (invoke it to drain the dead-letter queues)", b.Repair.Function.Fn.FunctionName())
	out(OutputEventsTable, "Events table (the log)", b.Log.Events.TableName())
	out(OutputStateTable, "State table (claims, delivery watermarks, reconcile's rounds): fourlanes watermarks -state-table", b.Log.State.TableName())
	out(OutputDashboard, "CloudWatch dashboard", b.Alarms.Dashboard.DashboardName())
	out(OutputDurableDLQ, "DURABLE FIFO dead-letter queue", b.Durable.DLQ.QueueUrl())
	out(OutputPipeDLQ, "Pipe dead-letter queue (batch metadata)", b.Durable.PipeDLQ.QueueUrl())
	out(OutputChangeFeedDLQ, "Change-feed on-failure queue (batch metadata)", b.ChangeFeed.DLQ.QueueUrl())
	alarmTopic := "SNS topic every alarm notifies (ALARM and OK); subscribe people to it"
	if p.NoAlarmDestination != "" {
		alarmTopic += ". No one is subscribed: " + p.NoAlarmDestination
	}
	out(OutputAlarmTopic, alarmTopic, b.Alarms.Topic.TopicArn())
	out(OutputCheckpointBucket, "Object Lock bucket of signed checkpoints (checkpoints/<tenant>/…)", b.Checkpoints.Bucket.BucketName())
	out(OutputCheckpointKey, "KMS key that signs checkpoints: aws kms get-public-key gives the key fourlanes verify -key takes", b.Checkpoints.Key.KeyArn())
	if b.Erasure != nil {
		out(OutputSubjectKeysTable, "Subject-keys table: each data subject's wrapped data key, or its erasure tombstone (fourlanes erase)", b.Erasure.Keys.TableName())
		out(OutputDataKey, "KMS key that wraps the per-subject data keys of personal fields", b.Erasure.Key.KeyArn())
		out(OutputEraserPolicy, "Managed policy to attach to whoever erases data subjects (fourlanes erase)", b.Erasure.EraserPolicy.ManagedPolicyArn())
	}
	return b
}

// NewBackbone is New(scope, UnprefixedID, props): the backbone as NewBackbone
// made it before it took an id, with the same logical IDs and output names.
//
// Deprecated: use New, and give the backbone an id (UnprefixedID for a
// stack deployed with NewBackbone).
func NewBackbone(scope constructs.Construct, props *Props) *Backbone {
	return New(scope, UnprefixedID, props)
}

// Prefix begins the backbone's output names and pinned logical IDs
// (keys.BackbonePrefix of its construct path below the stack): "Orders" for
// New(stack, "Orders", …), "" for New(stack, UnprefixedID, …). The CLI's
// -backbone flag takes it.
func (b *Backbone) Prefix() string { return b.prefix }

// OutputName is what the stack calls one of the backbone's outputs
// (OutputEventsTable, …): its prefix, then name.
func (b *Backbone) OutputName(name string) string { return b.prefix + name }

// pathBelow is c's construct path below its stack ("Orders", "Team/Orders").
func pathBelow(stack awscdk.Stack, c constructs.IConstruct) string {
	p, sp := *c.Node().Path(), *stack.Node().Path()
	if sp == "" {
		return p
	}
	return strings.TrimPrefix(p, sp+"/")
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
	// subscriptions are the DURABLE and BEST_EFFORT subscriptions, whose
	// delivery lag the dashboard and alarms watch.
	subscriptions []string
	tracked       []trackedTable
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
	fail := func(format string, a ...any) { w.errs = append(w.errs, fmt.Errorf(format, a...)) }
	if p.App.Name == "" && len(p.App.Modules) == 0 {
		fail("Props.App is empty: give the application the backbone runs (an app.Application, as the examples give example.App)")
		return w
	}
	if err := p.App.Validate(); err != nil {
		fail("Props.App: %v", err)
	}
	cat, err := p.App.Catalog()
	if err != nil {
		return w
	}
	for _, s := range cat.Subscriptions() {
		if s.Lane == catalog.Durable || s.Lane == catalog.BestEffort {
			w.subscriptions = append(w.subscriptions, s.Name)
		}
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
		mods := p.App.Runs(lane)
		if lane == catalog.Durable {
			mods = p.App.RunsDurable() // with the INLINE/LOCAL modules bound for follow-on events
		}
		for _, m := range mods {
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

// alarmDestinationErrors checks that the alarms reach someone, or that the
// application said why they need not.
func alarmDestinationErrors(p *Props) []error {
	const choices = "Props.AlarmEmail (an address to subscribe), Props.AlarmTopic or Props.AlarmTopicArn (an existing SNS topic) " +
		"or Props.NoAlarmDestination (why the alarms may reach no one, e.g. \"sandbox account\"; the template records it)"
	var errs []error
	named := p.AlarmEmail != "" || p.AlarmTopic != nil || p.AlarmTopicArn != ""
	if p.AlarmTopic != nil && p.AlarmTopicArn != "" {
		errs = append(errs, fmt.Errorf("Props.AlarmTopic and Props.AlarmTopicArn (%q) both name a topic: give one", p.AlarmTopicArn))
	}
	switch {
	case !named && p.NoAlarmDestination == "":
		errs = append(errs, fmt.Errorf("the alarms reach no one: give %s", choices))
	case named && p.NoAlarmDestination != "":
		errs = append(errs, fmt.Errorf("Props.NoAlarmDestination (%q) says the alarms reach no one, but Props.AlarmEmail or Props.AlarmTopic names a destination: give one or the other", p.NoAlarmDestination))
	}
	if a := p.AlarmTopicArn; a != "" && !isTopicArn(a) {
		errs = append(errs, fmt.Errorf("Props.AlarmTopicArn %q is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)", a))
	}
	if e := p.AlarmEmail; e != "" {
		if at := strings.IndexByte(e, '@'); at <= 0 || at == len(e)-1 || strings.ContainsAny(e, " \t\n,;") {
			errs = append(errs, fmt.Errorf("Props.AlarmEmail %q is not one email address: give one address (subscribe more people to the AlarmTopicArn output's topic)", e))
		}
	}
	return errs
}

// AlarmsFromContext sets p's alarm destination from the CDK context
// (`cdk deploy -c alarmEmail=ops@example.com`): keys.ContextAlarmEmail,
// keys.ContextAlarmTopicArn (an existing topic, AlarmTopicArn) and
// keys.ContextNoAlarmDestination (the reason for none), as the examples'
// apps and the one `fourlanes init` writes read them. A value the context
// does not hold leaves p's as it was; New then fails the synthesis if none
// of the three is set.
func (p *Props) AlarmsFromContext(scope constructs.IConstruct) {
	get := func(key string) string {
		v, _ := scope.Node().TryGetContext(jsii.String(key)).(string)
		return strings.TrimSpace(v)
	}
	if v := get(keys.ContextAlarmEmail); v != "" {
		p.AlarmEmail = v
	}
	if v := get(keys.ContextAlarmTopicArn); v != "" {
		p.AlarmTopicArn = v
	}
	if v := get(keys.ContextNoAlarmDestination); v != "" {
		p.NoAlarmDestination = v
	}
}
