package backbone

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// The heartbeat (pkg/heartbeat). EventBridge Scheduler invokes the writer
// once a minute, the shortest rate Scheduler takes: a stopped hop alarms
// within heartbeatMissedMinutes, and a day's beats (1,440 events, two
// transactional items each) cost a few cents a month on every service they
// cross. A five-minute rate would be cheaper still, but then a stopped Pipe
// could go unseen for a quarter of an hour, longer than PipeRecordAge or a
// DLQ alarm takes on a busy stack.
const (
	// HeartbeatEvery is the writer's schedule.
	HeartbeatEvery = "rate(1 minute)"
	// heartbeatMissedMinutes: consecutive minutes without a heartbeat
	// handled on the DURABLE lane before HeartbeatMissing fires. One
	// missed minute is a scheduler retry or a minute boundary; five in a
	// row is a stopped path.
	heartbeatMissedMinutes = 5
	// heartbeatLateMs: a heartbeat handled more than two minutes after its
	// commit means the path is slow although it still moves.
	heartbeatLateMs = 2 * 60 * 1000
	// heartbeatMaxAgeS: Scheduler drops a beat it could not deliver within
	// a minute, so a late retry never stands in for a missing minute.
	heartbeatMaxAgeS = 60
)

// HeartbeatProps wires the writer to the log.
type HeartbeatProps struct {
	Log       *EventLog
	Functions FunctionOptions
}

// Heartbeat is the writer of the stack's heartbeat: a function that appends
// one fourlanes.heartbeat to the reserved heartbeat chain per invocation,
// allowed to append only to that chain, only inside TransactWriteItems, and
// to read only that chain's head.
type Heartbeat struct {
	constructs.Construct
	Function Function
}

// heartbeatPermissions are all the writer may do: Emit's conditional Puts
// and condition checks inside TransactWriteItems, and Emit's head read,
// each only on items whose partition key is the heartbeat's chain
// (dynamodb:LeadingKeys; DynamoDB authorizes a transaction's Put as
// PutItem, so the key condition holds there too).
func heartbeatPermissions(events *string) []permission {
	return []permission{
		{sid: "AppendHeartbeatsInsideTransactWriteItems", actions: logAppendWrite, resources: []*string{events}, conditions: heartbeatAppendOnly()},
		{sid: "ReadTheHeartbeatHead", actions: logAppendRead, resources: []*string{events},
			conditions: map[string]map[string]any{"ForAllValues:StringEquals": heartbeatChain()}},
	}
}

// heartbeatChain limits a statement to the heartbeat chain's items.
func heartbeatChain() map[string]any {
	return map[string]any{"dynamodb:LeadingKeys": []string{tenancy.HeartbeatTenant}}
}

// heartbeatAppendOnly is transactionOnly, on the heartbeat chain's items.
func heartbeatAppendOnly() map[string]map[string]any {
	c := transactionOnly()
	c["ForAllValues:StringEquals"] = heartbeatChain()
	return c
}

// NewHeartbeat creates the writer.
func NewHeartbeat(scope constructs.Construct, id string, props *HeartbeatProps) *Heartbeat {
	c := constructs.NewConstruct(scope, jsii.String(id))
	fn := newFunction(c, "Heartbeat", props.Functions, functionSpec{
		name:        keys.FnHeartbeat,
		description: "fourlanes heartbeat: appends one synthetic event per scheduled invocation, so a stopped path alarms on an idle stack",
		timeout:     awscdk.Duration_Seconds(jsii.Number(30)),
		memoryMB:    128,
		// One beat at a time is all it ever does.
		reserved: jsii.Number(1),
		env:      map[string]*string{keys.EnvEventsTable: props.Log.Events.TableName()},
	})
	for _, p := range heartbeatPermissions(props.Log.Events.TableArn()) {
		fn.Role.AddToPrincipalPolicy(p.statement())
	}
	return &Heartbeat{Construct: c, Function: fn}
}

