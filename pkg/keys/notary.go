package keys

// The notary (pkg/notary): the one reader of the events stream that signs
// checkpoints. It keeps, per chain, the last (seq, hash) it saw appended, in
// the state table:
//
//	notary chain   pk notary#<chain>   sk StateNotarySK
//
// Attributes: AttrTenant (the chain), AttrSeq (N, the last seq seen appended
// and covered by the head), AttrHash (S, its hash), AttrNotaryHeadSeq (N,
// the head's last_seq as last seen on the stream), AttrLastHash (S, its
// last_hash), AttrNotaryStreamSeq (S, the stream sequence number of the last
// record applied), AttrNotaryApplied (S, JSON: the ids of the last records
// applied, so a retried batch skips what an earlier attempt applied),
// AttrNotarySigned (N, the last seq signed), AttrNotarySince (N, the seq of
// the signed checkpoint the chain was started from; 0: genesis), AttrNotaryPending (S, JSON: events
// seen inserted and not yet covered by a head record), AttrNotaryBroken (BOOL,
// a finding was made: nothing of the chain is signed again),
// AttrNotaryFindings (N), AttrNotaryFirstFinding and AttrNotaryLastFinding (S), AttrRoundVersion (N,
// bumped on every save; a save is conditional on it), AttrUpdatedAt.
const (
	StateNotaryPrefix = "notary#"
	StateNotarySK     = "chain"

	AttrNotaryHeadSeq      = "head_seq"
	AttrNotaryStreamSeq    = "stream_seq"
	AttrNotarySigned       = "signed_seq"
	AttrNotarySince        = "since_seq"
	AttrNotaryPending      = "pending"
	AttrNotaryApplied      = "applied"
	AttrNotaryBroken       = "broken"
	AttrNotaryFindings     = "findings"
	AttrNotaryLastFinding  = "last_finding"
	AttrNotaryFirstFinding = "first_finding"
)

// FnNotary is the notary's function folder (examples/*/functions/notary).
const FnNotary = "notary"

// Metrics of the notary.
const (
	// MetricNotaryFinding counts, per Finding (rewrite, removed, rollback,
	// gap, link, planted, unseen, unreadable), what the notary refused to
	// sign. Any one alarms.
	MetricNotaryFinding = "NotaryFinding"
	// MetricNotarySigned counts checkpoints the notary signed.
	MetricNotarySigned = "NotarySigned"
)
