package lanes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// The wrappers every dispatcher puts around a subscription's handler, each
// written once. A dispatcher binds the envelope to the context once per
// event (HandlerContext) and calls the handler through Guard:
//
//	INLINE, LOCAL, BEST_EFFORT  Guard(b)
//	DURABLE                     Guard(b, Retrying(r), Counted(&runs))

// Middleware wraps a handler.
type Middleware func(catalog.Handler) catalog.Handler

// Guard returns b's handler wrapped so: first b's schema versions are
// checked (an unreadable one is a *VersionError and nothing runs), then mw
// in order, outermost first, then the handler itself, whose panic becomes a
// *PanicError.
func Guard(b catalog.Bound, mw ...Middleware) catalog.Handler {
	h := Recover(b.Name)(b.Handler)
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return Versioned(b)(h)
}

// PanicError is a handler panic turned into an error.
type PanicError struct {
	Subscription string
	Value        any
	Stack        []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("subscription %s panicked: %v", e.Subscription, e.Value)
}

// Recover turns a panic of the handler of subscription into a *PanicError.
func Recover(subscription string) Middleware {
	return func(next catalog.Handler) catalog.Handler {
		return func(ctx context.Context, e envelope.Envelope) (err error) {
			defer func() {
				if v := recover(); v != nil {
					err = &PanicError{Subscription: subscription, Value: v, Stack: debug.Stack()}
				}
			}()
			return next(ctx, e)
		}
	}
}

// VersionError: the subscription does not declare the envelope's schema
// version readable. It is never defaulted.
type VersionError struct {
	Subscription string
	Type         string
	Version      int
	Reads        []int
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("subscription %s cannot read %s schema version %d (it reads %v); update its handler and Reads", e.Subscription, e.Type, e.Version, e.Reads)
}

// Versioned refuses, with a *VersionError and without calling the handler,
// an envelope whose schema version b cannot read.
func Versioned(b catalog.Bound) Middleware {
	return func(next catalog.Handler) catalog.Handler {
		return func(ctx context.Context, e envelope.Envelope) error {
			if !b.CanRead(e.SchemaVersion) {
				return &VersionError{Subscription: b.Name, Type: e.Type, Version: e.SchemaVersion, Reads: b.Reads}
			}
			return next(ctx, e)
		}
	}
}

// PermanentError marks a handler error that retrying cannot fix (a malformed
// payload, a refused business rule): Retrying gives up at once.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err permanent. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err is, or wraps, a permanent error: a
// *PermanentError, or an error whose Permanent method says so (a package
// that cannot import lanes marks its errors that way: pkg/effect).
func IsPermanent(err error) bool {
	var p *PermanentError
	if errors.As(err, &p) {
		return true
	}
	var m interface{ Permanent() bool }
	return errors.As(err, &m) && m.Permanent()
}

// Retry says how Retrying runs a handler.
type Retry struct {
	// Attempts is how many runs at most (at least one).
	Attempts int
	// Backoff is the pause after the first failure, doubling after each.
	Backoff time.Duration
	// Final reports an error that retrying cannot fix; nil means a
	// permanent error (IsPermanent), a *PanicError or a *VersionError.
	Final func(error) bool
	// OnRetry, when set, is called before each pause with the failed run's
	// number (from 1) and error.
	OnRetry func(ctx context.Context, attempt int, err error)
}

func (r Retry) final(err error) bool {
	if r.Final != nil {
		return r.Final(err)
	}
	var pe *PanicError
	var ve *VersionError
	return IsPermanent(err) || errors.As(err, &pe) || errors.As(err, &ve)
}

// Retrying runs the handler up to r.Attempts times, pausing r.Backoff,
// 2×r.Backoff, … between runs, and stops early on a final error or the
// context's end. On the context's end during a pause it returns an error
// that wraps ctx.Err() and names the last run's error.
func Retrying(r Retry) Middleware {
	return func(next catalog.Handler) catalog.Handler {
		return func(ctx context.Context, e envelope.Envelope) error {
			pause := r.Backoff
			for attempt := 1; ; attempt++ {
				err := next(ctx, e)
				if err == nil || attempt >= r.Attempts || r.final(err) {
					return err
				}
				if r.OnRetry != nil {
					r.OnRetry(ctx, attempt, err)
				}
				t := time.NewTimer(pause)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
				}
				pause *= 2
			}
		}
	}
}

