// Package eventstore appends events to a tenant's hash-chained log in the
// same DynamoDB transaction as the caller's own writes: the commit is the
// publish.
//
// One TransactWriteItems holds the tenant's head row (a conditional Put on
// last_seq), the event row (condition: absent), then the caller's writes.
// Losing the race for the head is contention: the store re-reads the head and
// retries within a bounded, jittered budget. Any other cancellation is the
// caller's answer and comes back at once, named by the caller's index
// (extra_writes[1] ConditionalCheckFailed: …), with nothing written.
//
// An event is sealed at one seq and never at two. Every transaction carries
// a ClientRequestToken derived from its events and seqs; an ambiguous answer
// (TransactionInProgress, a timeout, a 5xx, a connection dropped after
// sending) is followed only by the identical request with the same token,
// and the store re-seals at a new seq only after a definite "not committed".
// When no definite answer comes within Config.OutcomeWithin, Emit returns an
// *OutcomeUnknownError naming tenant, event id and seq, and Store.Settle
// tells later whether that event committed. EmitInput.IdempotencyKey makes an
// emit safe to retry from anywhere, at any time.
//
// Concurrent Emits for one tenant in one process are coalesced into one
// transaction (group commit) unless Config.Batching is BatchNone; every caller
// keeps its own seq, its own post-commit dispatch and its own error, its own
// outcome-unknown error included.
package eventstore
