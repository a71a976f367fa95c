// Package backbone is the fourlanes CDK construct library: one construct per
// concern, and NewBackbone, which composes them in a team's own stack around
// its application (app.Application) and its tables. The applications
// under examples/ each build their stack with it.
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
//   - every table has deletion protection; every alarm notifies the stack's
//     topic;
//   - stateful resources (tables, queues) keep pinned logical IDs and are
//     retained on delete unless Props.RemovalPolicy says otherwise;
//   - each function that runs a lane gets the environment of the modules
//     bound there and read/write on their tables, nothing more; what the
//     application needs and Props lack fails the synthesis, naming it;
//   - constructs read nothing from the environment: the app (infra/main.go)
//     turns context values into Props.
package backbone
