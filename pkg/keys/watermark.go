package keys

// Delivery watermarks (pkg/delivery, pkg/reconcile, pkg/repair): how far a
// DURABLE subscription is settled (completed or dead-lettered) for a tenant.
//
//	watermark      pk watermark#<tenant_id>   sk <subscription>
//
// The row is a checkpoint: the watermark is it carried forward over the
// settled claims after it (delivery.WatermarkReader); reconcile and
// dlq-repair write it, the consumer never does.
//
// Attributes: AttrSeq (N, a seq settled with every earlier one),
// AttrTenant, AttrSubscription, AttrUpdatedAt (when it last moved). Query
// pk = watermark#<tenant> reads a tenant's watermarks in one request.
const StateWatermarkPrefix = "watermark#"

// Metrics of the delivery audit.
const (
	// MetricNotInLog counts queue messages durable-consumer refused because
	// their event is not in the log (absent at its seq, or another hash).
	MetricNotInLog = "NotInLog"
	// MetricNotCovered counts events delivery refused because the chain
	// does not cover them: a seq above the tenant's head, or a prev_hash
	// that is not the hash of the event before (a planted row).
	MetricNotCovered = "NotCovered"
	// MetricUnsettledEvents is, per Subscription, the events of a tenant
	// above the subscription's watermark and at or below the head
	// (reconcile emits it per tenant walked).
	MetricUnsettledEvents = "UnsettledEvents"
	// MetricUnsettledAge is, per Subscription, the age in seconds of the
	// oldest event above the watermark (0 when settled): the stalled
	// delivery watermark alarm watches its maximum.
	MetricUnsettledAge = "UnsettledAgeSeconds"
	// MetricWatermarkFailed counts watermark checkpoint writes that failed
	// (reconcile's or dlq-repair's; the next one derives and writes it).
	MetricWatermarkFailed = "WatermarkFailed"
)

// Subscription starts (pkg/delivery): when a DURABLE subscription first went
// live, recorded once by the first consumer or dlq-repair that serves it (a
// conditional write, so concurrent ones agree).
//
//	subscription start   pk substart   sk <subscription>
//
// Attributes: AttrSubscription, AttrStartedAt (S, RFC 3339: when it went
// live), AttrStart (S: the start declared then, catalog.Start.String(), or
// StartExisting). Query pk = substart lists every subscription that went
// live in one request (dlq-repair finds a removed subscription that left
// nothing but its start).
//
// A watermark row also records AttrStartSeq (N): the seq its tenant's
// watermark began at (its start resolved for that tenant).
const (
	StateSubStartPK = "substart"

	AttrStartedAt = "started_at"
	AttrStart     = "start"
	AttrStartSeq  = "start_seq"

	// StartExisting is the recorded start of a subscription that was
	// already delivering when starts were first recorded (a watermark of it
	// existed): it keeps all history, as before.
	StartExisting = "existing"
)

// Backfills (pkg/repair, `fourlanes backfill`): a saved cursor per (tenant,
// subscription), so that a backfill resumes where it stopped.
//
//	backfill   pk backfill#<tenant_id>   sk <subscription>
//
// Attributes: AttrTenant, AttrSubscription, AttrFromSeq, AttrToSeq (the
// range asked for), AttrSeq (the last seq done: the position), AttrDelivered,
// AttrSkipped (quarantined events passed over), AttrStatus (BackfillRunning
// or BackfillDone), AttrUpdatedAt.
const (
	StateBackfillPrefix = "backfill#"

	AttrFromSeq   = "from_seq"
	AttrToSeq     = "to_seq"
	AttrDelivered = "delivered"
	AttrSkipped   = "skipped"

	BackfillRunning = "running"
	BackfillDone    = "done"
)

// Quarantine (pkg/repair): events an operator or dlq-repair set aside for
// one subscription. A backfill passes over them, and dlq-repair does not
// replay their dead letters.
//
//	quarantine   pk quarantine#<tenant_id>   sk <subscription>#<event_id>
//
// Attributes: AttrTenant, AttrSubscription, AttrID (the event id), AttrSeq,
// AttrReason, AttrUpdatedAt.
const (
	StateQuarantinePrefix = "quarantine#"
	AttrReason            = "reason"
)

