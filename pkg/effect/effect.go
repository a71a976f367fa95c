package effect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/fourlanes/fourlanes/pkg/internal/ident"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// Sentinel errors.
var (
	// ErrNotBound: Do was called with a context that no fourlanes lane bound
	// (a handler called directly, outside a delivery). Bind one with
	// Recorder.Bind (tests: NewMemoryStore).
	ErrNotBound = errors.New("no effect recorder bound to the context: call effect.Do from a DURABLE or BEST_EFFORT handler that fourlanes runs, or bind one with effect.Recorder.Bind")
	// ErrUnknown is what every *UnknownError is (errors.Is).
	ErrUnknown = errors.New("effect outcome unknown")
	// ErrNotHeld: the record is not held with the token given (another
	// delivery took it over, or it is in another state).
	ErrNotHeld = errors.New("effect record not held with this token")
	// ErrNotUnknown: Decide was asked about an effect that is not unknown.
	ErrNotUnknown = errors.New("effect is not unknown")
)

// Mode says what Do does when an earlier delivery started the effect and
// never recorded it done, so that nobody knows whether it happened.
type Mode uint8

const (
	// AtLeastOnce does it again (the default): never zero times, possibly
	// twice. Pass the key to a provider that deduplicates by it and declare
	// the effect Idempotent: then exactly once at the provider.
	AtLeastOnce Mode = iota
	// AtMostOnce does not: the effect is marked unknown and its subscription
	// dead-lettered (*UnknownError), loudly, until an operator decides. Only
	// on the DURABLE lane, where a dead letter parks it.
	AtMostOnce
)

func (m Mode) String() string {
	if m == AtMostOnce {
		return "at_most_once"
	}
	return "at_least_once"
}

// Option configures one Do.
type Option func(*options)

type options struct {
	mode       Mode
	idempotent bool
}

// WithMode sets the effect's Mode (default AtLeastOnce).
func WithMode(m Mode) Option { return func(o *options) { o.mode = m } }

// Idempotent declares that fn hands the key to a provider that
// deduplicates by it (an idempotency key): a redo after an unknown outcome
// is then no duplicate, and is logged at INFO without keys.MetricEffectRedone.
func Idempotent() Option { return func(o *options) { o.idempotent = true } }

// MaybeDone marks an error of fn after which the effect may have happened
// (the provider's answer was lost). Under AtMostOnce the effect becomes
// unknown instead of being released for a retry. MaybeDone(nil) is nil.
func MaybeDone(err error) error {
	if err == nil {
		return nil
	}
	return &maybeDoneError{err}
}

type maybeDoneError struct{ err error }

func (e *maybeDoneError) Error() string { return e.err.Error() }
func (e *maybeDoneError) Unwrap() error { return e.err }

// UnknownError is an AtMostOnce effect whose outcome is unknown: Do did not
// do it, and the subscription is dead-lettered at once (Permanent) until an
// operator decides (Decide; `fourlanes effects`).
type UnknownError struct {
	Key    Key
	Reason string
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("effect %s outcome unknown (%s); not done again (at most once): check the provider, then run fourlanes effects -redo %s or -done %s",
		e.Key, e.Reason, e.Key, e.Key)
}

// Is makes errors.Is(err, ErrUnknown) true.
func (e *UnknownError) Is(target error) bool { return target == ErrUnknown }

// Permanent tells the lanes that retrying cannot fix it (lanes.IsPermanent).
func (e *UnknownError) Permanent() bool { return true }

// usageError is a mistake in the handler's call or its wiring: retrying
// cannot fix it.
type usageError struct {
	msg string
	err error // a sentinel it is, if any
}

func (e *usageError) Error() string   { return e.msg }
func (e *usageError) Unwrap() error   { return e.err }
func (e *usageError) Permanent() bool { return true }

// Lanes an effect may run on (Scope.Lane), as pkg/catalog names them.
const (
	LaneDurable    = "DURABLE"
	LaneBestEffort = "BEST_EFFORT"
)

// Scope is the delivery of one event to one subscription that effects
// belong to. The lanes bind it (Recorder.Bind) before they run a handler.
type Scope struct {
	Tenant       string
	EventID      string
	Seq          int64
	Subscription string
	// Lane is LaneDurable or LaneBestEffort.
	Lane string
	// Token identifies the delivery; every run of the handler within it
	// shares it, and no other delivery has it.
	Token string
}

// Config configures a Recorder. Zero values take the defaults.
type Config struct {
	Store   Store // required: NewDynamoStore on the state table, or NewMemoryStore
	Logger  *slog.Logger
	Metrics *obs.Metrics
	// Retention is how long a record is kept (default 30 days, as long as
	// the claims: longer than any redelivery).
	Retention time.Duration
	Now       func() time.Time
}

