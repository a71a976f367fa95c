package backbone

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awspipes"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// PipesNamespace is where EventBridge Pipes publish their metrics (dimension
// PipeName); the CloudWatch "enriched metrics" reference lists it.
const PipesNamespace = "AWS/EventBridge/Pipes"

// The metrics below are the ones the alarms watch: Backbone's Metric methods
// and NewAlarms build them here, so a graph of a team's and an alarm of the
// backbone's read the same series.

// minutes is a period (a function, not a package variable: a jsii call at
// init would start the JavaScript runtime in every program that links the
// package).
func minutes(n float64) awscdk.Duration { return awscdk.Duration_Minutes(jsii.Number(n)) }

// iteratorAge is a stream consumer's AWS/Lambda IteratorAge (milliseconds),
// its maximum over a minute.
func iteratorAge(f Function) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String("AWS/Lambda"),
		MetricName:    jsii.String("IteratorAge"),
		DimensionsMap: &map[string]*string{"FunctionName": f.Fn.FunctionName()},
		Statistic:     jsii.String("Maximum"),
		Period:        minutes(1),
	})
}

// pipeMetric is one of the events Pipe's metrics over five minutes.
func pipeMetric(pipe awspipes.CfnPipe, name, stat string) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(PipesNamespace),
		MetricName:    jsii.String(name),
		DimensionsMap: &map[string]*string{"PipeName": pipe.Ref()},
		Statistic:     jsii.String(stat),
		Period:        minutes(5),
	})
}

// visible is a queue's ApproximateNumberOfMessagesVisible, its maximum over
// a minute.
func visible(q awssqs.IQueue) awscloudwatch.Metric {
	return q.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: minutes(1)})
}

// oldestMessage is a queue's ApproximateAgeOfOldestMessage (seconds), its
// maximum over period.
func oldestMessage(q awssqs.IQueue, period awscdk.Duration) awscloudwatch.Metric {
	return q.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: period})
}

// emfQuery is a Metrics Insights query over an EMF metric, whatever the
// dimensions it is counted with: it reads the metric's Service series (one
// per function), which every function writes beside the metric's own
// dimension set (obs.PerInvocation). FROM the bare namespace would see both
// sets and SUM each value twice.
func emfQuery(stat, metric string, period awscdk.Duration) awscloudwatch.MathExpression {
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression:   jsii.String(EMFQuery(stat, metric)),
		Label:        jsii.String(metric),
		Period:       period,
		UsingMetrics: &map[string]awscloudwatch.IMetric{},
	})
}

// EMFQuery is the Metrics Insights expression emfQuery alarms and graphs on.
// It reads the namespace of the account and region, not of one backbone:
// every backbone's functions write there.
func EMFQuery(stat, metric string) string {
	return fmt.Sprintf(`SELECT %s(%s) FROM SCHEMA(%q, %s)`, stat, metric, keys.MetricNamespace, obs.ServiceDimension)
}

// emfQueryBy is emfQuery over the metric's own dimension set, one time
// series per combination of dims: an alarm on it has each as a contributor,
// so its state reason names the dimension values that breached.
func emfQueryBy(stat, metric string, period awscdk.Duration, dims ...string) awscloudwatch.MathExpression {
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression:   jsii.String(EMFQueryBy(stat, metric, dims...)),
		Label:        jsii.String(metric),
		Period:       period,
		UsingMetrics: &map[string]awscloudwatch.IMetric{},
	})
}

// EMFQueryBy is the Metrics Insights expression emfQueryBy alarms on:
// SELECT stat(metric) FROM SCHEMA(namespace, dims…) GROUP BY dims….
func EMFQueryBy(stat, metric string, dims ...string) string {
	d := strings.Join(dims, ", ")
	return fmt.Sprintf(`SELECT %s(%s) FROM SCHEMA(%q, %s) GROUP BY %s`, stat, metric, keys.MetricNamespace, d, d)
}

// withMetric applies opts (nil: none) to m, as CDK's own metricX methods
// do.
func withMetric(m awscloudwatch.Metric, opts *awscloudwatch.MetricOptions) awscloudwatch.IMetric {
	if opts == nil {
		return m
	}
	return m.With(opts)
}

// withExpression applies opts (nil: none) to a math expression.
func withExpression(e awscloudwatch.MathExpression, opts *awscloudwatch.MathExpressionOptions) awscloudwatch.IMetric {
	if opts == nil {
		return e
	}
	return e.With(opts)
}

// MetricIteratorAge is how far changefeed is behind the tracked tables'
// streams: its AWS/Lambda IteratorAge in milliseconds, Maximum over one
// minute unless opts say otherwise (the ChangeFeedIteratorAge alarm's
// metric).
func (b *Backbone) MetricIteratorAge(opts *awscloudwatch.MetricOptions) awscloudwatch.IMetric {
	return withMetric(iteratorAge(b.ChangeFeed.Changefeed), opts)
}

// MetricTamperWatchIteratorAge is how far tamper-watch is behind the state
// table's stream (AWS/Lambda IteratorAge, milliseconds, Maximum over one minute).
func (b *Backbone) MetricTamperWatchIteratorAge(opts *awscloudwatch.MetricOptions) awscloudwatch.IMetric {
	return withMetric(iteratorAge(b.Tamper.Function), opts)
}

// MetricPipeRecordAge is the DURABLE lane's lag: the age in milliseconds of
// the oldest stream record in each Pipe batch, as stream-filter measures it
// (EMF PipeRecordAge, MAX over one minute; Pipes publish no IteratorAge).
// The statistic is the query's own; opts set the label, period and the
// like.
func (b *Backbone) MetricPipeRecordAge(opts *awscloudwatch.MathExpressionOptions) awscloudwatch.IMetric {
	return withExpression(emfQuery("MAX", keys.MetricPipeRecordAge, minutes(1)), opts)
}