// heartbeatsDelivered is EMF HeartbeatsDelivered on the DURABLE lane, summed
// per minute.
func heartbeatsDelivered() awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(keys.MetricNamespace),
		MetricName:    jsii.String(keys.MetricHeartbeatsDelivered),
		DimensionsMap: &map[string]*string{"Lane": jsii.String(string(catalog.Durable))},
		Statistic:     jsii.String("Sum"),
		Period:        minutes(1),
	})
}

// heartbeatLag is EMF HeartbeatLag on the DURABLE lane (commit → handled,
// milliseconds) at stat over period.
func heartbeatLag(stat string, period awscdk.Duration) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(keys.MetricNamespace),
		MetricName:    jsii.String(keys.MetricHeartbeatLag),
		DimensionsMap: &map[string]*string{"Lane": jsii.String(string(catalog.Durable))},
		Statistic:     jsii.String(stat),
		Period:        period,
	})
}

// MetricHeartbeatsDelivered is the heartbeats handled on the DURABLE lane
// per minute (EMF HeartbeatsDelivered, Lane DURABLE): about one on a
// healthy stack, none when a hop between the log and durable-consumer
// stopped.
func (b *Backbone) MetricHeartbeatsDelivered(opts *awscloudwatch.MetricOptions) awscloudwatch.IMetric {
	return withMetric(heartbeatsDelivered(), opts)
}

// MetricHeartbeatLag is the heartbeat's commit → handled on the DURABLE
// lane in milliseconds (EMF HeartbeatLag, Lane DURABLE), the maximum over 5
// minutes unless opts says otherwise.
func (b *Backbone) MetricHeartbeatLag(opts *awscloudwatch.MetricOptions) awscloudwatch.IMetric {
	return withMetric(heartbeatLag("Maximum", minutes(5)), opts)
}

// heartbeatAlarms adds the heartbeat's alarms: missing beats (missing data
// breaches: silence is the failure it exists to see) and late ones.
func (a *Alarms) heartbeatAlarms(c constructs.Construct, action awscloudwatch.IAlarmAction, late func(name, description string, metric awscloudwatch.IMetric, threshold, periods float64)) awscloudwatch.Alarm {
	missing := awscloudwatch.NewAlarm(c, jsii.String("HeartbeatMissing"), &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String("No heartbeat reached the DURABLE lane's subscriber for 5 minutes (EMF HeartbeatsDelivered, Lane DURABLE; missing data alarms). " +
			"The heartbeat function appends one event a minute to the reserved chain " + tenancy.HeartbeatTenant + "; one of its hops stopped: the HeartbeatSchedule schedule or the heartbeat function (its Errors alarm), " +
			"the events Pipe (PipeStopped, PipeExecutionFailed; aws pipes describe-pipe), stream-filter, the DURABLE FIFO queue (DurableOldestMessage), " +
			"durable-consumer's event source mapping (disabled or deleted: aws lambda list-event-source-mappings) or durable-consumer itself (its Errors alarm). " +
			"Every team's DURABLE events wait at the same hop. Follow docs/operations.md, 'Runbook: the heartbeat stopped'."),
		Metric:             heartbeatsDelivered(),
		Threshold:          jsii.Number(1),
		EvaluationPeriods:  jsii.Number(heartbeatMissedMinutes),
		DatapointsToAlarm:  jsii.Number(heartbeatMissedMinutes),
		ComparisonOperator: awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_BREACHING,
	})
	missing.AddAlarmAction(action)
	missing.AddOkAction(action)
	a.ByName["HeartbeatMissing"] = missing
	late("HeartbeatLate",
		"Heartbeats reach the DURABLE lane's subscriber more than 2 minutes after their commit (maximum of EMF HeartbeatLag, Lane DURABLE, over 5 minutes): the path still moves but is slow. Check PipeRecordAge, DurableOldestMessage and durable-consumer's duration and throttles; every team's DURABLE events are as late.",
		heartbeatLag("Maximum", minutes(5)), heartbeatLateMs, 1)
	return missing
}