// Metrics of subscription starts and backfills.
const (
	// MetricBeforeStart counts, per Subscription, events not delivered to a
	// subscription because they were committed before its start.
	MetricBeforeStart = "BeforeStart"
	// MetricBackfilled counts, per Subscription, events a backfill delivered.
	MetricBackfilled = "Backfilled"
)

// The dead-letter index (pkg/delivery, pkg/repair): a sparse global
// secondary index of the state table over open dead letters only, so that
// dlq-repair finds the tenants with dead letters without reading the table.
// A dead-letter row carries AttrDeadIndex = DeadIndexValue; nothing else
// does, and a resolved dead letter leaves it. Keys only; hash AttrDeadIndex,
// range AttrTenant: one Query per tenant with dead letters finds them all
// (each starting after the last tenant found).
const (
	IndexDeadTenants = "dead-tenants"
	AttrDeadIndex    = "dead_idx"
	DeadIndexValue   = "dead"
)

// Resolved dead letters (pkg/delivery): history, kept for
// DeadLetterHistoryTTL after the dead letter was resolved.
//
//	resolved dead letter   pk deadlog#<tenant_id>   sk <event_id>:<subscription>
//
// Attributes: the dead letter's (AttrTenant, AttrID, AttrSubscription,
// AttrType, AttrSeq, AttrError, AttrAttempts, AttrReplays, AttrDeadAt), and
// AttrResolvedAt (S, RFC 3339), AttrResolvedBy (S: who), AttrResolvedHow
// (S: ResolvedReplayed, ResolvedRetired, …), AttrExpiresAt (TTL).
const (
	StateDeadLogPrefix = "deadlog#"

	AttrResolvedAt  = "resolved_at"
	AttrResolvedBy  = "resolved_by"
	AttrResolvedHow = "resolved_how"

	ResolvedReplayed = "replayed"

	// DeadLetterHistoryDays is how long a resolved dead letter is kept.
	DeadLetterHistoryDays = 90
)

// Metrics of dead-letter replay.
const (
	// MetricDeadLetterQuarantined counts, per Subscription, dead letters
	// dlq-repair stopped replaying after their cap of failed replays.
	MetricDeadLetterQuarantined = "DeadLetterQuarantined"
)

// Retired subscriptions (pkg/repair): a DURABLE subscription the
// application no longer declares keeps its state until it has been
// undeclared for RetireGraceHours (so that rolling back a deploy loses
// nothing); then dlq-repair retires it: its watermarks, backfill cursors and
// quarantine rows are deleted, its open dead letters are resolved into the
// history (AttrResolvedHow = ResolvedRetired), and, once every tenant is
// done, its start row is deleted.
//
//	undeclared subscription   pk subretire   sk <subscription>
//
// Attributes: AttrSubscription, AttrUndeclaredSince (S, RFC 3339: the first
// run that found it undeclared), AttrRetiredAt (S: when every tenant was
// done; absent before). Query pk = subretire lists them in one request. The
// row is deleted when the subscription is declared again.
const (
	StateSubRetirePK = "subretire"

	AttrUndeclaredSince = "undeclared_since"
	AttrRetiredAt       = "retired_at"

	ResolvedRetired = "retired"

	// RetireGraceHours is how long a subscription must stay undeclared
	// before dlq-repair retires it.
	RetireGraceHours = 24
	// EnvRetireGrace overrides the grace period of dlq-repair: a Go
	// duration ("1h", "90s"), at least MinRetireGraceSeconds. A test stack
	// shortens it; production keeps the default.
	EnvRetireGrace        = "FOURLANES_RETIRE_GRACE"
	MinRetireGraceSeconds = 1

	// MetricSubscriptionRetired counts, per Subscription, the tenants whose
	// state of a retired subscription dlq-repair removed.
	MetricSubscriptionRetired = "SubscriptionRetired"
)
