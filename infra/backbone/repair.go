package backbone

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// RepairProps names what dlq-repair repairs.
type RepairProps struct {
	Log        *EventLog
	Durable    *DurableLane
	ChangeFeed *ChangeFeed
	Functions  FunctionOptions
	// ReservedConcurrency: 1 keeps two drains from racing over the same
	// messages; nil leaves the function unreserved.
	ReservedConcurrency *float64
}

// Repair is dlq-repair: it drains the FIFO DLQ, the Pipe DLQ and the
// change-feed on-failure queue, and the dead-lettered subscriptions, by
// re-reading the source of truth (the log, the tracked tables and their
// streams while they still hold the records) and redelivering.
type Repair struct {
	constructs.Construct
	Function Function
}

// NewRepair creates dlq-repair with access to exactly the queues and tables
// it repairs.
func NewRepair(scope constructs.Construct, id string, props *RepairProps) *Repair {
	c := constructs.NewConstruct(scope, jsii.String(id))
	log, durable, feed := props.Log, props.Durable, props.ChangeFeed
	fn := newFunction(c, "DLQRepair", props.Functions, functionSpec{
		name:        keys.FnDLQRepair,
		description: "fourlanes dlq-repair: drain dead-letter queues and dead letters from the source of truth",
		timeout:     awscdk.Duration_Minutes(jsii.Number(5)),
		memoryMB:    512,
		env: map[string]*string{
			keys.EnvDurableDLQURL:    durable.DLQ.QueueUrl(),
			keys.EnvPipeDLQURL:       durable.PipeDLQ.QueueUrl(),
			keys.EnvChangeFeedDLQURL: feed.DLQ.QueueUrl(),
			keys.EnvEventsTable:      log.Events.TableName(),
			keys.EnvStateTable:       log.State.TableName(),
			keys.EnvChangeFeedTable:  feed.ChangeFeed.TableName(),
		},
		reserved: props.ReservedConcurrency,
	})
	r := fn.Role
	allow(r, queueDrain, durable.DLQ.QueueArn(), durable.PipeDLQ.QueueArn(), feed.DLQ.QueueArn())
	allow(r, tableRead, log.Events.TableArn())
	// The stream ARNs come from the dead-letter metadata; the stream grant is
	// on the current stream of each table only (Track adds the tracked ones).
	allow(r, streamRead, log.Events.TableStreamArn())
	allow(r, concat(tableRead, tableWrite), log.State.TableArn())
	// The tenants with dead letters come from the dead-letter index.
	allow(r, []string{"dynamodb:Query"}, log.DeadLetterIndexArn())
	allow(r, tableWrite, feed.ChangeFeed.TableArn())
	return &Repair{Construct: c, Function: fn}
}

// Track lets dlq-repair re-read a tracked entity's items and, while the
// stream still holds them, the records of a dead-lettered change-feed batch:
// the table's name under the entity's TableEnv, read on the table, stream
// read on its current stream.
func (rp *Repair) Track(e catalog.Entity, table awsdynamodb.ITable) {
	fn := rp.Function
	fn.Fn.AddEnvironment(jsii.String(e.TableEnv), table.TableName(), nil)
	allow(fn.Role, tableRead, table.TableArn())
	allow(fn.Role, streamRead, table.TableStreamArn())
}
