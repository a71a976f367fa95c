// Package keys names every table, key, attribute, environment variable and
// metric that both the runtime code and the CDK app (infra/) refer to. It is
// the one place these strings are spelled, so a test schema cannot drift from
// the deployed one.
package keys

// Events table: the per-tenant, hash-chained, insert-only log.
// Partition key = AttrTenant (S), sort key = AttrSeq (N). Seq 0 is the head row.
const (
	AttrTenant        = "tenant_id"      // partition key, S; also the FIFO message group
	AttrSeq           = "seq"            // sort key, N; >= 1 for events, HeadSeq for the head row
	AttrKind          = "kind"           // S: KindEvent or KindHead
	AttrID            = "id"             // S: event id (UUIDv7)
	AttrType          = "type"           // S: "<module>.<name>"
	AttrOccurredAt    = "occurred_at"    // S: RFC 3339, UTC
	AttrSchemaVersion = "schema_version" // N
	AttrCorrelationID = "correlation_id" // S, absent when unset
	AttrCausationID   = "causation_id"   // S, absent when unset
	AttrActorID       = "actor_id"       // S, absent when unset
	AttrTraceParent   = "traceparent"    // S: W3C trace context of the emitting request, absent when none; not hashed
	AttrPayload       = "payload"        // M
	AttrPrevHash      = "prev_hash"      // S: lowercase hex
	AttrHash          = "hash"           // S: lowercase hex

	// Head row only.
	AttrLastSeq     = "last_seq"      // N
	AttrLastHash    = "last_hash"     // S
	AttrLastEventID = "last_event_id" // S: id of the event committed with this head version
	AttrDedupID     = "dedup_id"      // S: derived from the event id, never equal to it
	// AttrShards: the chain shards of the chain's tenant (2 to 32) that the emitter which
	// wrote this head version was configured with; absent when it had one chain for the
	// tenant. An emitter configured with fewer refuses to write (pkg/eventstore).
	AttrShards = "shards" // N

	KindEvent = "event"
	KindHead  = "head"
	// KindIdempotency marks a row that remembers an emit's idempotency key (negative seq,
	// written in the emit's transaction; pkg/eventstore).
	KindIdempotency = "idempotency"

	// HeadSeq is the sort key of a tenant's head row.
	HeadSeq = 0
)

// State table: claims, dead letters, reconcile checkpoints and parked
// projection records. Everything that is updated lives here, so the log stays
// insert-only. Partition key = AttrPK (S), sort key = AttrSK (S); TTL on AttrExpiresAt.
const (
	AttrPK        = "pk"
	AttrSK        = "sk"
	AttrExpiresAt = "expires_at" // N, epoch seconds; the table's TTL attribute
)

// Change-feed table: one row per change event, with a TTL. Never the log.
// Partition key = AttrPK (S), sort key = AttrSK (S); TTL on AttrExpiresAt.

// AttrVersion is the version attribute of a change-feed row, and the name
// an application may reuse for its own items' version (each tracked entity
// declares its attribute in catalog.Entity.VersionAttr). An application's
// tables and their keys are its own (examples/orders/orders, .../search).
const AttrVersion = "version"

// Environment variables the functions read. The CDK app sets them; the local
// twin resolves them to local resources.
const (
	EnvEventsTable      = "EVENTS_TABLE"
	EnvStateTable       = "STATE_TABLE"
	EnvChangeFeedTable  = "CHANGEFEED_TABLE"
	EnvDurableQueueURL  = "DURABLE_QUEUE_URL"
	EnvDurableDLQURL    = "DURABLE_DLQ_URL"
	EnvPipeDLQURL       = "PIPE_DLQ_URL"
	EnvChangeFeedDLQURL = "CHANGEFEED_DLQ_URL"
	EnvTracing          = "FOURLANES_TRACING" // "otel" or "off" (pkg/tracing)
	// The OpenTelemetry SDKs' own variables: where spans go over OTLP/HTTP.
	EnvOTLPTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvOTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvOTelServiceName    = "OTEL_SERVICE_NAME"
	EnvLogLevel           = "LOG_LEVEL"
)

