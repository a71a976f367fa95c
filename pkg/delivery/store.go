package delivery

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors.
var (
	// ErrLeaseLost: the claim is no longer held with this token (its lease
	// expired and another delivery took it over).
	ErrLeaseLost = errors.New("claim lease lost to another delivery")
	// ErrNotDead: Replay was asked to re-run a subscription that is not
	// dead-lettered for this event.
	ErrNotDead = errors.New("subscription is not dead-lettered for this event")
	// ErrUnknownSubscription: no DURABLE subscription of that name is bound.
	ErrUnknownSubscription = errors.New("no such DURABLE subscription bound")
)

// Key identifies a claim: one (event, subscription) pair.
type Key struct {
	EventID      string
	Subscription string
}

// String is the idempotency key "{event_id}:{subscription}".
func (k Key) String() string { return k.EventID + ":" + k.Subscription }

// ClaimRequest asks for a claim until LeaseUntil.
type ClaimRequest struct {
	Key
	Tenant        string
	Type          string
	Seq           int64
	SchemaVersion int
	Token         string    // identifies this delivery; completion is conditional on it
	Now           time.Time // a pending claim whose lease ends before Now is taken over
	LeaseUntil    time.Time
	ExpiresAt     time.Time // TTL of the claim row while pending or completed
}

// EventClaimRequest asks for the claims of several subscriptions of one
// event at once (Store.ClaimEvent): one write takes every one that is
// absent, or pending with a lease ending before Now.
type EventClaimRequest struct {
	EventID       string
	Tenant        string
	Type          string
	Seq           int64
	SchemaVersion int
	Subscriptions []string
	Token         string    // identifies this delivery; each completion is conditional on it
	Now           time.Time // a pending claim whose lease ends before Now is taken over
	LeaseUntil    time.Time
	ExpiresAt     time.Time // TTL of the claims while none is dead
	// Seen is what a prefetch read (ClaimReader.GetClaims), by subscription;
	// a subscription absent from it was not read, and the store reads it
	// itself. A stale record costs a retry, never a wrong answer: the write
	// is conditional.
	Seen map[string]ClaimRecord
}

// request returns the single-subscription ClaimRequest of sub.
func (r EventClaimRequest) request(sub string) ClaimRequest {
	return ClaimRequest{Key: Key{EventID: r.EventID, Subscription: sub}, Tenant: r.Tenant, Type: r.Type, Seq: r.Seq,
		SchemaVersion: r.SchemaVersion, Token: r.Token, Now: r.Now, LeaseUntil: r.LeaseUntil, ExpiresAt: r.ExpiresAt}
}

// eventRequest is the EventClaimRequest of req alone.
func eventRequest(req ClaimRequest) EventClaimRequest {
	return EventClaimRequest{EventID: req.EventID, Tenant: req.Tenant, Type: req.Type, Seq: req.Seq, SchemaVersion: req.SchemaVersion,
		Subscriptions: []string{req.Subscription}, Token: req.Token, Now: req.Now, LeaseUntil: req.LeaseUntil, ExpiresAt: req.ExpiresAt}
}

// Status is a claim's state.
type Status string

// Claim states.
const (
	StatusPending   Status = "pending"
	StatusCompleted Status = "completed"
	StatusDead      Status = "dead"
)

// Claim is what a claim attempt found.
type Claim struct {
	// Acquired: this delivery now holds the claim (Status is pending).
	Acquired bool
	// TakenOver: Acquired from a pending claim whose lease had expired.
	TakenOver bool
	// Status and LeaseUntil describe the claim as found when not Acquired.
	Status     Status
	LeaseUntil time.Time
	Attempts   int // deliveries that have taken the claim, this one included when Acquired
}

// DeadLetter is a tenant-scoped record of a dead-lettered subscription.
type DeadLetter struct {
	Tenant        string
	EventID       string
	Subscription  string
	Type          string
	Seq           int64 // where to re-read the event in the tenant's log
	SchemaVersion int
	Error         string
	Attempts      int // handler runs in the delivery that gave up
	Replays       int // replays that failed again
	DeadAt        time.Time
	// Effect is the key of the handler's AtMostOnce effect whose outcome is
	// unknown (pkg/effect), when that is why the subscription is dead: it
	// awaits an operator's decision (`fourlanes effects`), not a fix.
	Effect string
}

// Key returns the dead letter's claim key.
func (d DeadLetter) Key() Key { return Key{EventID: d.EventID, Subscription: d.Subscription} }

// ClaimRecord is a claim row as stored.
type ClaimRecord struct {
	Key
	Tenant     string
	Status     Status
	LeaseUntil time.Time
	Attempts   int
	Error      string
	ExpiresAt  time.Time // zero when the claim does not expire (its event has a dead claim)
	// Legacy: read from the per-pair claim of the earlier layout (no claim
	// of the event's claim item): final when completed or dead, held while
	// pending under its lease, never written.
	Legacy bool
}

// Found reports whether the claim exists (GetClaims answers a pair it read
// and did not find with a zero Status).
func (r ClaimRecord) Found() bool { return r.Status != "" }

// Store keeps claims and dead letters. Implementations must be safe for
// concurrent use, and every method that changes a claim must do so
// atomically (a conditional write), because concurrent deliveries of one
// event race on it. DynamoStore is the implementation; MemoryStore is a fake
// that passes the same suite.
type Store interface {
	// ClaimEvent takes, in one write, the claim of every subscription of
	// req that is absent, or pending with a lease ending before req.Now, and
	// reports what it found for the others; the answer is in the order of
	// req.Subscriptions. A completed or dead claim costs no write.
	ClaimEvent(ctx context.Context, req EventClaimRequest) ([]Claim, error)
	// Claim is ClaimEvent for one subscription.
	Claim(ctx context.Context, req ClaimRequest) (Claim, error)
	// ClaimDead takes a dead claim (or an expired pending one) for replay.
	// It reports what it found when it cannot; an absent claim is
	// ErrNotDead.
	ClaimDead(ctx context.Context, req ClaimRequest) (Claim, error)
	// Complete marks a claim held with token completed, its event's claims
	// expiring at expiresAt unless one of them is dead (then they never
	// expire); a zero expiresAt leaves the expiry as it is. ErrLeaseLost if
	// it is not held with token.
	Complete(ctx context.Context, k Key, token string, now, expiresAt time.Time) error
	// Kill marks a claim held with token dead (it no longer expires) and
	// writes the dead letter, atomically. When replay is true, the dead
	// letter's Replays is incremented. ErrLeaseLost if not held with token.
	Kill(ctx context.Context, k Key, token string, d DeadLetter, replay bool) error
	// Resolve marks a claim held with token completed and deletes its dead
	// letter, atomically. ErrLeaseLost if not held with token.
	Resolve(ctx context.Context, k Key, tenant, token string, now, expiresAt time.Time) error
	// Get reads a claim.
	Get(ctx context.Context, k Key) (ClaimRecord, bool, error)
	// DeadLetters lists a tenant's open dead letters in key order, a page at
	// a time: pass the returned cursor back; "" means done.
	DeadLetters(ctx context.Context, tenant, cursor string, limit int32) ([]DeadLetter, string, error)
	// CountDeadLetters counts a tenant's open dead letters.
	CountDeadLetters(ctx context.Context, tenant string) (int, error)
}
