package eventstore

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors.
var (
	// ErrTooLarge: the transaction would exceed DynamoDB's 100 actions or 4 MB.
	ErrTooLarge = errors.New("transaction too large")
	// ErrContention matches every *ContentionError.
	ErrContention = errors.New("head contention budget exhausted")
	// ErrLogAhead: the event row for the next seq already exists although the
	// head says it should not; the head and the log disagree. Run reconcile.
	ErrLogAhead = errors.New("event row already exists for the next seq; head and log disagree")
	// ErrBadWrite: a caller write is malformed (not exactly one action).
	ErrBadWrite = errors.New("malformed extra write")
	// ErrNoCatalog: Emit on a store built without Config.Catalog, which
	// reads the log only. Nothing was written.
	ErrNoCatalog = errors.New("this store was opened without a Catalog: it reads the log only; pass eventstore.Config.Catalog to emit")
	// ErrNoShardKey: Emit for a tenant with chain shards without
	// EmitInput.ShardKey. Nothing was written.
	ErrNoShardKey = errors.New("no shard key")
	// ErrShardCount matches every *ShardCountError.
	ErrShardCount = errors.New("chain shard count disagrees with the log")
	// ErrIdempotencyKeyMismatch matches every *IdempotencyKeyMismatchError.
	ErrIdempotencyKeyMismatch = errors.New("idempotency key reused with other content")
)

// IdempotencyKeyMismatchError reports an emit whose idempotency key an
// earlier emit of other content committed: another type, schema version or
// payload, or other extra writes. A key stands for one request; the
// caller's emit is not that request, and returning the earlier event would
// drop its writes silently. Nothing was written.
type IdempotencyKeyMismatchError struct {
	Tenant  string   // the chain the key is kept on
	Key     string   // the idempotency key
	EventID string   // the event the key committed
	Seq     int64    // its seq
	Differs []string // what differs from that emit, e.g. "payload (at payload.total_cents)"
}

func (e *IdempotencyKeyMismatchError) Error() string {
	return fmt.Sprintf("idempotency key %q of tenant %q was used by event %s (seq %d) with another %s: a key stands for one request; "+
		"retry with the same type, payload and writes, or use a new key (nothing was written)",
		e.Key, e.Tenant, e.EventID, e.Seq, strings.Join(e.Differs, ", "))
}

// Is matches ErrIdempotencyKeyMismatch.
func (e *IdempotencyKeyMismatchError) Is(target error) bool {
	return target == ErrIdempotencyKeyMismatch
}

// ShardCountError reports that a chain's head was last written by an emitter
// configured with more chain shards for the tenant than this store is: the
// emitters disagree on the tenant's shard count (or it was lowered), so they
// would send one shard key's events to different chains and lose its order.
// The store refuses to write to the tenant's chains until it is given the
// count the log records (or a larger one). Nothing was written.
type ShardCountError struct {
	Tenant     string // the tenant
	Chain      string // the chain whose head records Recorded
	Configured int    // this store's shard count for the tenant (Config.Shards; 1: one chain)
	Recorded   int    // the count the head was written with
}

func (e *ShardCountError) Error() string {
	return fmt.Sprintf("emit for tenant %q: chain %q was last written by an emitter configured with %d chain shards for the tenant, "+
		"and this store has %d (Config.Shards; 1 is one chain): every emitter of a tenant must be given the same count (one "+
		"app.Application's ChainShards) and a tenant's count never goes down; deploy %d or more to this emitter (nothing was written)",
		e.Tenant, e.Chain, e.Recorded, e.Configured, e.Recorded)
}

// Is matches ErrShardCount.
func (e *ShardCountError) Is(target error) bool { return target == ErrShardCount }

// ContentionError reports that a caller's emit did not commit within the
// caller's own budget (Config.MaxAttempts and MaxElapsed, or its context's
// deadline, whichever ends first) because its tenant's head stayed contended:
// other writers kept moving it, transactions on it conflicted, or its
// partition's write budget throttled it. Nothing was written. The budget is
// the caller's own: batches queued ahead of it never lengthen it.
type ContentionError struct {
	Tenant   string        // the chain: the tenant id, or a chain shard's name (tenancy.Chain)
	Attempts int           // TransactWriteItems calls that carried this caller's event
	Elapsed  time.Duration // from Emit's start to this answer
	Waited   time.Duration // of Elapsed, the time queued before its first attempt
	Reason   string        // which budget ended the wait, e.g. "its 64-attempt budget"
	Last     error         // the last attempt's error; nil when it never went out
}

func (e *ContentionError) Error() string {
	last := "never sent"
	if e.Last != nil {
		last = e.Last.Error()
	}
	return fmt.Sprintf("emit for tenant %q: head still contended after %d attempts in %s (%s queued before the first; stopped by %s): %s",
		e.Tenant, e.Attempts, e.Elapsed.Round(time.Millisecond), e.Waited.Round(time.Millisecond), e.Reason, last)
}

// Is matches ErrContention.
func (e *ContentionError) Is(target error) bool { return target == ErrContention }

// Unwrap returns the last attempt's error.
func (e *ContentionError) Unwrap() error { return e.Last }

// CallerWriteError names the caller's write that cancelled the transaction,
// by the caller's own index into extra writes. Nothing was written.
type CallerWriteError struct {
	Index   int    // index into the caller's extra writes
	Code    string // DynamoDB cancellation reason code, e.g. ConditionalCheckFailed
	Message string
}

func (e *CallerWriteError) Error() string {
	s := fmt.Sprintf("extra_writes[%d] %s", e.Index, e.Code)
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s + " (nothing was written)"
}

// ConditionFailed reports whether the caller's condition expression failed.
func (e *CallerWriteError) ConditionFailed() bool { return e.Code == "ConditionalCheckFailed" }

// PostCommitError is returned when the event committed but an INLINE
// subscription failed afterwards. The envelope Emit returns is the committed one.
type PostCommitError struct {
	Seq int64
	Err error
}

func (e *PostCommitError) Error() string {
	return fmt.Sprintf("event committed at seq %d, then post-commit dispatch failed: %v", e.Seq, e.Err)
}

func (e *PostCommitError) Unwrap() error { return e.Err }

// ErrOutcomeUnknown matches every *OutcomeUnknownError.
var ErrOutcomeUnknown = errors.New("emit outcome unknown")

// OutcomeUnknownError reports that Emit sent its transaction but could not
// learn, within Config.OutcomeWithin, whether it committed: every answer was
// ambiguous (TransactionInProgress, a timeout, a 5xx, a connection dropped
// after sending). The event is then either in the log at Seq, or nowhere;
// never at two seqs. Settle(ctx, Tenant, EventID, Seq) tells which.
type OutcomeUnknownError struct {
	Tenant   string // the chain (as in ContentionError), which Settle takes
	EventID  string
	Seq      int64 // the seq the event was sealed at, the only one it can hold
	Attempts int   // TransactWriteItems calls for this transaction and the batch's earlier ones
	Elapsed  time.Duration
	Last     error
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("emit for tenant %q: event %s may or may not have committed at seq %d (no definite answer after %d attempts in %s; settle it with Store.Settle): %v",
		e.Tenant, e.EventID, e.Seq, e.Attempts, e.Elapsed.Round(time.Millisecond), e.Last)
}

// Is matches ErrOutcomeUnknown.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// Unwrap returns the last attempt's error.
func (e *OutcomeUnknownError) Unwrap() error { return e.Last }