// Function names: the folder under functions/ and under build/.
const (
	FnStreamFilter    = "stream-filter"
	FnDurableConsumer = "durable-consumer"
	FnChangefeed      = "changefeed"
	FnReconcile       = "reconcile"
	FnDLQRepair       = "dlq-repair"
	FnTamperWatch     = "tamper-watch"
)

// EnvFunction chooses the role of a binary that serves every function
// (examples/orders/cmd/allinone, which make bench measures beside the
// one-binary-per-role build the stack deploys).
const EnvFunction = "FOURLANES_FUNCTION"

// Functions lists every Lambda function in build order.
var Functions = []string{FnStreamFilter, FnDurableConsumer, FnChangefeed, FnReconcile, FnDLQRepair, FnTamperWatch, FnNotary, FnHeartbeat}

// MetricNamespace is the CloudWatch namespace of every EMF metric.
const MetricNamespace = "fourlanes"

// Metric names emitted as EMF and alarmed on by infra/.
const (
	MetricDelivered     = "Delivered"
	MetricDeadLettered  = "DeadLettered"
	MetricUnmatched     = "Unmatched"
	MetricDroppedRows   = "DroppedRows"
	MetricRepaired      = "Repaired"
	MetricLocalFailures = "LocalHandlerFailures"
	MetricChainBreaks   = "ChainBreaks"
	// MetricDeliveryLag is commit → handler done, in milliseconds, per
	// subscription (dimension Subscription), on the DURABLE and BEST_EFFORT
	// lanes; the dashboard shows its p50 and p99 and an alarm watches p99.
	MetricDeliveryLag = "DeliveryLag"
)

// ---- Added by infra (issue 5) ----

// MetricPipeRecordAge is the age in milliseconds of the oldest stream record
// in a batch, now minus its ApproximateCreationDateTime, emitted (EMF, unit
// Milliseconds) by stream-filter for each Pipe batch. EventBridge Pipes publish
// no IteratorAge, so infra alarms on this as the Pipe's lag. Alarms read EMF
// metrics with Metrics Insights (SELECT MAX(PipeRecordAge) FROM fourlanes), so
// any dimension set works.
const MetricPipeRecordAge = "PipeRecordAge"

// MetricUndeclaredEvents counts event rows stream-filter passed on although
// its build's catalog does not declare their type or schema version (a
// producer deployed before the backbone), with the dimensions Type and
// Version: their integrity was checked, their delivery left to the
// subscriptions that can read them. infra alarms on it by Type and Version.
const MetricUndeclaredEvents = "UndeclaredEvents"

// ---------------------------------------------------------------------------
// State-table layout of delivery, catalog lanes and the example projection
// (pkg/delivery, pkg/lanes, examples/orders). Keys are prefixed strings so other
// record kinds (reconcile checkpoints, …) can share the table; every prefix
// is listed here.
//
//	event claims   pk claims#<event_id>                  sk "claims"   (claims.go: one item per event)
//	claim          pk claim#<event_id>:<subscription>   sk "claim"    (the earlier per-pair layout: read, never written)
//	dead letter    pk dead#<tenant_id>                   sk <event_id>:<subscription>
//	effect record  pk effect#<event_id>:<sub>:<effect>   sk "effect"   (effect.go: pkg/effect)
//	parked change  pk park#<projection>#<shard 0-7>              sk <len>:<tenant_id>#<len>:<entity>#<id>#<version, 20 digits>
//	projection run pk projrun#<projection>                    sk compare | rebuild  (pkg/projection: saved cursors)
//
// Query pk = dead#<tenant> lists (and counts) one tenant's open dead letters.
const (
	StateClaimPrefix   = "claim#"
	StateClaimSK       = "claim"
	StateDeadPrefix    = "dead#"
	StateParkedPrefix  = "park#"
	StateProjRunPrefix = "projrun#"

	// Claim and dead-letter attributes (besides AttrPK, AttrSK, AttrExpiresAt;
	// AttrTenant, AttrID, AttrType, AttrSeq and AttrSchemaVersion copy the event's).
	AttrStatus       = "status"       // S: ClaimPending, ClaimCompleted, ClaimDead
	AttrSubscription = "subscription" // S
	AttrLeaseUntil   = "lease_until"  // N: epoch milliseconds; a pending claim is held until then
	AttrLeaseToken   = "lease_token"  // S: the holder's token; completion is conditional on it
	AttrAttempts     = "attempts"     // N: deliveries that took the claim (claims); handler runs (dead letters)
	AttrError        = "error"        // S: the last handler error
	AttrUpdatedAt    = "updated_at"   // S: RFC 3339
	AttrDeadAt       = "dead_at"      // S: RFC 3339 (dead letters)
	AttrReplays      = "replays"      // N: replays that failed again (dead letters)

	ClaimPending   = "pending"
	ClaimCompleted = "completed"
	ClaimDead      = "dead"

	// Parked change events of a projection: the change's payload, as JSON.
	AttrChange = "change" // S
)

