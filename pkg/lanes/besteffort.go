package lanes

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tracing"
)

// BestEffort dispatches the BEST_EFFORT lane: change events (record.*) from
// the change feed. Unordered and duplicate-tolerant (handlers apply by
// version), with no dead letter and no back-pressure. It is safe for
// concurrent use.
type BestEffort struct {
	reg *catalog.Registry
	cfg Config
}

// NewBestEffort returns the BEST_EFFORT dispatcher over reg.
func NewBestEffort(reg *catalog.Registry, cfg Config) *BestEffort {
	return &BestEffort{reg: reg, cfg: cfg}
}

// ErrNotChangeEvent: BEST_EFFORT carries change events only.
var ErrNotChangeEvent = errors.New("not a change event")

// SubscriptionError is one subscription's failure on the BEST_EFFORT lane.
type SubscriptionError struct {
	Subscription string
	Err          error
}

func (e *SubscriptionError) Error() string {
	return "subscription " + e.Subscription + ": " + e.Err.Error()
}
func (e *SubscriptionError) Unwrap() error { return e.Err }

// Dispatch runs every BEST_EFFORT subscription matching the change event e,
// with e's tenant bound, each isolated from the others (a panic becomes an
// error). Every failure is logged and counted (keys.MetricBestEffortFailures)
// here; the joined *SubscriptionErrors are returned so the change feed may
// retry the record within its own bounded budget, or ignore them: the lane
// promises no delivery, and projections are repaired by re-reading the
// primary. An unreadable schema version is logged and counted but not
// returned (a retry cannot fix it). An event that is not a change event is
// refused with ErrNotChangeEvent.
func (d *BestEffort) Dispatch(ctx context.Context, e envelope.Envelope) error {
	if err := changeEvent(e); err != nil {
		return err
	}
	hctx, err := HandlerContext(ctx, e, catalog.BestEffort)
	if err != nil {
		return err
	}
	return d.dispatch(hctx, e)
}

// DispatchBound is Dispatch for a context that HandlerContext already bound
// to e on BEST_EFFORT (the change feed binds it to write e's row and log):
// it does not bind again.
func (d *BestEffort) DispatchBound(hctx context.Context, e envelope.Envelope) error {
	if err := changeEvent(e); err != nil {
		return err
	}
	return d.dispatch(hctx, e)
}

func changeEvent(e envelope.Envelope) error {
	if _, _, ok := catalog.ParseChangeType(e.Type); !ok {
		return fmt.Errorf("BEST_EFFORT dispatch of %s: %w (want %s<ENTITY> or %s<ENTITY>)", e.Type, ErrNotChangeEvent, catalog.ChangeWrittenPrefix, catalog.ChangeDeletedPrefix)
	}
	return nil
}

func (d *BestEffort) dispatch(hctx context.Context, e envelope.Envelope) error {
	rt := d.reg.Route(e.Type, catalog.BestEffort)
	ReportRoute(hctx, d.cfg, string(catalog.BestEffort), d.reg.Catalog(), e, rt)
	var errs []error
	for _, b := range rt.Bound {
		// Effects (pkg/effect) are recorded under a token of this dispatch:
		// a redelivered change event is another dispatch.
		ctx := d.cfg.Effects.Bind(hctx, effect.Scope{Tenant: e.TenantID, EventID: e.ID, Seq: e.Seq, Subscription: b.Name,
			Lane: effect.LaneBestEffort, Token: token()})
		// The work joins the trace of the write that made the change.
		ctx, endSpan := tracing.Continue(ctx, "dispatch "+b.Name, e.TraceParent,
			tracing.String(keys.SpanAttrSubscription, b.Name), tracing.String(keys.SpanAttrEventType, e.Type))
		err := Guard(b)(ctx, e)
		endSpan(err)
		if err == nil {
			d.cfg.Metrics.Milliseconds(keys.MetricDeliveryLag, Lag(e, time.Now()), "Subscription", b.Name)
			continue
		}
		d.failed(hctx, b, e, err)
		var ve *VersionError
		if errors.As(err, &ve) {
			continue // logged and counted; a retry cannot fix it
		}
		errs = append(errs, &SubscriptionError{Subscription: b.Name, Err: err})
	}
	return errors.Join(errs...)
}

func (d *BestEffort) failed(ctx context.Context, b catalog.Bound, e envelope.Envelope, err error) {
	d.cfg.logger().ErrorContext(ctx, "BEST_EFFORT subscription failed",
		slog.String(obs.KeySubscription, b.Name), slog.String(obs.KeyEventType, e.Type), obs.Err(err))
	d.cfg.Metrics.Count(keys.MetricBestEffortFailures, 1, "Subscription", b.Name)
}

// token identifies one dispatch to one subscription (96 random bits).
func token() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Lag is how long after its commit e was handled at now: now − occurred_at,
// which the store sets just before the commit (for a change event, the
// stream record's creation time). Never negative: a clock behind the
// emitter's counts as no lag.
func Lag(e envelope.Envelope, now time.Time) time.Duration {
	t, err := time.Parse(time.RFC3339Nano, e.OccurredAt)
	if err != nil || now.Before(t) {
		return 0
	}
	return now.Sub(t)
}
