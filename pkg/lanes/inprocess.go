package lanes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// InProcess dispatches the INLINE and LOCAL lanes; Emit calls it after the
// commit (it implements eventstore.Dispatcher). It is safe for concurrent use.
//
// INLINE subscriptions run in declaration order on the caller's goroutine;
// each runs even if an earlier one failed, and their errors come back joined
// (each an *InlineError) for Emit to return in its *PostCommitError.
//
// LOCAL subscriptions run on their own goroutines, detached from the caller's
// cancellation; a panic, an error or an unreadable schema version is logged
// and counted (keys.MetricLocalFailures) and never reaches the caller. Flush
// waits for them: a Lambda function calls it before its handler returns.
type InProcess struct {
	reg     *catalog.Registry
	cfg     Config
	running tracker
}

// NewInProcess returns the INLINE and LOCAL dispatcher over reg.
func NewInProcess(reg *catalog.Registry, cfg Config) *InProcess {
	return &InProcess{reg: reg, cfg: cfg}
}

// InlineError is an INLINE subscription's failure after the commit.
type InlineError struct {
	Subscription string
	Err          error
}

func (e *InlineError) Error() string {
	return "INLINE subscription " + e.Subscription + ": " + e.Err.Error()
}
func (e *InlineError) Unwrap() error { return e.Err }

// AfterCommit runs the INLINE subscriptions matching e (awaited) and starts
// the LOCAL ones (see Flush).
func (d *InProcess) AfterCommit(ctx context.Context, e envelope.Envelope) error {
	rt := d.reg.Route(e.Type, catalog.Inline, catalog.Local)
	hctx, err := HandlerContext(ctx, e, catalog.Inline)
	if err != nil {
		return err
	}
	ReportRoute(hctx, d.cfg, "IN_PROCESS", d.reg.Catalog(), e, rt)

	// LOCAL first, so they overlap the INLINE work; they are isolated either way.
	for _, b := range rt.Bound {
		if b.Lane == catalog.Local {
			d.startLocal(ctx, b, e)
		}
	}
	var errs []error
	for _, b := range rt.Bound {
		if b.Lane != catalog.Inline {
			continue
		}
		if err := Guard(b)(hctx, e); err != nil {
			d.cfg.logger().ErrorContext(hctx, "INLINE subscription failed after the commit; the caller gets the error",
				slog.String(obs.KeySubscription, b.Name), slog.String(obs.KeyEventType, e.Type), obs.Err(err))
			errs = append(errs, &InlineError{Subscription: b.Name, Err: err})
		}
	}
	return errors.Join(errs...)
}

func (d *InProcess) startLocal(ctx context.Context, b catalog.Bound, e envelope.Envelope) {
	lctx, err := HandlerContext(context.WithoutCancel(ctx), e, catalog.Local)
	if err != nil { // unreachable after a commit (the envelope has a tenant); be loud anyway
		d.localFailed(ctx, b, e, err)
		return
	}
	d.running.add()
	go func() {
		defer d.running.done()
		if err := Guard(b)(lctx, e); err != nil {
			d.localFailed(lctx, b, e, err)
		}
	}()
}

func (d *InProcess) localFailed(ctx context.Context, b catalog.Bound, e envelope.Envelope, err error) {
	attrs := []any{slog.String(obs.KeySubscription, b.Name), slog.String(obs.KeyEventType, e.Type), obs.Err(err)}
	var p *PanicError
	if errors.As(err, &p) {
		attrs = append(attrs, slog.String(obs.KeyStack, string(p.Stack)))
	}
	d.cfg.logger().ErrorContext(ctx, "LOCAL subscription failed; isolated from the caller", attrs...)
	d.cfg.Metrics.Count(keys.MetricLocalFailures, 1, "Subscription", b.Name)
}

// Flush waits until every LOCAL handler started so far has finished, or ctx
// ends. A Lambda function calls it before returning from each invocation,
// with a context that leaves time to respond:
//
//	defer func() { _ = dispatcher.Flush(ctx) }()
//
// On ctx's end it returns an error saying how many handlers were still running.
func (d *InProcess) Flush(ctx context.Context) error {
	if err := d.running.wait(ctx); err != nil {
		return fmt.Errorf("flush LOCAL lane: %d handlers still running: %w", d.running.count(), err)
	}
	return nil
}

// tracker counts running goroutines. Unlike sync.WaitGroup it allows adds
// while another goroutine waits (concurrent Emits during a Flush).
type tracker struct {
	mu   sync.Mutex
	n    int
	idle chan struct{}
}

func (t *tracker) add() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		t.idle = make(chan struct{})
	}
	t.n++
}

func (t *tracker) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.n == 0 {
		close(t.idle)
	}
}

func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

func (t *tracker) wait(ctx context.Context) error {
	for {
		t.mu.Lock()
		if t.n == 0 {
			t.mu.Unlock()
			return nil
		}
		idle := t.idle
		t.mu.Unlock()
		select {
		case <-idle:
			// More may have started meanwhile; look again.
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