// Metrics of the lanes (besides MetricDelivered, MetricDeadLettered,
// MetricUnmatched and MetricLocalFailures above).
const (
	MetricBestEffortFailures = "BestEffortFailures"
	MetricLeaseHeld          = "LeaseHeld"   // a delivery found another's unexpired lease
	MetricReplayed           = "Replayed"    // a dead-lettered subscription completed on replay
	MetricProjParked         = "ProjParked"  // a change event arrived early and was parked
	MetricOrderEvents        = "OrderEvents" // order events by type (example audit module)
)

// Metrics of projections (pkg/projection; dimension Projection, and Entity
// on ProjParked).
const (
	MetricProjParkAged     = "ProjParkAged"     // a park outlived its threshold: a gap nothing closed
	MetricProjParkExpiring = "ProjParkExpiring" // a park is about to reach its TTL, unapplied
	MetricProjRepaired     = "ProjRepaired"     // a compare repaired a row (dimension Fault)
	MetricProjAhead        = "ProjAhead"        // a compare found a row ahead of its source (not repaired)
	MetricProjRunFailed    = "ProjRunFailed"    // a scheduled sweep or compare failed
)

// ---------------------------------------------------------------------------
// Reconcile and stream-filter (functions/reconcile, pkg/reconcile,
// functions/stream-filter). State-table rows reconcile writes:
//
//	checkpoint     pk checkpoint#<tenant_id>   sk "checkpoint"    seq, hash, updated_at
//	walk           pk checkpoint#<tenant_id>   sk walk#<walk id>  mode, seq, hash, verified,
//	                                                              anchor_seq, expires_at (TTL)
//
// A checkpoint is the (seq, hash) of the last event an intact walk verified;
// it only moves forward. A walk row holds the progress of a walk that ran out
// of time, so that a resume cursor names a row instead of carrying a position.
const (
	StateCheckpointPrefix = "checkpoint#"
	StateCheckpointSK     = "checkpoint"
	StateWalkSKPrefix     = "walk#"

	// Walk-row attributes (besides AttrSeq, AttrHash, AttrUpdatedAt, AttrExpiresAt).
	AttrMode      = "mode"       // S: "incremental" or "full"
	AttrVerified  = "verified"   // N: events re-hashed by the walk so far
	AttrAnchorSeq = "anchor_seq" // N: the checkpoint seq the walk trusted (0: from genesis)
)

// MetricRejectedRecords counts stream records that failed a Pipe batch in
// stream-filter (dimension Reason: hash_mismatch, broken_link, undeclared,
// undecodable, unstamped_head). Any count means the Pipe is retrying,
// bisecting and finally dead-lettering a batch.
const MetricRejectedRecords = "RejectedRecords"

