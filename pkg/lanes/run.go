package lanes

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// Config is what every dispatcher needs besides its registry.
type Config struct {
	Logger  *slog.Logger // default slog.Default()
	Metrics *obs.Metrics // nil writes EMF to stdout
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
	ctx, err := tenancy.WithTenant(ctx, e.TenantID)
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
		attrs = append(attrs, slog.Any("discriminator", map[string]any{t.Discriminator: e.Payload[t.Discriminator]}))
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
