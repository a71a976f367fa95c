package backbone

import (
	"encoding/json"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// LogicalTamperESM pins tamper-watch's mapping: a replaced mapping would
// start again at TRIM_HORIZON and re-report a day of changes.
const LogicalTamperESM = "TamperWatchMapping"

// tamperBatchSize: tamper-watch only reads and logs.
const tamperBatchSize = 100

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
	Log       *EventLog
	Functions FunctionOptions
}

// TamperWatch is the second reader of the events table's stream (beside the
// Pipe; DynamoDB allows two per shard): a Lambda mapping that hands every
// MODIFY and REMOVE to tamper-watch, which logs each change to the log at
// ERROR and counts it (EMF TamperDetected). The Pipe's filter drops those
// records, so this path must not go through it.
//
// It never drops a record: no retry limit, no record age, no on-failure
// destination. A failing tamper-watch holds its shards (the Pipe reads on)
// and its Errors and IteratorAge alarms page.
type TamperWatch struct {
	constructs.Construct
	Function Function
	Mapping  awslambda.EventSourceMapping
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
	allow(fn.Role, streamRead, props.Log.Events.TableStreamArn())
	listStreams(fn.Role)

	mapping := awslambda.NewEventSourceMapping(c, jsii.String("Mapping"), &awslambda.EventSourceMappingProps{
		Target:           fn.Fn,
		EventSourceArn:   props.Log.Events.TableStreamArn(),
		StartingPosition: awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:        jsii.Number(tamperBatchSize),
		Filters: &[]*map[string]interface{}{
			{"pattern": jsii.String(TamperFilterPattern())},
		},
		// PolledEventCount, before the filter: the TamperWatchStopped alarm.
		MetricsConfig: &awslambda.MetricsConfig{Metrics: &[]awslambda.MetricType{awslambda.MetricType_EVENT_COUNT}},
	})
	pin(mapping, props.Log.LogicalIDPrefix(), LogicalTamperESM)
	mapping.Node().AddDependency(fn.Role)
	return &TamperWatch{Construct: c, Function: fn, Mapping: mapping}
}