// MetricPipeExecutionFailed counts the events Pipe's failed executions
// (AWS/EventBridge/Pipes ExecutionFailed, Sum over five minutes).
func (b *Backbone) MetricPipeExecutionFailed(opts *awscloudwatch.MetricOptions) awscloudwatch.IMetric {
	return withMetric(pipeMetric(b.Durable.Pipe, "ExecutionFailed", "Sum"), opts)
}

// MetricDLQDepth is the number of messages visible in the backbone's three
// dead-letter queues together (the DURABLE FIFO DLQ, the Pipe DLQ and the
// change-feed on-failure queue; each one's Maximum over one minute, summed).
// Anything above zero needs dlq-repair. One queue's depth is its own
// MetricApproximateNumberOfMessagesVisible (Durable.DLQ, Durable.PipeDLQ,
// ChangeFeed.DLQ).
func (b *Backbone) MetricDLQDepth(opts *awscloudwatch.MathExpressionOptions) awscloudwatch.IMetric {
	e := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String("FILL(durable, 0) + FILL(pipe, 0) + FILL(changefeed, 0)"),
		Label:      jsii.String("dead-letter queues: visible"),
		Period:     minutes(1),
		UsingMetrics: &map[string]awscloudwatch.IMetric{
			"durable": visible(b.Durable.DLQ), "pipe": visible(b.Durable.PipeDLQ), "changefeed": visible(b.ChangeFeed.DLQ),
		},
	})
	return withExpression(e, opts)
}

// MetricOldestMessage is the age in seconds of the oldest message in the
// DURABLE FIFO queue (ApproximateAgeOfOldestMessage, Maximum over one
// minute): a tenant's message group blocked behind a failing message.
func (b *Backbone) MetricOldestMessage(opts *awscloudwatch.MetricOptions) awscloudwatch.IMetric {
	return withMetric(oldestMessage(b.Durable.Queue, minutes(1)), opts)
}

// MetricUnsettledEvents is the number of events above the DURABLE
// subscriptions' delivery watermarks (EMF UnsettledEvents, which reconcile
// reports per subscription for each tenant it walks; SUM over fifteen
// minutes, the incremental schedule's period).
func (b *Backbone) MetricUnsettledEvents(opts *awscloudwatch.MathExpressionOptions) awscloudwatch.IMetric {
	return withExpression(emfQuery("SUM", keys.MetricUnsettledEvents, minutes(15)), opts)
}

// MetricUnsettledAge is the age in seconds of the oldest event a DURABLE
// subscription has not settled (EMF UnsettledAgeSeconds, MAX over fifteen
// minutes): the DeliveryWatermarkStalled alarm's metric.
func (b *Backbone) MetricUnsettledAge(opts *awscloudwatch.MathExpressionOptions) awscloudwatch.IMetric {
	return withExpression(emfQuery("MAX", keys.MetricUnsettledAge, minutes(15)), opts)
}

// MetricDeadLettered counts the DURABLE deliveries whose handler failed and
// were dead-lettered (EMF DeadLettered, SUM over five minutes).
func (b *Backbone) MetricDeadLettered(opts *awscloudwatch.MathExpressionOptions) awscloudwatch.IMetric {
	return withExpression(emfQuery("SUM", keys.MetricDeadLettered, minutes(5)), opts)
}

// MetricUndeclaredEvents counts the events stream-filter passed although
// its build does not declare their type or schema version (EMF
// UndeclaredEvents, SUM over five minutes), one time series per Type and
// Version: a producer deployed before the backbone.
func (b *Backbone) MetricUndeclaredEvents(opts *awscloudwatch.MathExpressionOptions) awscloudwatch.IMetric {
	return withExpression(emfQueryBy("SUM", keys.MetricUndeclaredEvents, minutes(5), "Type", "Version"), opts)
}

// MetricChainBreaks counts the broken hash chains reconcile found (EMF
// ChainBreaks, SUM over five minutes): a data-integrity incident.
func (b *Backbone) MetricChainBreaks(opts *awscloudwatch.MathExpressionOptions) awscloudwatch.IMetric {
	return withExpression(emfQuery("SUM", keys.MetricChainBreaks, minutes(5)), opts)
}

// MetricTamperDetected counts the changes to the insert-only log that
// tamper-watch reported (EMF TamperDetected, SUM over one minute).
func (b *Backbone) MetricTamperDetected(opts *awscloudwatch.MathExpressionOptions) awscloudwatch.IMetric {
	return withExpression(emfQuery("SUM", keys.MetricTamperDetected, minutes(1)), opts)
}

// deliveryLag is EMF DeliveryLag of one subscription (commit → handler done,
// milliseconds) at stat ("p50", "p99").
func deliveryLag(subscription, stat string, period awscdk.Duration) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(keys.MetricNamespace),
		MetricName:    jsii.String(keys.MetricDeliveryLag),
		DimensionsMap: &map[string]*string{"Subscription": jsii.String(subscription)},
		Statistic:     jsii.String(stat),
		Period:        period,
	})
}

// MetricDeliveryLag is one subscription's delivery lag: commit → handler
// done in milliseconds (EMF DeliveryLag by Subscription, from
// durable-consumer and changefeed), p99 over 5 minutes unless opts says
// otherwise.
func (b *Backbone) MetricDeliveryLag(subscription string, opts *awscloudwatch.MetricOptions) awscloudwatch.IMetric {
	return withMetric(deliveryLag(subscription, "p99", minutes(5)), opts)
}
