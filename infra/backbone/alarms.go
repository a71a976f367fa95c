package backbone

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Alarm thresholds.
const (
	// lagThresholdMs: a stream consumer more than 5 minutes behind for 5
	// minutes in a row is stuck or starved, well before the 6 h record age.
	lagThresholdMs = 5 * 60 * 1000
	// oldestMessageThresholdS: a FIFO message older than 15 minutes has been
	// retried several times (visibility 180 s, 5 receives) or its group is
	// blocked behind one that is.
	oldestMessageThresholdS = 15 * 60
	// tamperLagThresholdMs: tamper-watch must see a change within about a
	// minute.
	tamperLagThresholdMs = 60 * 1000
	// dlqAgeThresholdS: a dead letter older than 6 hours has outlived several
	// hourly dlq-repair runs, and a Pipe or change-feed range has 18 hours
	// left in its stream.
	dlqAgeThresholdS = 6 * 3600
	// unsettledAgeThresholdS: an event of a tenant still above a DURABLE
	// subscription's delivery watermark 15 minutes after it occurred means
	// the watermark stopped while events wait (the lane settles an event in
	// seconds; dlq-repair sweeps after 5 minutes).
	unsettledAgeThresholdS = 15 * 60
	// roundStalledS: the incremental schedule runs every 15 minutes; a round
	// over every tenant that is not done in 2 hours (8 runs) is stuck or no
	// longer fits.
	roundStalledS = 2 * 3600
	// fullRoundStalledS: the daily full round, continued hourly, must be
	// done within 12 hours of its start.
	fullRoundStalledS = 12 * 3600
)

