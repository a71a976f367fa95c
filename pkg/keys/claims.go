package keys

// Event claims (pkg/delivery, issue 15): one item per event in the state
// table holds the claim of every DURABLE subscription of the event, so that
// a first delivery to N subscriptions costs one claim write plus N
// completions instead of two writes per (event, subscription).
//
//	event claims   pk claims#<event_id>   sk "claims"
//
// Attributes: AttrTenant, AttrType, AttrSeq (the event's; the id is in the
// key); one map per subscription, a top-level attribute named
// AttrSubClaimPrefix + subscription = "s_<subscription>", with the ClaimField*
// fields below (status ClaimPending, ClaimCompleted or ClaimDead);
// AttrDeadSubs (SS), the subscriptions whose entry is dead; AttrExpiresAt
// (TTL), present only while AttrDeadSubs is absent: a dead entry never
// expires.
//
// The per-pair claims of the earlier layout (StateClaimPrefix
// <event_id>:<subscription>, sk StateClaimSK) are read, never written:
// a pair completed or dead-lettered there stays so (see pkg/delivery).
const (
	StateEventClaimPrefix = "claims#"
	StateEventClaimSK     = "claims"

	AttrSubClaimPrefix = "s_"
	AttrDeadSubs       = "dead_subs" // SS: subscriptions whose entry is dead
)

// Fields of a subscription's entry in an event claim item. They are short
// because the item holds one entry per subscription and DynamoDB bills
// every write of the item by its whole size (1 WCU per started KB).
const (
	ClaimFieldStatus     = "st"  // S: ClaimPending, ClaimCompleted, ClaimDead
	ClaimFieldLeaseUntil = "lu"  // N: epoch milliseconds; pending only
	ClaimFieldToken      = "tk"  // S: the holder's token; pending only
	ClaimFieldAttempts   = "n"   // N: deliveries that took the claim
	ClaimFieldError      = "err" // S: the last handler error (dead, and after a failed replay)
	ClaimFieldUpdatedAt  = "at"  // N: epoch milliseconds of the last change
)

// EnvPerPairClaims tells durable-consumer and dlq-repair whether per-pair
// claims of the earlier layout may still exist: PerPairClaimsRead (the
// default, also when unset) reads them beside each event's claim item;
// PerPairClaimsGone reads one item per event. infra/backbone sets it from
// Props.PerPairClaimsGone.
const (
	EnvPerPairClaims  = "FOURLANES_PER_PAIR_CLAIMS"
	PerPairClaimsRead = "read"
	PerPairClaimsGone = "gone"
)
