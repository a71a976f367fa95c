package backbone

import (
	"encoding/json"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// LogicalTamperESM pins tamper-watch's mapping: a replaced mapping would
// start again at TRIM_HORIZON and re-report a day of changes.
const LogicalTamperESM = "TamperWatchMapping"

// LogicalTamperDLQ pins tamper-watch's on-failure queue.
const LogicalTamperDLQ = "TamperWatchDLQ"

// LogicalTamperStateESM pins tamper-watch's mapping on the state table's
// stream.
const LogicalTamperStateESM = "TamperWatchStateMapping"

// TamperStateFilterPattern passes the records of the state table's rows
// whose deletion tamper-watch checks: dead letters, event claims and
// watermarks (their OldImage, so MODIFYs of those rows pass too, and the
// handler passes over them).
func TamperStateFilterPattern() string {
	var prefixes []any
	for _, p := range []string{keys.StateDeadPrefix, keys.StateEventClaimPrefix, keys.StateWatermarkPrefix} {
		prefixes = append(prefixes, map[string]any{"prefix": p})
	}
	b, err := json.Marshal(map[string]any{
		"dynamodb": map[string]any{"OldImage": map[string]any{keys.AttrPK: map[string]any{"S": prefixes}}},
	})
	if err != nil {
		panic(err) // a constant map
	}
	return string(b)
}

// tamper-watch's mapping settings.
const (
	// tamperBatchSize: tamper-watch only reads and logs.
	tamperBatchSize = 100
	// tamperMaxRetries: tamper-watch fails a batch only when Lambda cannot
	// hand it the event (a record too large, a crash, a timeout); after
	// bisecting, 10 retries isolate the record that does it.
	tamperMaxRetries = 10
	// tamperMaxRecordAgeS: a record still not inspected after 6 hours goes
	// to the on-failure queue, with 18 of the stream's 24 hours left to read
	// it by hand.
	tamperMaxRecordAgeS = 6 * 3600
)

// TamperFilterPattern passes exactly the MODIFY and REMOVE records of the
// events table: they, and only they, carry an OldImage (the stream is
// NEW_AND_OLD_IMAGES), and every image holds the key. AWS's Lambda guide
// says DynamoDB mappings filter on the "dynamodb" key only ("Using event
// filtering with a DynamoDB event source"), so the filter does not rely on
// eventName.
func TamperFilterPattern() string {
	b, err := json.Marshal(map[string]any{
		"dynamodb": map[string]any{
			"OldImage": map[string]any{
				keys.AttrTenant: map[string]any{"S": []any{map[string]any{"exists": true}}},
			},
		},
	})
	if err != nil {
		panic(err) // a constant map
	}
	return string(b)
}

// TamperWatchProps wires tamper-watch to the log.
type TamperWatchProps struct {
	Log           *EventLog
	Functions     FunctionOptions
	RemovalPolicy awscdk.RemovalPolicy
	// QueueKey, when set, encrypts the on-failure queue.
	QueueKey awskms.IKey
}

// TamperWatch is the second reader of the events table's stream (beside the
// Pipe; DynamoDB allows two per shard): a Lambda mapping that hands every
// MODIFY and REMOVE to tamper-watch, which logs each change to the log at
// ERROR and counts it (EMF TamperDetected). The Pipe's filter drops those
// records, so this path must not go through it.
//
// A record tamper-watch cannot read is a finding, never a failed batch
// (pkg/tamper). A batch fails only if Lambda cannot invoke it with the
// records at all; the mapping bisects it, retries 10 times and gives up on a
// record after 6 hours, sending the range's metadata (shard, first and last
// sequence number) to DLQ, whose depth alarm pages: those records were not
// inspected, and one poison record no longer blinds it for a day.
type TamperWatch struct {
	constructs.Construct
	Function Function
	Mapping  awslambda.EventSourceMapping
	// StateMapping reads the state table's stream (pkg/tamper InspectState).
	StateMapping awslambda.EventSourceMapping
	// DLQ is the mapping's on-failure destination (standard queue; only
	// tamper-watch's role may send to it).
	DLQ awssqs.Queue
}

// NewTamperWatch creates the function and its mapping.
func NewTamperWatch(scope constructs.Construct, id string, props *TamperWatchProps) *TamperWatch {
	c := constructs.NewConstruct(scope, jsii.String(id))
	fn := newFunction(c, "TamperWatch", props.Functions, functionSpec{
		name:        keys.FnTamperWatch,
		description: "fourlanes tamper-watch: every MODIFY/REMOVE of the insert-only log, logged and counted",
		timeout:     awscdk.Duration_Seconds(jsii.Number(30)),
		memoryMB:    128,
		integrity:   true,
	})
	allow(fn.Role, streamRead, props.Log.Events.TableStreamArn(), props.Log.State.TableStreamArn())
	// A deleted dead letter is honest only if its claim says completed.
	allow(fn.Role, []string{"dynamodb:GetItem"}, props.Log.State.TableArn())
	fn.Fn.AddEnvironment(jsii.String(keys.EnvStateTable), props.Log.State.TableName(), nil)
	listStreams(fn.Role)

	queueEnc, queueKey := queueEncryption(props.QueueKey)
	dlq := awssqs.NewQueue(c, jsii.String("DLQ"), &awssqs.QueueProps{
		Encryption:          queueEnc,
		EncryptionMasterKey: queueKey,
		EnforceSSL:          jsii.Bool(true),
		RetentionPeriod:     awscdk.Duration_Days(jsii.Number(14)),
		RemovalPolicy:       props.RemovalPolicy,
	})
	pin(dlq, props.Log.LogicalIDPrefix(), LogicalTamperDLQ)
	suppressIsDLQ(dlq, "It is tamper-watch's on-failure destination: it receives metadata of stream ranges tamper-watch could not inspect; a person reads them from the stream.")
	onlyTheseSend(dlq, fn.Role)

	mapping := awslambda.NewEventSourceMapping(c, jsii.String("Mapping"), &awslambda.EventSourceMappingProps{
		Target:                fn.Fn,
		EventSourceArn:        props.Log.Events.TableStreamArn(),
		StartingPosition:      awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:             jsii.Number(tamperBatchSize),
		BisectBatchOnError:    jsii.Bool(true),
		RetryAttempts:         jsii.Number(tamperMaxRetries),
		MaxRecordAge:          awscdk.Duration_Seconds(jsii.Number(tamperMaxRecordAgeS)),
		ParallelizationFactor: jsii.Number(1),
		OnFailure:             awslambdaeventsources.NewSqsDlq(dlq),
		Filters: &[]*map[string]interface{}{
			{"pattern": jsii.String(TamperFilterPattern())},
		},
		// PolledEventCount, before the filter: the TamperWatchStopped alarm.
		MetricsConfig: &awslambda.MetricsConfig{Metrics: &[]awslambda.MetricType{awslambda.MetricType_EVENT_COUNT}},
	})
	pin(mapping, props.Log.LogicalIDPrefix(), LogicalTamperESM)
	mapping.Node().AddDependency(fn.Role)

	state := awslambda.NewEventSourceMapping(c, jsii.String("StateMapping"), &awslambda.EventSourceMappingProps{
		Target:                fn.Fn,
		EventSourceArn:        props.Log.State.TableStreamArn(),
		StartingPosition:      awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:             jsii.Number(tamperBatchSize),
		BisectBatchOnError:    jsii.Bool(true),
		RetryAttempts:         jsii.Number(tamperMaxRetries),
		MaxRecordAge:          awscdk.Duration_Seconds(jsii.Number(tamperMaxRecordAgeS)),
		ParallelizationFactor: jsii.Number(1),
		OnFailure:             awslambdaeventsources.NewSqsDlq(dlq),
		Filters:               &[]*map[string]interface{}{{"pattern": jsii.String(TamperStateFilterPattern())}},
		MetricsConfig:         &awslambda.MetricsConfig{Metrics: &[]awslambda.MetricType{awslambda.MetricType_EVENT_COUNT}},
	})
	pin(state, props.Log.LogicalIDPrefix(), LogicalTamperStateESM)
	state.Node().AddDependency(fn.Role)
	return &TamperWatch{Construct: c, Function: fn, Mapping: mapping, StateMapping: state, DLQ: dlq}
}
