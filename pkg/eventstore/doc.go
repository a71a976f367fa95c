// Package eventstore appends events to a tenant's hash-chained log in the
// same DynamoDB transaction as the caller's own writes: the commit is the
// publish.
//
// One TransactWriteItems holds the tenant's head row (a conditional Put on
// last_seq), the event row (condition: absent), then the caller's writes.
// Losing the race for the head is contention: the store retries on the head
// the lost race returned, within a bounded, jittered budget. Any other cancellation is the
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
// emit safe to retry from anywhere, at any time; the key stands for that
// content, and a reuse with another type, payload or extra writes is an
// *IdempotencyKeyMismatchError (ErrIdempotencyKeyMismatch), nothing written.
//
// Concurrent Emits for one tenant in one process are coalesced into one
// transaction (group commit) unless Config.Batching is BatchNone; every caller
// keeps its own seq, its own post-commit dispatch and its own error, its own
// outcome-unknown error included. A goroutine per busy tenant commits the
// batches, never a caller, so no caller waits for batches other than its own.
//
// The remembered head. A store keeps the head it last committed or was told
// of per tenant, across Emits, so a store emitting one event at a time (a
// Lambda instance) spends one round trip per event, not a head read and a
// write. A head another process moved meanwhile costs one lost attempt, which
// returns the head that won; that is staleness, not contention, so the batch
// goes out again at once, and the store reads the head before its next batch
// until a remembered head holds again. The head's condition checks the
// recorded shard count too, since a remembered head is not re-read.
//
// Hot tenants. A tenant's head row and events share one partition key, so one
// tenant takes at most AWS's 1,000 WCU/s per partition (about 470 one-KB
// events/s when batched, 250 at one transaction per event). Writers in other
// processes race for the head: a lost race returns the winning head
// (ReturnValuesOnConditionCheckFailure), so the retry re-seals without a
// read; the loser waits a random time within a per-tenant window that widens
// with each loss and narrows with each commit (pacing), and whatever queued
// meanwhile in its process joins the retried batch. A throttled transaction
// (ProvisionedThroughputExceeded) is paced and retried the same way.
//
// Chain shards. Config.Shards splits a hot tenant's log into up to
// tenancy.MaxShards chains, each with its own head, partition key and FIFO
// message group; EmitInput.ShardKey picks the chain (tenancy.ShardOf), and
// everything per chain above (batches, pacing, Settle) is per shard. One
// chain's ceiling is the tenant's default; S shards lift it S times, and
// order holds per shard key, not across the tenant.
//
// Fairness. Each caller's budget is its own: Config.MaxAttempts attempts that
// carried its event and Config.MaxElapsed from its Emit, or its context's
// deadline if earlier. A caller still queued when its deadline passes returns
// at once and its event is never sent; one whose event is in flight gets that
// transaction's outcome. Either way a *ContentionError says how long it
// waited, how much of it queued, and which budget ended it.
package eventstore
