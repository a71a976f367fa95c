// Package repair is dlq-repair's logic: on each invocation it drains what
// the lanes could not finish, by re-reading the source of truth, and answers
// a report of what it fixed and what stays open.
//
// Sources, in order, each given an equal share of what remains of the run's
// time budget (time one leaves unused passes to the next):
//
//	durable_dlq     the DURABLE lane's FIFO DLQ. Each body names an event
//	                (tenant, seq, id); the event is re-read from the log and
//	                must match the body (a difference is a loud error and the
//	                message stays open: the two copies disagree and reconcile
//	                must decide). The log's copy goes through Deliver, which
//	                is idempotent per (event, subscription); the message is
//	                deleted once every subscription is completed or
//	                dead-lettered.
//	pipe_dlq        the events Pipe's DLQ and
//	changefeed_dlq  the change feed's on-failure queue: metadata only (a
//	                DDBStreamBatchInfo: stream ARN, shard, first and last
//	                sequence number). The records are fetched from the stream
//	                (AT_SEQUENCE_NUMBER, then GetRecords up to the last one)
//	                while it retains them. Event rows are then re-read from
//	                the log and delivered; tracked-table records are run
//	                through the change feed again (applied by version). When
//	                the stream no longer has them (trimmed after 24 h, or the
//	                stream is gone), the items are re-read from their tables.
//	                Event rows: the message cannot say which tenants' events
//	                the lost batch held, so every tenant is swept from its
//	                delivery watermarks to its head (as the unsettled source
//	                does, at once), and the message is deleted only when every
//	                DURABLE subscription of every tenant is settled through
//	                the head read during the sweep, which bounds every event
//	                committed before the message was sent. Tracked items: a
//	                Scan of the whole table, each item applied at its current
//	                version and each Reapplier (a projection's Repair) closing
//	                the gaps its lost versions left. Deletes in that window
//	                cannot be recovered from a table; the report says so.
//	dead_letters    dead-lettered subscriptions (tenant-scoped rows in the
//	                state table): the event is re-read from the log by tenant
//	                and seq and that one subscription is replayed.
//
//	unsettled       for each tenant and DURABLE subscription, the events above
//	                its delivery watermark and at or below the head, once the
//	                first of them is older than Config.UnsettledAfter: they are
//	                redelivered from the log in seq order and the watermarks
//	                moved (unsettled.go). This finds what no queue holds, such
//	                as events a wrong Pipe filter dropped.
//
// A message is deleted only when every event it stands for is settled for
// every DURABLE subscription (completed or dead-lettered).
//
// Nothing is deleted unread and nothing is deleted unfixed. A message that
// stays open is left in its queue, invisible for the rest of the run so the
// run does not spin on it; on the FIFO DLQ, where a message left in flight
// would hide every later message of its tenant, it is re-parked instead: the
// same body is sent again to the queue (same group, a new deduplication id)
// and only then is the original deleted. The report names each open item and
// why.
//
// The Pipe DLQ's body shape is not documented (AWS-FACTS §1, unconfirmed).
// Both a Lambda on-failure record ({"DDBStreamBatchInfo": {...}, ...}) and a
// bare batch-info object are accepted; any other body stays in the queue
// with the reason "unrecognised body".
//
// # Report (JSON)
//
//	{
//	  "started_at": "2026-11-29T20:00:00Z", "finished_at": "…", "duration_ms": 812,
//	  "complete": true,          // every requested source drained within the budget
//	  "fixed": 3, "open": 1,
//	  "sources": {
//	    "durable_dlq":    {"seen": 2, "fixed": 1, "open": 1, "complete": true,
//	                       "items": [ {item}, … ], "items_omitted": 0},
//	    "pipe_dlq":       {…},
//	    "changefeed_dlq": {…},
//	    "dead_letters":   {…}
//	  }
//	}
//
// An item:
//
//	{"source": "durable_dlq", "outcome": "fixed" | "open", "reason": "…",
//	 "message_id": "…", "tenant": "t1", "event_id": "…", "seq": 7,
//	 "subscription": "…",                       // dead letters
//	 "subscriptions": {"notifications.order-email": "completed"},
//	 "stream": {"arn": "…", "shard": "…", "start": "…", "end": "…"},
//	 "via": "log" | "stream" | "table", "records": 3, "error": "…"}
//
// Items are listed up to Config.MaxItems per source; counts are always complete.
package repair