// Recorder keeps effect records in its Store. It is safe for concurrent use.
type Recorder struct{ cfg Config }

// New returns a Recorder.
func New(cfg Config) (*Recorder, error) {
	if cfg.Store == nil {
		return nil, errors.New("effect: Config.Store is nil; use NewDynamoStore on the state table")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 30 * 24 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Recorder{cfg: cfg}, nil
}

// Store returns the recorder's store.
func (r *Recorder) Store() Store { return r.cfg.Store }

type bindingKey struct{}

// binding is one delivery to one subscription: the handler's runs within
// it (the DURABLE lane retries a handler) share it.
type binding struct {
	rec   *Recorder
	scope Scope

	mu   sync.Mutex
	done map[Key]bool // effects this delivery did, whose done write may have failed
}

// Bind returns ctx with scope bound: effect.Do in a handler run with it
// records its effects there. A nil Recorder returns ctx as it is.
func (r *Recorder) Bind(ctx context.Context, scope Scope) context.Context {
	if r == nil {
		return ctx
	}
	return context.WithValue(ctx, bindingKey{}, &binding{rec: r, scope: scope})
}

func (b *binding) didHere(k Key) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done[k]
}

func (b *binding) setDidHere(k Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done == nil {
		b.done = map[Key]bool{}
	}
	b.done[k] = true
}

// validName is an effect name's form: ^[a-z0-9][a-z0-9._-]{0,63}$.
func validName(name string) bool { return ident.Word(name, 64, ident.LowerDigit, nameChar) }

func nameChar(c byte) bool { return ident.LowerDigitUnderscoreHyphen(c) || c == '.' }

