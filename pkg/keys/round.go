package keys

// Scheduled reconcile rounds (pkg/reconcile): a round reconciles every
// tenant once, across as many scheduled invocations as it takes; the state
// table keeps where it stands, one row per walk mode.
//
//	round          pk round#<mode>   sk StateRoundSK
//
// Attributes: AttrCursor (S, where the next invocation resumes; absent at
// the start of a round), AttrRoundStarted (S, RFC 3339; absent between
// rounds), AttrRoundTenants (N, tenants completed in the round so far),
// AttrRoundVersion (N, bumped on every save: a save is conditional on it, so
// two overlapping invocations cannot both move the round), AttrCompletedAt
// (S, RFC 3339, when the last round completed), AttrUpdatedAt.
const (
	StateRoundPrefix = "round#"
	StateRoundSK     = "round"

	AttrCursor        = "cursor"
	AttrRoundStarted  = "round_started"
	AttrRoundTenants  = "round_tenants"
	AttrRoundVersion  = "round_version"
	AttrCompletedAt   = "completed_at"
	AttrRoundLastDone = "last_round_tenants"
)

// Metrics of scheduled reconcile rounds, by Mode (incremental, full).
const (
	// MetricRoundAge is the age in seconds of the current round (of the
	// round just completed, on its last invocation): the stalled-round
	// alarm watches its maximum for Mode incremental.
	MetricRoundAge = "ReconcileRoundAgeSeconds"
	// MetricRoundTenants is the number of tenants the round has completed so far.
	MetricRoundTenants = "ReconcileRoundTenants"
	// MetricRoundsCompleted counts completed rounds.
	MetricRoundsCompleted = "ReconcileRoundsCompleted"
)
