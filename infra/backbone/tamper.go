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

// TamperWatchProps wires tamper-watch to the log's state table.
type TamperWatchProps struct {
	Log           *EventLog
	Functions     FunctionOptions
	RemovalPolicy awscdk.RemovalPolicy
	// QueueKey, when set, encrypts the on-failure queue.
	QueueKey awskms.IKey
}

// TamperWatch reads the state table's stream only: a Lambda mapping that
// hands it the REMOVEs of dead letters, claims and watermarks, which it
// logs at ERROR and counts (EMF TamperDetected) when no honest write made
// them (pkg/tamper InspectState).
//
// It does not read the events table's stream. DynamoDB Streams serves at
// most two readers per shard (more "may result in request throttling",
// DynamoDB API Reference, LimitExceededException), and those two are the
// Pipe (delivery) and the notary, which reports every MODIFY and REMOVE of
// the log as a finding (NotaryFinding: rewrite, removed, rollback,
// row_changed, unreadable).
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
	// StateMapping reads the state table's stream (pkg/tamper InspectState).
	StateMapping awslambda.EventSourceMapping
	// DLQ is the mapping's on-failure destination (standard queue; only
	// tamper-watch's role may send to it).
	DLQ awssqs.Queue
}

// NewTamperWatch creates the function and its mapping on the state
// table's stream.
func NewTamperWatch(scope constructs.Construct, id string, props *TamperWatchProps) *TamperWatch {
	c := constructs.NewConstruct(scope, jsii.String(id))
	fn := newFunction(c, "TamperWatch", props.Functions, functionSpec{
		name:        keys.FnTamperWatch,
		description: "fourlanes tamper-watch: deletes of dead letters, claims and watermarks in the state table, logged and counted",
		timeout:     awscdk.Duration_Seconds(jsii.Number(30)),
		memoryMB:    128,
		integrity:   true,
	})
	allow(fn.Role, streamRead, props.Log.State.TableStreamArn())
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
	suppressIsDLQ(dlq, "It is tamper-watch's on-failure destination: it receives metadata of state-stream ranges tamper-watch could not inspect; a person reads them from the stream.")
	onlyTheseSend(dlq, fn.Role)

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
	return &TamperWatch{Construct: c, Function: fn, StateMapping: state, DLQ: dlq}
}
