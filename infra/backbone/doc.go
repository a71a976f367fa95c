// Package backbone is the fourlanes CDK construct library: one construct per
// concern, and Backbone (New(scope, id, props)), the construct that composes
// them in a team's own stack around its application (app.Application) and
// its tables. The applications under examples/ each build their stack with
// it. A Backbone grants what its users need (GrantEmit, GrantReconcile,
// GrantRead), names what an operator watches (MetricIteratorAge,
// MetricDLQDepth, MetricUnsettledEvents, …), and checks its own resources
// with cdk-nag while it reports, not fails, the findings on the team's.
//
//	EventLog     events table (the insert-only log), state table, emitter policy
//	DurableLane  Pipe (stream → filter → stream-filter → FIFO), FIFO + DLQ,
//	             Pipe DLQ, durable-consumer and its queue mapping
//	ChangeFeed   change-feed table, changefeed and a stream mapping on each
//	             tracked entity's table (the application's), on-failure queue
//	Reconcile    reconcile behind an AWS_IAM Function URL, caller policy
//	Repair       dlq-repair with access to exactly what it repairs
//	TamperWatch  tamper-watch and its mapping on the events stream (MODIFY
//	             and REMOVE only): every change to the log, logged and counted
//	Checkpoints  the KMS signing key and Object Lock bucket of reconcile's
//	             signed checkpoints
//	Alarms       the alarm topic (optional email subscription), alarms that
//	             all notify it, and a dashboard
//	Schedules    EventBridge Scheduler: reconcile (incremental every 15
//	             minutes, full daily) and dlq-repair (hourly)
//
// It promises:
//   - every name shared with the runtime (tables, attributes, environment
//     variables, functions, metrics) comes from pkg/keys;
//   - no policy lets anyone update, delete, batch-write or PartiQL-write the
//     events table, and its resource policy denies those (and DeleteTable)
//     to every principal; emitters get exactly what Emit needs, its writes
//     only inside TransactWriteItems; what PutItem can still do, tamper-watch
//     reports;
//   - every table has deletion protection; every alarm notifies the
//     backbone's topic (Props.AlarmTopic, or its own);
//   - stateful resources (tables, queues, the Pipe, the stream mappings, the
//     alarm topic, the checkpoint key and bucket) keep pinned logical IDs,
//     after the backbone's prefix (keys.BackbonePrefix: "" for the id
//     UnprefixedID, which keeps a stack deployed before New had ids as it
//     was), and are retained on delete unless Props.RemovalPolicy says
//     otherwise; outputs are named the same way, so a stack holds several
//     backbones;
//   - each function that runs a lane gets the environment of the modules
//     bound there and read/write on their tables, nothing more; what the
//     application needs and Props lack fails the synthesis, naming it;
//   - constructs read nothing from the environment: the app (an example's
//     infra/main.go) turns context values into Props.
package backbone
