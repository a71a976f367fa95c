package keys

// Effect records (pkg/effect): one item per handler side effect in the state
// table, keyed by (event, subscription, effect name).
//
//	effect record  pk effect#<event_id>:<subscription>:<effect>   sk "effect"
//
// Attributes: AttrStatus (EffectStarted, EffectDone, EffectUnknown,
// EffectRedo), AttrLeaseToken (the token of the delivery that started it),
// AttrTenant, AttrSeq, AttrID (the event's), AttrSubscription, AttrEffect,
// AttrAttempts (start writes), AttrUpdatedAt, AttrExpiresAt (TTL; removed
// while the effect is unknown: an unknown effect waits for an operator).
//
// A dead letter whose subscription was parked because an AtMostOnce effect's
// outcome is unknown carries AttrEffect (the effect record's key), so that
// reconcile and `fourlanes effects` find it among the tenant's dead letters.
const (
	StateEffectPrefix = "effect#"
	StateEffectSK     = "effect"

	AttrEffect = "effect" // S: the effect's name (record), or its key (dead letter)

	EffectStarted = "started"
	EffectDone    = "done"
	EffectUnknown = "unknown"
	EffectRedo    = "redo" // an operator decided an unknown effect is to be done again
)

// Metrics of effects (dimensions Subscription, Effect).
const (
	// MetricEffectRedone counts effects done again after an earlier delivery
	// started them and never recorded them done (AtLeastOnce): each is a
	// possible duplicate, unless the provider deduplicates by the effect's key.
	MetricEffectRedone = "EffectRedone"
	// MetricEffectUnknown counts AtMostOnce effects whose outcome is unknown:
	// not done again, their subscription dead-lettered until an operator
	// decides. infra alarms on any.
	MetricEffectUnknown = "EffectUnknown"
	// MetricUnknownEffectsOpen is, per Subscription, how many of a tenant's
	// dead letters await a decision on an effect of unknown outcome
	// (reconcile, each walk): it stays above 0 until an operator decides, so
	// its alarm does not go quiet while the effect is still unknown.
	MetricUnknownEffectsOpen = "UnknownEffectsOpen"
)
