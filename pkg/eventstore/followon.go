package eventstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/fourlanes/fourlanes/pkg/internal/ident"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// Follow-on events: a DURABLE handler reacting to one event emits its own,
// in the same transaction as its own state write (EmitInput.Extra). The
// lane binds an *Emitter to the handler's context (Store.BindFollowOn) and
// the handler takes it with EmitterFrom:
//
//	func (r *Reserver) OnOrderPlaced(ctx context.Context, e envelope.Envelope) error {
//		em, err := eventstore.EmitterFrom(ctx)
//		if err != nil {
//			return err
//		}
//		_, err = em.Emit(ctx, "stock.reserved", reserved, r.reservationPut(e))
//		return err
//	}
//
// Exactly once. Each follow-on emit carries an idempotency key derived from
// the triggering event, the subscription and the emit (FollowOnKey): by
// default the emit's type and its rank among the run's emits of that type
// ("stock.reserved/1"), or the name the handler gives as
// EmitInput.IdempotencyKey. A handler run again after a crash (its claim's
// lease expired before the claim was completed, and a redelivery took it
// over) or retried within a delivery makes the same emits with the same
// keys: the first run's transaction committed the event and the handler's
// writes together, or neither, so the re-run's emit writes nothing and
// returns the event the first run committed. Its INLINE and LOCAL handlers
// do not run again (they ran after the first commit).
//
// The re-run must make the same emit: the same type, payload and extra
// writes, derived from the triggering event and not from the clock. A
// different one is an *IdempotencyKeyMismatchError (nothing written),
// returned as a permanent error so that the subscription is dead-lettered
// at once, naming the key, instead of being retried.

// ErrNoEmitter: EmitterFrom was called with a context that no DURABLE
// delivery bound an Emitter to (a handler called directly, or a function
// whose deliverer has no Config.Events).
var ErrNoEmitter = errors.New("no follow-on emitter bound to the context: emit follow-on events from a DURABLE handler that fourlanes runs (delivery.Config.Events), or bind one with Store.BindFollowOn")

// FollowOnKey is the idempotency key of the follow-on emit named name by
// subscription while handling the event eventID.
func FollowOnKey(eventID, subscription, name string) string {
	return "followon:" + eventID + ":" + subscription + ":" + name
}

// followOnName is what a handler may name an emit: 1 to 128 characters
// from letters, digits and . _ - / (an event type with a rank fits).
// (^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$).
func validFollowOnName(name string) bool { return ident.Word(name, 128, followOnFirst, followOnChar) }

func followOnFirst(c byte) bool { return ident.Lower(c) || ident.Upper(c) || ident.Digit(c) }

func followOnChar(c byte) bool {
	return followOnFirst(c) || c == '.' || c == '_' || c == '/' || c == '-'
}

// Emitter is the log as one run of a DURABLE handler sees it: bound to the
// tenant of the event being handled, each emit caused by that event
// (causation_id = its id; its correlation and actor carried on) and keyed
// for exactly once per (event, subscription, emit). It is safe for
// concurrent use by the handler's goroutines.
type Emitter struct {
	store        *Store
	cause        envelope.Envelope
	subscription string

	mu    sync.Mutex
	ranks map[string]int // emits of each type so far in this run
}

type emitterKey struct{}

// BindFollowOn returns ctx with an Emitter bound for one run of the handler
// of subscription on the event cause. Bind a fresh one for every run: the
// ranks of default emit names count from one within a run.
func (s *Store) BindFollowOn(ctx context.Context, cause envelope.Envelope, subscription string) context.Context {
	return context.WithValue(ctx, emitterKey{}, &Emitter{store: s, cause: cause, subscription: subscription, ranks: map[string]int{}})
}

// EmitterFrom returns the Emitter bound to ctx, or an error matching
// ErrNoEmitter (permanent: a retry cannot bind one).
func EmitterFrom(ctx context.Context) (*Emitter, error) {
	em, _ := ctx.Value(emitterKey{}).(*Emitter)
	if em == nil {
		return nil, &followOnError{ErrNoEmitter} // wiring: retrying cannot fix it
	}
	return em, nil
}

// Tenant is the tenant the emitter emits for: the triggering event's.
func (em *Emitter) Tenant() string { return tenancy.TenantOf(em.cause.TenantID) }

// Cause is the id of the triggering event, every emit's causation_id.
func (em *Emitter) Cause() string { return em.cause.ID }

// Emit appends one follow-on event of eventType in one transaction with the
// handler's extra writes (its own state), keyed by the type and its rank
// among this run's emits of that type. See EmitWith.
func (em *Emitter) Emit(ctx context.Context, eventType string, payload any, extra ...types.TransactWriteItem) (envelope.Envelope, error) {
	return em.EmitWith(ctx, EmitInput{Type: eventType, Payload: payload, Extra: extra})
}

// EmitWith is Store.EmitWith for a follow-on event. in.IdempotencyKey, when
// set, names the emit within the handler (1 to 128 of letters, digits and
// . _ - /); the key the log keeps is FollowOnKey of the triggering event,
// the subscription and that name. Left empty, the name is the type and its
// rank in this run ("stock.reserved/1").
//
// The tenant, causation, correlation and actor come from the triggering
// event, whatever ctx carries. Errors are Store.EmitWith's; an
// *IdempotencyKeyMismatchError comes back marked permanent (a re-run that
// emitted something else: see the package's "Follow-on events").
func (em *Emitter) EmitWith(ctx context.Context, in EmitInput) (envelope.Envelope, error) {
	name := in.IdempotencyKey
	if name == "" {
		em.mu.Lock()
		em.ranks[in.Type]++
		name = in.Type + "/" + strconv.Itoa(em.ranks[in.Type])
		em.mu.Unlock()
	} else if !validFollowOnName(name) {
		return envelope.Envelope{}, &followOnError{fmt.Errorf("follow-on emit %s: %w", in.Type, &envelope.FieldError{Field: "IdempotencyKey",
			Reason: fmt.Sprintf("%q is not a follow-on emit name: use 1 to 128 letters, digits and . _ - /, unique within the handler", name)})}
	}
	in.IdempotencyKey = FollowOnKey(em.cause.ID, em.subscription, name)
	ctx, err := tenancy.WithTenant(ctx, em.Tenant())
	if err != nil {
		return envelope.Envelope{}, fmt.Errorf("follow-on emit %s: %w", in.Type, err)
	}
	ctx = tenancy.WithCausation(ctx, em.cause.ID)
	if em.cause.CorrelationID != "" {
		ctx = tenancy.WithCorrelation(ctx, em.cause.CorrelationID)
	}
	if em.cause.ActorID != "" {
		ctx = tenancy.WithActor(ctx, em.cause.ActorID)
	}
	e, err := em.store.EmitWith(ctx, in)
	if errors.Is(err, ErrIdempotencyKeyMismatch) {
		return e, &followOnError{err}
	}
	return e, err
}

// followOnError is a follow-on emit that retrying cannot fix; Permanent
// tells the lanes so (lanes.IsPermanent) without eventstore importing them.
type followOnError struct{ err error }

func (e *followOnError) Error() string   { return e.err.Error() }
func (e *followOnError) Unwrap() error   { return e.err }
func (e *followOnError) Permanent() bool { return true }