// Counted adds one to *runs each time the handler is called; put it inside
// Retrying to count runs.
func Counted(runs *int) Middleware {
	return func(next catalog.Handler) catalog.Handler {
		return func(ctx context.Context, e envelope.Envelope) error {
			*runs++
			return next(ctx, e)
		}
	}
}

// Config is what every dispatcher needs besides its registry.
type Config struct {
	Logger  *slog.Logger // default slog.Default()
	Metrics *obs.Metrics // nil writes EMF to stdout
	// Effects records BEST_EFFORT handlers' side effects (effect.Do); nil
	// leaves them unbound. INLINE and LOCAL handlers run in the emitter,
	// where a failure reaches the caller or a log: effects are not bound there.
	Effects *effect.Recorder
}

func (c Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.Default()
	}
	return c.Logger
}

// HandlerContext returns ctx bound for handling e on lane: the envelope's
// tenant, actor and correlation, the event's id as causation (so a handler's
// emits record what caused them), and the event id and lane for log records.
func HandlerContext(ctx context.Context, e envelope.Envelope, lane catalog.Lane) (context.Context, error) {
	ctx, err := tenancy.WithChain(ctx, e.TenantID)
	if err != nil {
		return ctx, fmt.Errorf("event %s: %w", e.ID, err)
	}
	if e.ActorID != "" {
		ctx = tenancy.WithActor(ctx, e.ActorID)
	}
	if e.CorrelationID != "" {
		ctx = tenancy.WithCorrelation(ctx, e.CorrelationID)
	}
	ctx = tenancy.WithCausation(ctx, e.ID)
	ctx = obs.WithEvent(ctx, e.ID)
	return obs.WithLane(ctx, string(lane)), nil
}

// ReportRoute makes the absence of work loud. An event that matches no
// subscription on any lane logs a warning naming its type (and its
// discriminator, when declared) and counts keys.MetricUnmatched; a matching
// subscription on the dispatcher's lane that this process did not bind logs
// an error and counts the same metric. It reports whether anything was wrong.
func ReportRoute(ctx context.Context, cfg Config, lane string, cat *catalog.Catalog, e envelope.Envelope, rt catalog.Route) bool {
	log := cfg.logger()
	attrs := []any{slog.String(obs.KeyEventType, e.Type)} // ctx carries tenant and event id
	if t, _, ok := cat.Type(e.Type); ok && t.Discriminator != "" {
		attrs = append(attrs, slog.Any(obs.KeyDiscriminator, map[string]any{t.Discriminator: e.Payload[t.Discriminator]}))
	}
	bad := false
	for _, s := range rt.Unbound {
		log.ErrorContext(ctx, "event matched a subscription that is declared but not registered in this process; it did not run",
			append(attrs, slog.String(obs.KeySubscription, s.Name), slog.String(obs.KeyLane, string(s.Lane)))...)
		cfg.Metrics.Count(keys.MetricUnmatched, 1, "Lane", lane, "Type", e.Type)
		bad = true
	}
	if len(rt.Bound) == 0 && len(rt.Unbound) == 0 {
		if len(rt.Elsewhere) > 0 {
			log.DebugContext(ctx, "no subscriber on this lane; served by other lanes", attrs...)
			return bad
		}
		reason := "no subscription matches this type on any lane"
		if !cat.Known(e.Type) {
			reason = "the type is not in the catalog and no subscription matches it"
		}
		log.WarnContext(ctx, "event matched no subscription", append(attrs, slog.String(obs.KeyReason, reason))...)
		cfg.Metrics.Count(keys.MetricUnmatched, 1, "Lane", lane, "Type", e.Type)
		bad = true
	}
	return bad
}