// camel turns a function name such as "dlq-repair" into "DlqRepair", for
// construct ids.
func camel(name string) string {
	var b strings.Builder
	up := true
	for _, r := range name {
		if r == '-' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// LogicalAlarmTopic pins the alarm topic the backbone creates: its
// subscriptions (confirmed by a person) belong to it.
const LogicalAlarmTopic = "AlarmTopic"

// AlarmsProps names what to watch.
type AlarmsProps struct {
	Log         *EventLog
	Durable     *DurableLane
	ChangeFeed  *ChangeFeed
	Reconcile   *Reconcile
	Repair      *Repair
	TamperWatch *TamperWatch
	// Notary, when set, adds the notary's alarms (notary.go) and its
	// function's.
	Notary *Notary
	// Heartbeat, when set, adds the heartbeat's alarms (heartbeat.go) and
	// its function's.
	Heartbeat *Heartbeat
	// Topic is the topic every alarm notifies (ALARM and OK); nil creates
	// one, pinned as LogicalAlarmTopic after the log's prefix.
	Topic awssns.ITopic
	// AlarmEmail, when set, subscribes this address to the alarm topic
	// (AWS mails a confirmation link first).
	AlarmEmail string
	// NoDestination is why no one is subscribed (Props.NoAlarmDestination):
	// recorded in the created topic's metadata.
	NoDestination string
	// TrackedStreams names the streams changefeed reads, for the alarms'
	// descriptions (New: the application's tracked entities).
	TrackedStreams string
	// App is the application whose modules may name an owner to page
	// (app.Module.AlarmTopicArn, or catalog Owner).
	App app.Application
	// Owners maps the owners the catalog names to their destinations
	// (Props.Owners).
	Owners map[string]OwnerDestination
	// Subscriptions are the DURABLE and BEST_EFFORT subscriptions: each
	// gets a delivery-lag alarm and its p50 and p99 on the dashboard.
	Subscriptions []string
}

// Alarms are the backbone's alarms, the topic every one of them notifies
// (ALARM and OK), and the dashboard.
type Alarms struct {
	constructs.Construct
	Topic awssns.ITopic
	// ByName holds every alarm under the construct id it was created with.
	ByName    map[string]awscloudwatch.Alarm
	Dashboard awscloudwatch.Dashboard
}

// Functions returns every function of the stack, for per-function alarms.
func (p *AlarmsProps) functions() []Function {
	fns := []Function{
		p.Durable.StreamFilter, p.Durable.DurableConsumer, p.ChangeFeed.Changefeed,
		p.Reconcile.Function, p.Repair.Function, p.TamperWatch.Function,
	}
	if p.Notary != nil {
		fns = append(fns, p.Notary.Function)
	}
	if p.Heartbeat != nil {
		fns = append(fns, p.Heartbeat.Function)
	}
	return fns
}

// NewAlarms creates the alarms and the dashboard.
func NewAlarms(scope constructs.Construct, id string, props *AlarmsProps) *Alarms {
	c := constructs.NewConstruct(scope, jsii.String(id))
	a := &Alarms{Construct: c, ByName: map[string]awscloudwatch.Alarm{}}
	oneMin, fiveMin, fifteenMin := minutes(1), minutes(5), minutes(15)

	var all []awscloudwatch.IAlarm // as created, for the dashboard
	topic := props.Topic
	if topic == nil {
		// Publishing requires TLS (cdk-nag AwsSolutions-SNS3). No KMS key:
		// CloudWatch alarms cannot publish to a topic encrypted with the AWS
		// managed key (aws/sns), and alarm messages carry no tenant data.
		own := awssns.NewTopic(c, jsii.String("Topic"), &awssns.TopicProps{
			DisplayName: jsii.String("fourlanes alarms"),
			EnforceSSL:  jsii.Bool(true),
		})
		pin(own, props.Log.LogicalIDPrefix(), LogicalAlarmTopic)
		if props.NoDestination != "" {
			own.Node().DefaultChild().(awscdk.CfnResource).AddMetadata(jsii.String(keys.MetadataNoAlarmDestination), jsii.String(props.NoDestination))
		}
		topic = own
	}
	a.Topic = topic
	if props.AlarmEmail != "" {
		topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(props.AlarmEmail), nil))
	}
	action := awscloudwatchactions.NewSnsAction(topic)
	alarmMissing := func(name, description string, metric awscloudwatch.IMetric, threshold, periods float64, missing awscloudwatch.TreatMissingData) {
		al := awscloudwatch.NewAlarm(c, jsii.String(name), &awscloudwatch.AlarmProps{
			AlarmDescription:   jsii.String(description),
			Metric:             metric,
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(periods),
			DatapointsToAlarm:  jsii.Number(periods),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   missing,
		})
		al.AddAlarmAction(action)
		al.AddOkAction(action)
		a.ByName[name] = al
		all = append(all, al)
	}
	alarm := func(name, description string, metric awscloudwatch.IMetric, threshold, periods float64) {
		// No data means no traffic (or no failures), not trouble.
		alarmMissing(name, description, metric, threshold, periods, awscloudwatch.TreatMissingData_NOT_BREACHING)
	}

	pipe := props.Durable.Pipe
	changefeedIteratorAge := iteratorAge(props.ChangeFeed.Changefeed)
	pipeRecordAge := emfQuery("MAX", keys.MetricPipeRecordAge, oneMin)
	oldest := oldestMessage(props.Durable.Queue, oneMin)
	deadLettered := emfQuery("SUM", keys.MetricDeadLettered, fiveMin)
	chainBreaks := emfQuery("SUM", keys.MetricChainBreaks, fiveMin)
	rejected := emfQuery("SUM", keys.MetricRejectedRecords, fiveMin)
	repairOpen := emfQuery("SUM", keys.MetricRepairOpen, fiveMin)
	changeRejected := emfQuery("SUM", keys.MetricChangeRejected, fiveMin)
	tracked := props.TrackedStreams
	if tracked == "" {
		tracked = "the tracked tables' streams"
	}

	alarm("ChangeFeedIteratorAge",
		"changefeed is more than 5 minutes behind "+tracked+" for 5 minutes: a slow or failing batch holds a shard. Check changefeed's errors and logs; records older than 6 h go to the change-feed DLQ.",
		changefeedIteratorAge, lagThresholdMs, 5)
	alarm("PipeRecordAge",
		"The events Pipe delivers records more than 5 minutes old for 5 minutes (stream-filter's PipeRecordAge; Pipes publish no IteratorAge). The DURABLE lane is behind: check PipeExecutionFailed, stream-filter errors and the Pipe's log group.",
		pipeRecordAge, lagThresholdMs, 5)
	alarm("PipeExecutionFailed",
		"The events Pipe failed executions (filter, stream-filter enrichment or the FIFO target). It retries with bisect up to 10 times, then dead-letters to the Pipe DLQ. Check the Pipe's log group and stream-filter's logs.",
		pipeMetric(pipe, "ExecutionFailed", "Sum"), 1, 1)
	alarm("PipeExecutionTimeout",
		"The events Pipe timed out executions (enrichment and target must finish within 5 minutes). Check stream-filter's duration.",
		pipeMetric(pipe, "ExecutionTimeout", "Sum"), 1, 1)
	alarm("StreamFilterRejected",
		"stream-filter rejected stream records (EMF RejectedRecords, by Reason: hash_mismatch, broken_link, undecodable, unstamped_head). The Pipe retries, bisects and finally dead-letters the batch. Read the Reason in stream-filter's logs before draining.",
		rejected, 1, 1)
	alarm("UndeclaredEvents",
		"stream-filter passed events of a type or schema version its build does not declare (EMF UndeclaredEvents by Type and Version; each contributor of this alarm is one type and version): a producer was deployed before the backbone. Their hashes checked out and they are on the DURABLE lane; every subscription that cannot read them is dead-lettered alone, the rest deliver. Deploy the backbone with the producer's catalog, then run dlq-repair (docs/changing-events.md, 'Deploy order').",
		emfQueryBy("SUM", keys.MetricUndeclaredEvents, fiveMin, "Type", "Version"), 1, 1)
	alarm("DurableDLQDepth",
		"Messages in the DURABLE FIFO DLQ: an event failed durable-consumer 5 times (an infrastructure error, not a handler error, which dead-letters per subscription). Run dlq-repair (docs/operations.md, 'Runbook: draining the dead-letter queues').",
		visible(props.Durable.DLQ), 1, 1)
	alarm("PipeDLQDepth",
		"Messages in the Pipe DLQ: a batch of the events stream exhausted the Pipe's retries or record age. Its events are not on the DURABLE lane yet. Run dlq-repair within 18 hours, while the stream still holds them (docs/operations.md, 'Runbook: draining the dead-letter queues').",
		visible(props.Durable.PipeDLQ), 1, 1)
	alarm("ChangeFeedDLQDepth",
		"Messages in the change-feed on-failure queue: a batch of "+tracked+" exhausted changefeed's retries or record age. Run dlq-repair (docs/operations.md, 'Runbook: draining the dead-letter queues').",
		visible(props.ChangeFeed.DLQ), 1, 1)
	alarm("DurableOldestMessage",
		"The oldest message in the DURABLE FIFO queue is over 15 minutes old for 5 minutes: durable-consumer keeps failing a tenant's message group, or is throttled. Check durable-consumer's errors.",
		oldest, oldestMessageThresholdS, 5)
	alarm("DeadLettered",
		"A DURABLE subscription handler failed and its event was dead-lettered (EMF DeadLettered). Its siblings ran. Fix the handler, then run dlq-repair (docs/operations.md, 'Runbook: draining the dead-letter queues').",
		deadLettered, 1, 1)
	alarm("EffectUnknown",
		"A handler's at-most-once effect has an unknown outcome (EMF EffectUnknown, by Subscription and Effect): its delivery died between recording the effect and finishing it, so the effect was not done again and the subscription was dead-lettered. Nothing is lost, but a person must decide: run 'fourlanes effects' to list them, check the provider, then 'fourlanes effects -redo KEY' (it did not happen) or '-done KEY' (it did); dlq-repair's next run replays the dead letter as decided (docs/effects.md).",
		emfQuery("SUM", keys.MetricEffectUnknown, fiveMin), 1, 1)
	alarm("EffectsAwaitingDecision",
		"Dead letters still await a decision on an effect of unknown outcome (EMF UnknownEffectsOpen, by Subscription, from reconcile's walks every 15 minutes): until a person runs 'fourlanes effects -redo KEY' or '-done KEY', those events are not settled for the subscription.",
		emfQuery("MAX", keys.MetricUnknownEffectsOpen, fifteenMin), 1, 1)
	alarm("RepairLeftOpen",
		"dlq-repair finished a run with items it could not fix (EMF RepairOpen, by Source). They stay in their queue or as dead letters; its report and logs give each one's reason. Fix the cause and invoke it again.",
		repairOpen, 1, 1)
	alarm("ChangeFeedRejected",
		"changefeed skipped records of "+tracked+" it cannot represent as change events (EMF ChangeRejected, by Reason: no tenant, id or version, or a number outside I-JSON). Retrying cannot fix them, so the projection misses those versions until the item is written again; read changefeed's ERROR lines.",
		changeRejected, 1, 1)
	alarm("ChainBreaks",
		"reconcile found a broken hash chain (EMF ChainBreaks). The log of a tenant was altered or lost an event. Call reconcile for the tenant to see the first break; this is a data-integrity incident.",
		chainBreaks, 1, 1)

	// Signed checkpoints: an object in the checkpoint bucket that does not
	// verify under the stack's key was not written by reconcile.
	alarm("CheckpointInvalid",
		"reconcile found an object in the checkpoint bucket that does not verify as a checkpoint signed by the stack's KMS key, or names another tenant or seq than its key (EMF CheckpointInvalid, by Log). reconcile passed over it and trusts only signed checkpoints, but someone with write access to the bucket put it there: this is a data-integrity incident. reconcile's ERROR line 'checkpoint object does not verify' names the bucket and key; find the writer in CloudTrail (S3 data events).",
		emfQuery("SUM", keys.MetricCheckpointInvalid, fiveMin), 1, 1)

	// Scheduled rounds: the incremental schedule must cover every tenant
	// well within two hours. Missing data breaches: no invocation reported a
	// round for half an hour (two scheduled runs) means the schedule or the
	// function stopped.
	alarmMissing("ReconcileRoundStalled",
		"The incremental scheduled reconcile round has not completed for 2 hours, or no scheduled reconcile reported for 30 minutes (EMF ReconcileRoundAgeSeconds, Mode incremental; missing data alarms). Either EventBridge Scheduler stopped invoking reconcile (check the ReconcileIncremental schedule and its role), reconcile fails (its Errors alarm and log), or a round over every tenant no longer fits in eight 15-minute runs: reconcile's 'scheduled round' log lines give tenants done and the round's age; raise the function's timeout or run the schedule more often.",
		awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace:     jsii.String(keys.MetricNamespace),
			MetricName:    jsii.String(keys.MetricRoundAge),
			DimensionsMap: &map[string]*string{"Mode": jsii.String("incremental")},
			Statistic:     jsii.String("Maximum"),
			Period:        awscdk.Duration_Minutes(jsii.Number(30)),
		}), roundStalledS, 1, awscloudwatch.TreatMissingData_BREACHING)

	// The daily full round continues hourly until done; one still running
	// 12 hours after it started (12 hourly runs) no longer fits a day.
	// Between rounds nothing is emitted, so silence is normal here.
	alarm("ReconcileFullRoundStalled",
		"The daily from-genesis reconcile round started over 12 hours ago and has not completed (EMF ReconcileRoundAgeSeconds, Mode full). Its hourly continuation (ReconcileFullContinue schedule) keeps failing, or full walks of every tenant no longer fit in 12 runs: reconcile's 'scheduled round' log lines (mode full) give tenants done and any error. Full walks re-prove what incremental walks trust, so fix it before the next 03:00 start; raise the function's timeout or the continuation's frequency if it is only slow.",
		awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace:     jsii.String(keys.MetricNamespace),
			MetricName:    jsii.String(keys.MetricRoundAge),
			DimensionsMap: &map[string]*string{"Mode": jsii.String("full")},
			Statistic:     jsii.String("Maximum"),
			Period:        awscdk.Duration_Hours(jsii.Number(1)),
		}), fullRoundStalledS, 1)

	// The delivery audit: reconcile (every 15 minutes) reports, per DURABLE
	// subscription, the age of the oldest event above its watermark.
	alarm("DeliveryWatermarkStalled",
		"A DURABLE subscription's delivery watermark stopped while events wait: some tenant has an event more than 15 minutes old that the subscription has not settled (EMF UnsettledAgeSeconds, by Subscription, from reconcile). The event was lost between the stream and the handler, or the lane is stuck. Call reconcile for the tenants ('subscriptions' names the watermark, the unsettled count and the oldest unsettled seq), then run dlq-repair, which redelivers from the log whatever is above the watermark.",
		emfQuery("MAX", keys.MetricUnsettledAge, fifteenMin), unsettledAgeThresholdS, 1)

	if props.Heartbeat != nil {
		all = append(all, a.heartbeatAlarms(c, action, alarm))
	}

	if props.Notary != nil {
		for _, n := range props.Notary.alarms() {
			alarmMissing(n.name, n.description, n.metric, n.threshold, n.periods, n.missing)
		}
	}

	// Deletes of protected state-table rows, as they happen (tamper-watch;
	// changes to the log itself are the notary's findings).
	tampered := emfQuery("SUM", keys.MetricTamperDetected, oneMin)
	alarm("TamperDetected",
		"A dead letter, an event's claim or a delivery watermark was deleted from the state table other than by TTL or an honest resolution (EMF TamperDetected, by Change: dead_letter_removed, claim_removed, watermark_removed, unreadable; tamper-watch's ERROR lines name the tenant, the row and what changed). A deleted dead letter is an undelivered event erased; a deleted claim or watermark makes dlq-repair deliver again. Find who wrote (CloudTrail data events on the state table), then restore the rows (docs/operations.md, 'The state table: protected and watched'). Changes to the log itself raise NotaryFinding.",
		tampered, 1, 1)
	tamperIteratorAge := iteratorAge(props.TamperWatch.Function)
	alarm("TamperWatchIteratorAge",
		"tamper-watch is more than a minute behind the state table's stream for 3 minutes: deletes of dead letters, claims and watermarks are not being seen as they happen. Check tamper-watch's errors and its on-failure queue.",
		tamperIteratorAge, tamperLagThresholdMs, 3)

	alarm("TamperWatchDLQDepth",
		"Messages in tamper-watch's on-failure queue: a range of the state table's stream that tamper-watch could not inspect after bisecting, 10 retries or 6 hours (each message names the shard and the first and last sequence numbers). Deletes of dead letters, claims and watermarks in that range went unseen: read the range from the stream (aws dynamodbstreams get-records) while it holds it (24 hours after the write), run pkg/tamper's InspectState on it or look for REMOVE records of dead#, claim# and watermark# rows, and call reconcile for the tenants in it. Then fix what made tamper-watch fail (its Errors alarm and log group).",
		visible(props.TamperWatch.DLQ), 1, 1)

	// A stopped watcher is silent: a disabled or deleted mapping invokes
	// nothing, so no IteratorAge, no error and no finding. The mapping's own
	// metrics (MetricsConfig EventCount) count every record it polls, before
	// its filter; the table's writes are the heartbeat: each one puts a
	// record in the stream, so writes with nothing polled for 10 minutes mean
	// the mapping stopped, and an idle table (no writes) alarms no one.
	// Missing polling data counts as zero (FILL), so it breaches.
	if props.Notary != nil {
		alarm("NotaryStopped",
			"The events table was written for 10 minutes while the notary's event source mapping polled no record of its stream (AWS/Lambda PolledEventCount by EventSourceMappingUUID): the mapping is disabled, deleted or cannot read the stream, so appends are not checked or signed and rewrites of the log go unseen. Who changed it: CloudTrail management events UpdateEventSourceMapping / DeleteEventSourceMapping. Enable it (aws lambda update-event-source-mapping --enabled); it resumes where it stopped while the stream (24 hours) still holds the records, and reports what it missed as 'unseen'. Then call reconcile for every tenant (docs/notary.md, 'Runbook: notary findings').",
			awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
				Expression: jsii.String("IF(FILL(writes, 0) > 0 AND FILL(polled, 0) == 0, 1, 0)"),
				Label:      jsii.String("log written, notary polled nothing"),
				Period:     fiveMin,
				UsingMetrics: &map[string]awscloudwatch.IMetric{
					"writes": logWrites(props.Log, fiveMin),
					"polled": mappingMetric(props.Notary.Mapping, "PolledEventCount", fiveMin),
				},
			}), 1, 2)
	}

	// The same for the state table's stream: its writes (every delivery
	// writes a claim) with nothing polled means the state mapping, or the
	// table's stream, stopped.
	stateWrites := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String("AWS/DynamoDB"),
		MetricName:    jsii.String("ConsumedWriteCapacityUnits"),
		DimensionsMap: &map[string]*string{"TableName": props.Log.State.TableName()},
		Statistic:     jsii.String("Sum"),
		Period:        fiveMin,
	})
	alarm("TamperWatchStateStopped",
		"The state table was written for 10 minutes while tamper-watch's mapping on its stream polled no record (AWS/Lambda PolledEventCount by EventSourceMappingUUID): the mapping is disabled or deleted, or the table's stream was turned off, and deletes of dead letters, claims and watermarks go unseen. Who changed it: CloudTrail management events UpdateEventSourceMapping, DeleteEventSourceMapping, UpdateTable. Enable the mapping (or the stream, and then deploy again so the mapping reads the new stream).",
		awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String("IF(FILL(swrites, 0) > 0 AND FILL(spolled, 0) == 0, 1, 0)"),
			Label:      jsii.String("state written, tamper-watch polled nothing"),
			Period:     fiveMin,
			UsingMetrics: &map[string]awscloudwatch.IMetric{
				"swrites": stateWrites,
				"spolled": mappingMetric(props.TamperWatch.StateMapping, "PolledEventCount", fiveMin),
			},
		}), 1, 2)

	// The same for each tracked table's change-feed mapping: the team's
	// table was written (each write puts a record in its stream) while the
	// mapping polled nothing. The framework does not own these tables, so no
	// heartbeat crosses them; an idle table alarms no one, and the first
	// writes after a stop alarm within 10 minutes.
	for _, entity := range slices.Sorted(maps.Keys(props.ChangeFeed.Mappings)) {
		table, mapping := props.ChangeFeed.Tables[entity], props.ChangeFeed.Mappings[entity]
		if table == nil {
			continue
		}
		alarm("ChangeFeedStopped"+alnum(entity),
			fmt.Sprintf("The tracked table of %s was written for 10 minutes while its change-feed event source mapping polled no record of the table's stream (AWS/Lambda PolledEventCount by EventSourceMappingUUID): the mapping is disabled or deleted, or the table's stream was turned off, so the BEST_EFFORT lane (record.written/record.deleted.%s and its subscriptions) stopped. Who changed it: CloudTrail management events UpdateEventSourceMapping, DeleteEventSourceMapping, UpdateTable. Enable the mapping: it resumes where it stopped while the stream still holds the records (24 hours); past that, rebuild the projections from their source (docs/projections.md).", entity, entity),
			awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
				Expression: jsii.String("IF(FILL(twrites, 0) > 0 AND FILL(tpolled, 0) == 0, 1, 0)"),
				Label:      jsii.String("tracked table written, change feed polled nothing"),
				Period:     fiveMin,
				UsingMetrics: &map[string]awscloudwatch.IMetric{
					"twrites": awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
						Namespace: jsii.String("AWS/DynamoDB"), MetricName: jsii.String("ConsumedWriteCapacityUnits"),
						DimensionsMap: &map[string]*string{"TableName": table.TableName()}, Statistic: jsii.String("Sum"), Period: fiveMin,
					}),
					"tpolled": mappingMetric(mapping, "PolledEventCount", fiveMin),
				},
			}), 1, 2)
	}

	// Every function: errors (a crash, a timeout, a failed batch) and
	// throttles (concurrency exhausted).
	for _, f := range props.functions() {
		name := camel(f.name)
		alarm(name+"Errors",
			fmt.Sprintf("%s returned errors or timed out (AWS/Lambda Errors). Stream and queue sources retry, Function URL callers get a 5xx. Read its log group for the ERROR lines of the failing requests.", f.name),
			f.Fn.MetricErrors(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: fiveMin}), 1, 1)
		alarm(name+"Throttles",
			fmt.Sprintf("%s was throttled (AWS/Lambda Throttles): its reserved concurrency or the account's is exhausted, so its source waits or retries. Check concurrent executions and reserved concurrency.", f.name),
			f.Fn.MetricThrottles(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: fiveMin}), 1, 1)
	}

	// Every dead-letter queue: a message left there too long.
	for _, q := range []struct {
		name  string
		queue awssqs.IQueue
	}{{"DurableDLQ", props.Durable.DLQ}, {"PipeDLQ", props.Durable.PipeDLQ}, {"ChangeFeedDLQ", props.ChangeFeed.DLQ}} {
		alarm(q.name+"OldestMessage",
			fmt.Sprintf("A message has waited in the %s for more than 6 hours: the scheduled dlq-repair (hourly) is not draining it. For the Pipe and change-feed queues the records leave their stream 24 hours after they were written; repair needs them before then. Run dlq-repair and read its report (docs/operations.md, 'Runbook: draining the dead-letter queues').", q.name),
			oldestMessage(q.queue, fiveMin),
			dlqAgeThresholdS, 1)
	}
	alarm("TamperWatchDLQOldestMessage",
		"A range of the state table's stream that tamper-watch could not inspect has waited in its on-failure queue for more than 6 hours: no one has read it yet, and the stream drops its records 24 hours after the write. Follow TamperWatchDLQDepth's steps now, then delete the message.",
		oldestMessage(props.TamperWatch.DLQ, fiveMin), dlqAgeThresholdS, 1)

	// A stopped Pipe publishes nothing, so no failure metric can see it: the
	// log is written (the events table consumes write capacity) while the
	// Pipe handles no event, for 10 minutes.
	pipeStalled := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression:   jsii.String("IF(FILL(writes, 0) > 0 AND FILL(piped, 0) == 0, 1, 0)"),
		Label:        jsii.String("log written, Pipe idle"),
		Period:       fiveMin,
		UsingMetrics: &map[string]awscloudwatch.IMetric{"writes": logWrites(props.Log, fiveMin), "piped": pipeMetric(pipe, "EventCount", "Sum")},
	})
	alarm("PipeStopped",
		"The events table was written for 10 minutes while the events Pipe handled no event: the Pipe is stopped, disabled (AWS disables a Pipe after continuous 4xx errors; see its StateReason), or cannot read the stream. Events are not reaching the DURABLE lane; they stay in the stream for 24 hours. Start or fix the Pipe (aws pipes describe-pipe).",
		pipeStalled, 1, 2)
	alarm("PipeExecutionThrottled",
		"The events Pipe's executions were throttled (AWS/EventBridge/Pipes ExecutionThrottled): the DURABLE lane falls behind. Check the Pipe's concurrency and stream-filter's throttles.",
		pipeMetric(pipe, "ExecutionThrottled", "Sum"), 1, 1)

	projectionAlarms(alarm)
	a.ownerAlarms(props.App, props.Owners, props.NoDestination, topic)
	// Commit → handler done, per subscription (EMF DeliveryLag with the
	// Subscription dimension, from durable-consumer and changefeed).
	// Percentiles need the metric itself: Metrics Insights has none.
	var lagP50, lagP99 []awscloudwatch.IMetric
	for _, sub := range props.Subscriptions {
		p99 := deliveryLag(sub, "p99", fiveMin)
		lagP50 = append(lagP50, deliveryLag(sub, "p50", fiveMin).With(&awscloudwatch.MetricOptions{Label: jsii.String(sub + " p50")}))
		lagP99 = append(lagP99, p99.With(&awscloudwatch.MetricOptions{Label: jsii.String(sub + " p99")}))
		alarm("DeliveryLag"+camel(sub),
			fmt.Sprintf("Subscription %s handles events more than 5 minutes after their commit (p99 of EMF DeliveryLag, commit → handler done) for 15 minutes. Its lane is behind: for a DURABLE subscription check PipeRecordAge, DurableOldestMessage and durable-consumer's errors and duration; for a BEST_EFFORT one, ChangeFeedIteratorAge and changefeed's. A slow handler shows as its span's duration in the trace.", sub),
			p99, lagThresholdMs, 3)
	}

	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &metrics, Width: jsii.Number(8)})
	}
	wide := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &metrics, Width: jsii.Number(12)})
	}
	fns := props.functions()
	var errs, throttles []awscloudwatch.IMetric
	for _, f := range fns {
		errs = append(errs, f.Fn.MetricErrors(&awscloudwatch.MetricOptions{Period: fiveMin}))
		throttles = append(throttles, f.Fn.MetricThrottles(&awscloudwatch.MetricOptions{Period: fiveMin}))
	}
	a.Dashboard = awscloudwatch.NewDashboard(c, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		Widgets: &[]*[]awscloudwatch.IWidget{
			{awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{Title: jsii.String("fourlanes alarms"), Alarms: alarmRefs(all), Width: jsii.Number(24)})},
			{
				graph("Pipe: events and failures", pipeMetric(pipe, "EventCount", "Sum"), pipeMetric(pipe, "ExecutionFailed", "Sum"), pipeMetric(pipe, "ExecutionTimeout", "Sum")),
				graph("Pipe: record age (ms)", pipeRecordAge),
				graph("changefeed: IteratorAge (ms)", changefeedIteratorAge),
			},
			{
				graph("DURABLE queue", visible(props.Durable.Queue), oldest),
				graph("Dead-letter queues: visible", visible(props.Durable.DLQ), visible(props.Durable.PipeDLQ), visible(props.ChangeFeed.DLQ)),
				graph("Deliveries (EMF)", emfQuery("SUM", keys.MetricDelivered, fiveMin), deadLettered, emfQuery("SUM", keys.MetricUnmatched, fiveMin),
					emfQuery("SUM", keys.MetricReplayed, fiveMin), emfQuery("SUM", keys.MetricRepaired, fiveMin)),
				graph("Effects (EMF): done again (possible duplicates), of unknown outcome",
					emfQuery("SUM", keys.MetricEffectRedone, fiveMin), emfQuery("SUM", keys.MetricEffectUnknown, fiveMin)),
			},
			{
				graph("Function errors", errs...),
				graph("Function throttles", throttles...),
				graph("Integrity and best effort (EMF)", chainBreaks, tampered, rejected, emfQuery("SUM", keys.MetricBestEffortFailures, fiveMin), emfQuery("SUM", keys.MetricProjParked, fiveMin)),
			},
			{
				wide("Heartbeats handled on the DURABLE lane, per minute", heartbeatsDelivered()),
				wide("Heartbeat lag (ms): commit → handled, DURABLE lane", heartbeatLag("p50", oneMin).With(&awscloudwatch.MetricOptions{Label: jsii.String("p50")}),
					heartbeatLag("Maximum", oneMin).With(&awscloudwatch.MetricOptions{Label: jsii.String("max")})),
			},
			{
				wide("Delivery lag p50 (ms): commit → handler done, per subscription", lagP50...),
				wide("Delivery lag p99 (ms): commit → handler done, per subscription", lagP99...),
			},
		},
	})
	return a
}