// ---------------------------------------------------------------------------
// Durable consumer, change feed and dlq-repair (functions/durable-consumer,
// functions/changefeed, functions/dlq-repair, pkg/changefeed, pkg/repair).
//
// Change-feed table: one row per change event, expiring by TTL (AttrExpiresAt).
//
//	change   pk <tenant_id>   sk <ENTITY>#<entity id>#<version, 20 digits>#<stream event id>
//
// Query pk = <tenant_id> with begins_with(sk, "<ENTITY>#<id>#") lists one
// item's changes in version order. Besides the keys a row holds the change
// event's envelope attributes (AttrID, AttrType, AttrTenant, AttrOccurredAt,
// AttrSchemaVersion, AttrPayload) and the attributes below.
const (
	ChangeSKSep = "#"

	AttrEntity        = "entity"          // S: the tracked entity, e.g. ORDER
	AttrEntityID      = "entity_id"       // S: the item's id
	AttrChangeOp      = "op"              // S: ChangeOpWritten or ChangeOpDeleted
	AttrCause         = "cause"           // S: ChangeCauseWrite or ChangeCauseTTL
	AttrStreamEventID = "stream_event_id" // S: the stream record's eventID
	AttrStreamSeq     = "stream_seq"      // S: the stream record's SequenceNumber
	AttrStreamARN     = "stream_arn"      // S: the stream the record came from

	ChangeOpWritten  = "written"
	ChangeOpDeleted  = "deleted"
	ChangeCauseWrite = "write"
	ChangeCauseTTL   = "ttl" // a REMOVE made by DynamoDB's TTL (userIdentity Service / dynamodb.amazonaws.com)
)

// DedupReparkPrefix starts the deduplication id dlq-repair gives a message it
// re-parks in the FIFO DLQ (the same body sent again, so it does not hide its
// tenant's later messages). The durable consumer accepts it besides the event
// id, so a DLQ redrive back to the source queue stays deliverable.
const DedupReparkPrefix = "repark-"

// Metrics of the durable consumer, the change feed and dlq-repair (besides
// MetricDelivered, MetricDeadLettered and MetricRepaired above).
const (
	// MetricDurableMessageFailed counts SQS messages the durable consumer
	// answered as batch item failures (dimension Reason: infrastructure,
	// retry_later, undecodable, behind_failure, no_time).
	MetricDurableMessageFailed = "DurableMessageFailed"
	// MetricDurableMessageDeadLettered counts SQS messages the durable
	// consumer moved to the FIFO DLQ itself (dimension Reason: undecodable).
	MetricDurableMessageDeadLettered = "DurableMessageDeadLettered"
	// MetricChangeEvents counts change events written to the change-feed
	// table and dispatched (dimensions Entity, Op).
	MetricChangeEvents = "ChangeEvents"
	// MetricChangeRejected counts stream records that cannot become change
	// events (no tenant, id or version; a number a change event cannot carry)
	// and were skipped, loudly (dimension Reason).
	MetricChangeRejected = "ChangeRejected"
	// MetricChangeRetried counts stream records the change feed reported as
	// batch item failures for the mapping to retry (dimension Reason).
	MetricChangeRetried = "ChangeRetried"
	// MetricRepairOpen counts items dlq-repair could not fix and left in
	// place (dimension Source: durable_dlq, pipe_dlq, changefeed_dlq, dead_letters).
	MetricRepairOpen = "RepairOpen"
)

// MetricTamperDetected counts changes to the insert-only log seen on its
// stream by tamper-watch: a MODIFY or REMOVE of an event row, or of a head row
// other than its own advance (dimension Change). Any count is an integrity
// incident; infra alarms on it within a minute.
const MetricTamperDetected = "TamperDetected"

// Span attributes fourlanes sets on the spans of an event's work
// (pkg/tracing).
const (
	SpanAttrSubscription = "fourlanes.subscription"
	SpanAttrEventID      = "fourlanes.event_id"
	SpanAttrEventType    = "fourlanes.event_type"
)
