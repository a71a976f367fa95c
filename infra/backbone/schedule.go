package backbone

import (
	"encoding/json"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Schedule expressions (EventBridge Scheduler, UTC).
const (
	// ReconcileIncrementalEvery: walk each tenant from its checkpoint.
	ReconcileIncrementalEvery = "rate(15 minutes)"
	// ReconcileFullAt: walk each tenant from genesis, once a day.
	ReconcileFullAt = "cron(0 3 * * ? *)"
	// ReconcileFullContinueAt: continue a full round that one run could not
	// finish, every hour at half past (never beside the 03:00 start), so a
	// daily round over many tenants completes within hours, not days, and
	// resumes a tenant's walk well within the walk row's 24 hours.
	ReconcileFullContinueAt = "cron(30 * * * ? *)"
	// RepairEvery: drain the dead-letter queues well within the 18 hours a
	// Pipe or change-feed range has left in its stream.
	RepairEvery = "rate(1 hour)"
)

// ReconcileScheduleInput is what Scheduler hands reconcile: the Function URL
// request (payload format 2.0) reconcile answers, GET / with
// scheduled=true (full=true for a walk from genesis). A scheduled call does
// its share of a round: it resumes from the round's cursor in the state
// table, walks pages of limit tenants until its deadline, and saves the
// cursor, so successive runs cover every tenant however many there are.
// Scheduler invokes the function directly, so the request carries no IAM
// authorizer; reconcile accepts scheduled=true only then (a Function URL
// request always names its SigV4-verified caller).
func ReconcileScheduleInput(full bool) string {
	q := "scheduled=true&limit=100"
	if full {
		q = "scheduled=true&full=true&limit=100"
	}
	return reconcileRequest(q)
}

// ReconcileFullContinueInput continues the full round in progress
// (resume=true), and never starts one.
func ReconcileFullContinueInput() string {
	return reconcileRequest("scheduled=true&full=true&resume=true&limit=100")
}

func reconcileRequest(q string) string {
	b, err := json.Marshal(map[string]any{
		"version":        "2.0",
		"routeKey":       "$default",
		"rawPath":        "/",
		"rawQueryString": q,
		"headers":        map[string]string{"user-agent": "fourlanes-scheduler"},
		"requestContext": map[string]any{"http": map[string]string{"method": "GET", "path": "/"}},
	})
	if err != nil {
		panic(err) // a constant map
	}
	return string(b)
}

// SchedulesProps names the functions that run by themselves.
type SchedulesProps struct {
	Reconcile *Reconcile
	Repair    *Repair
	// Heartbeat, when set, is invoked every HeartbeatEvery.
	Heartbeat *Heartbeat
}

// Schedules run reconcile (incremental often, full daily), dlq-repair and
// the heartbeat writer by themselves. Each target has its own role, allowed lambda:InvokeFunction on
// that function only.
type Schedules struct {
	constructs.Construct
	ByName map[string]awsscheduler.CfnSchedule
	Roles  map[string]awsiam.Role // by function name (keys.Fn*)
}

// NewSchedules creates the schedules and their roles.
func NewSchedules(scope constructs.Construct, id string, props *SchedulesProps) *Schedules {
	c := constructs.NewConstruct(scope, jsii.String(id))
	s := &Schedules{Construct: c, ByName: map[string]awsscheduler.CfnSchedule{}, Roles: map[string]awsiam.Role{}}
	account := awscdk.Stack_Of(c).Account()
	role := func(f Function) awsiam.Role {
		if r, ok := s.Roles[f.name]; ok {
			return r
		}
		r := awsiam.NewRole(c, jsii.String(camel(f.name)+"Role"), &awsiam.RoleProps{
			AssumedBy: awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
				Conditions: &map[string]interface{}{"StringEquals": map[string]interface{}{"aws:SourceAccount": account}},
			}),
			Description: jsii.String("fourlanes: EventBridge Scheduler invokes " + f.name),
			InlinePolicies: &map[string]awsiam.PolicyDocument{
				"invoke": awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &[]awsiam.PolicyStatement{
					statement([]string{"lambda:InvokeFunction"}, f.Fn.FunctionArn()),
				}}),
			},
		})
		s.Roles[f.name] = r
		return r
	}
	schedule := func(name, description, expression string, f Function, input string, maxAgeS ...float64) {
		retry := &awsscheduler.CfnSchedule_RetryPolicyProperty{MaximumRetryAttempts: jsii.Number(2)}
		if len(maxAgeS) > 0 {
			retry.MaximumEventAgeInSeconds = jsii.Number(maxAgeS[0])
		}
		sc := awsscheduler.NewCfnSchedule(c, jsii.String(name), &awsscheduler.CfnScheduleProps{
			Description:        jsii.String(description),
			ScheduleExpression: jsii.String(expression),
			FlexibleTimeWindow: &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: jsii.String("OFF")},
			State:              jsii.String("ENABLED"),
			Target: &awsscheduler.CfnSchedule_TargetProperty{
				Arn:     f.Fn.FunctionArn(),
				RoleArn: role(f).RoleArn(),
				Input:   jsii.String(input),
				// A missed run is made up by the next one.
				RetryPolicy: retry,
			},
		})
		s.ByName[name] = sc
	}
	schedule("ReconcileIncremental", "fourlanes: reconcile every tenant from its checkpoint", ReconcileIncrementalEvery,
		props.Reconcile.Function, ReconcileScheduleInput(false))
	schedule("ReconcileFull", "fourlanes: reconcile every tenant from genesis, daily", ReconcileFullAt,
		props.Reconcile.Function, ReconcileScheduleInput(true))
	schedule("ReconcileFullContinue", "fourlanes: continue the daily from-genesis reconcile round until every tenant is done", ReconcileFullContinueAt,
		props.Reconcile.Function, ReconcileFullContinueInput())
	schedule("DLQRepair", "fourlanes: drain the dead-letter queues", RepairEvery, props.Repair.Function, "{}")
	if props.Heartbeat != nil {
		schedule("HeartbeatSchedule", "fourlanes: write the stack's heartbeat, so a stopped path alarms on an idle stack", HeartbeatEvery,
			props.Heartbeat.Function, "{}", heartbeatMaxAgeS)
	}
	return s
}