// Do performs the effect fn once for the event being handled, under the
// name name (unique within the subscription; lower-case letters, digits,
// '.', '_' and '-', at most 64). fn gets the effect's key
// ("<event id>:<subscription>:<name>"), to hand to a provider that takes an
// idempotency key. See the package doc for what happens on each failure.
//
// Do returns nil when the effect is done (now, or by an earlier delivery);
// fn's error (wrapped) when it failed and was released for a retry; an
// *UnknownError under AtMostOnce when its outcome is unknown; any other
// error when recording failed (the delivery is then retried).
func Do(ctx context.Context, name string, fn func(ctx context.Context, key string) error, opts ...Option) error {
	b, _ := ctx.Value(bindingKey{}).(*binding)
	if b == nil {
		// A wiring mistake: retrying cannot fix it, so it dead-letters at once.
		return &usageError{msg: fmt.Sprintf("effect %s: %v", name, ErrNotBound), err: ErrNotBound}
	}
	if !validName(name) {
		return &usageError{msg: fmt.Sprintf("effect name %q: want 1 to 64 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit", name)}
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.mode == AtMostOnce && b.scope.Lane != LaneDurable {
		return &usageError{msg: fmt.Sprintf("effect %s: AtMostOnce needs the DURABLE lane, where an effect of unknown outcome is parked as a dead letter; on %s use AtLeastOnce with an idempotent provider", name, b.scope.Lane)}
	}
	return b.rec.do(ctx, b, Key{EventID: b.scope.EventID, Subscription: b.scope.Subscription, Name: name}, fn, o)
}

func (r *Recorder) do(ctx context.Context, b *binding, k Key, fn func(context.Context, string) error, o options) error {
	log := r.cfg.Logger.With(slog.String(obs.KeySubscription, k.Subscription), slog.String(obs.KeyEffect, k.Name),
		slog.String(obs.KeyEffectKey, k.String()), slog.String(obs.KeyMode, o.mode.String()))
	if b.didHere(k) {
		// An earlier run of the handler in this delivery did the effect and
		// then failed recording it: record it, never do it again here.
		return r.done(ctx, b, k, log)
	}
	if err := r.start(ctx, b, k, o, log); err != nil {
		if errors.Is(err, errSkip) {
			return nil
		}
		return err
	}
	if ferr := fn(ctx, k.String()); ferr != nil {
		var md *maybeDoneError
		if o.mode == AtMostOnce && errors.As(ferr, &md) {
			wctx, cancel := detached(ctx)
			defer cancel()
			if err := r.cfg.Store.MarkUnknown(wctx, k, b.scope.Token, r.cfg.Now()); err != nil {
				return errors.Join(fmt.Errorf("effect %s: %w", k, ferr), fmt.Errorf("mark it unknown: %w", err))
			}
			return r.unknown(ctx, log, k, "its attempt failed and may have happened: "+ferr.Error())
		}
		wctx, cancel := detached(ctx)
		defer cancel()
		if err := r.cfg.Store.Release(wctx, k, b.scope.Token); err != nil {
			log.WarnContext(ctx, "effect failed and releasing its record failed too; a later delivery will find it started",
				obs.Err(err), obs.ErrAt(obs.KeyEffectErr, ferr))
			return errors.Join(fmt.Errorf("effect %s: %w", k, ferr), fmt.Errorf("release its record: %w", err))
		}
		return fmt.Errorf("effect %s: %w", k, ferr)
	}
	b.setDidHere(k)
	return r.done(ctx, b, k, log)
}

// errSkip: the effect is done already; Do returns nil without doing it.
var errSkip = errors.New("skip")

// start records the start of k by this delivery, or says why not: errSkip
// (done already), an *UnknownError, or the store's error.
func (r *Recorder) start(ctx context.Context, b *binding, k Key, o options, log *slog.Logger) error {
	for try := 0; ; try++ {
		now := r.cfg.Now()
		rec := Record{Key: k, Tenant: b.scope.Tenant, Seq: b.scope.Seq, Status: StatusStarted, Token: b.scope.Token,
			UpdatedAt: now, ExpiresAt: now.Add(r.cfg.Retention)}
		prev, started, err := r.cfg.Store.Start(ctx, rec, o.mode == AtLeastOnce)
		if err != nil {
			return fmt.Errorf("effect %s: record its start: %w", k, err)
		}
		if started {
			switch {
			case prev.Status == StatusRedo:
				log.InfoContext(ctx, "doing an effect of unknown outcome again, as an operator decided")
			case prev.Found() && prev.Token != b.scope.Token && o.idempotent:
				log.InfoContext(ctx, "an earlier delivery started this effect and never recorded it done; doing it again (the provider deduplicates by key)",
					slog.Int(obs.KeyAttempts, prev.Attempts))
			case prev.Found() && prev.Token != b.scope.Token:
				log.WarnContext(ctx, "an earlier delivery started this effect and never recorded it done; doing it again (at least once): it may happen twice",
					slog.Int(obs.KeyAttempts, prev.Attempts))
				r.cfg.Metrics.Count(keys.MetricEffectRedone, 1, "Subscription", k.Subscription, "Effect", k.Name)
			}
			return nil
		}
		switch prev.Status {
		case StatusDone:
			log.DebugContext(ctx, "effect done by an earlier delivery; skipped")
			return errSkip
		case StatusUnknown:
			log.InfoContext(ctx, "effect still of unknown outcome, awaiting an operator's decision; not done")
			return &UnknownError{Key: k, Reason: "still awaiting a decision"}
		case StatusStarted: // another delivery's, and AtMostOnce
			err := r.cfg.Store.MarkUnknown(ctx, k, prev.Token, now)
			if errors.Is(err, ErrNotHeld) && try < 3 {
				continue // it moved meanwhile: judge it again
			}
			if err != nil {
				return fmt.Errorf("effect %s: mark it unknown: %w", k, err)
			}
			return r.unknown(ctx, log, k, "an earlier delivery started it and never recorded it done")
		}
		return fmt.Errorf("effect %s: record in state %q, which this version does not know", k, prev.Status)
	}
}

func (r *Recorder) unknown(ctx context.Context, log *slog.Logger, k Key, reason string) error {
	log.ErrorContext(ctx, "effect of unknown outcome not done again (at most once); its subscription is dead-lettered until an operator decides",
		slog.String(obs.KeyReason, reason))
	r.cfg.Metrics.Count(keys.MetricEffectUnknown, 1, "Subscription", k.Subscription, "Effect", k.Name)
	return &UnknownError{Key: k, Reason: reason}
}

// done records k done by this delivery.
func (r *Recorder) done(ctx context.Context, b *binding, k Key, log *slog.Logger) error {
	now := r.cfg.Now()
	wctx, cancel := detached(ctx)
	defer cancel()
	err := r.cfg.Store.Done(wctx, k, b.scope.Token, now, now.Add(r.cfg.Retention))
	switch {
	case errors.Is(err, ErrNotHeld):
		log.WarnContext(ctx, "effect done, but another delivery took its record over meanwhile; it may have happened twice")
		r.cfg.Metrics.Count(keys.MetricEffectRedone, 1, "Subscription", k.Subscription, "Effect", k.Name)
		return nil
	case err != nil:
		return fmt.Errorf("effect %s done, but recording it failed: %w", k, err)
	}
	return nil
}

// detached returns ctx without its cancellation, for the writes that record
// what already happened: an effect done must be recorded even when the
// invocation is ending. It shares ctx's values.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}