func alarmRefs(alarms []awscloudwatch.IAlarm) *[]interfacesawscloudwatch.IAlarmRef {
	refs := make([]interfacesawscloudwatch.IAlarmRef, 0, len(alarms))
	for _, al := range alarms {
		refs = append(refs, al)
	}
	return &refs
}

// logWrites is the write capacity the events table consumed: every write is
// a record in its stream.
func logWrites(log *EventLog, period awscdk.Duration) awscloudwatch.IMetric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String("AWS/DynamoDB"),
		MetricName:    jsii.String("ConsumedWriteCapacityUnits"),
		DimensionsMap: &map[string]*string{"TableName": log.Events.TableName()},
		Statistic:     jsii.String("Sum"),
		Period:        period,
	})
}

// mappingMetric is one of an event source mapping's own metrics (published
// with MetricsConfig EventCount; AWS Lambda Developer Guide, "Event source
// mapping metrics"), summed.
func mappingMetric(m awslambda.EventSourceMapping, name string, period awscdk.Duration) awscloudwatch.IMetric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String("AWS/Lambda"),
		MetricName:    jsii.String(name),
		DimensionsMap: &map[string]*string{"EventSourceMappingUUID": m.EventSourceMappingId()},
		Statistic:     jsii.String("Sum"),
		Period:        period,
	})
}
