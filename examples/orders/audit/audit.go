// Package audit writes an audit line and counts every order event (the
// example's LOCAL subscriber).
package audit

import (
	"context"
	"log/slog"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// Auditor is audit's handler receiver.
type Auditor struct {
	Logger  *slog.Logger // default slog.Default()
	Metrics *obs.Metrics
}

// OnOrderEvent logs the event and counts it by type.
func (a *Auditor) OnOrderEvent(ctx context.Context, e envelope.Envelope) error {
	log := a.Logger
	if log == nil {
		log = slog.Default()
	}
	log.InfoContext(ctx, "audit", slog.String(obs.KeyEventType, e.Type), slog.Int64(obs.KeySeq, e.Seq),
		slog.Any(obs.KeyOrderID, e.Payload["order_id"]), slog.String(obs.KeyActor, e.ActorID))
	a.Metrics.Count(keys.MetricOrderEvents, 1, "Type", e.Type)
	return nil
}
