// Package heartbeat is the stack's own pulse: a synthetic event written on a
// schedule (the heartbeat function, run by EventBridge Scheduler) through
// the same path as every event (Emit into the hash-chained log, the events
// stream, the Pipe with stream-filter, the FIFO queue, durable-consumer),
// and a built-in DURABLE subscriber that records each one's arrival as EMF
// metrics. An alarm on those metrics that treats missing data as breaching
// fires when any hop stops, even on a stack that carries no traffic of its
// own, where no other metric moves.
//
// The heartbeat is an ordinary event of an ordinary chain, so it is
// chained, notarised, reconciled, watermarked and repaired like every
// other: its chain (tenancy.HeartbeatTenant) is reserved, so it never
// mixes with a team's tenant, and its type is declared by the framework's
// module (Module), which every application carries (app.Application).
package heartbeat

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// Beat is the payload of fourlanes.heartbeat, schema version 1.
type Beat struct {
	// Writer names the function that wrote it (keys.FnHeartbeat).
	Writer string `json:"writer"`
}

// Module declares the heartbeat's event type and its subscriber. Its
// handler receiver is a *Monitor.
var Module = catalog.Module[*Monitor]{
	Name: keys.HeartbeatModule,
	Doc:  "fourlanes' built-in module: the stack's heartbeat, written on a schedule and watched on the DURABLE lane.",
	Emits: []catalog.EventType{
		catalog.Event[Beat](keys.HeartbeatType, "A synthetic event the stack writes to itself on a schedule, on the reserved chain "+tenancy.HeartbeatTenant+"."),
	},
	Subscribes: []catalog.Subscription[*Monitor]{{
		Name:    keys.HeartbeatSubscription,
		Types:   keys.HeartbeatType,
		Lane:    catalog.Durable,
		Reads:   []int{1},
		Doc:     "Records each heartbeat's arrival (EMF HeartbeatsDelivered, HeartbeatLag by Lane).",
		Handler: (*Monitor).OnBeat,
	}},
}

// Monitor records heartbeats as they arrive.
type Monitor struct {
	Logger  *slog.Logger
	Metrics *obs.Metrics
	// Now is the clock lag is measured with; nil means time.Now.
	Now func() time.Time
}

// OnBeat records one heartbeat delivered on the DURABLE lane: one
// HeartbeatsDelivered and its HeartbeatLag (commit → handled), by Lane. A
// heartbeat on any chain but the heartbeat's own is not the stack's pulse
// (an emitter with the application's catalog wrote it): it is logged at
// WARN and counted as nothing, so it cannot keep the alarm quiet.
func (m *Monitor) OnBeat(ctx context.Context, e envelope.Envelope) error {
	if e.TenantID != tenancy.HeartbeatTenant {
		m.logger().WarnContext(ctx, "heartbeat on a chain that is not "+tenancy.HeartbeatTenant+": not counted",
			slog.String(obs.KeyTenant, e.TenantID), slog.String(obs.KeyEventID, e.ID))
		return nil
	}
	now := time.Now
	if m.Now != nil {
		now = m.Now
	}
	lag := lanes.Lag(e, now())
	m.Metrics.Count(keys.MetricHeartbeatsDelivered, 1, "Lane", string(catalog.Durable))
	m.Metrics.Milliseconds(keys.MetricHeartbeatLag, lag, "Lane", string(catalog.Durable))
	m.logger().DebugContext(ctx, "heartbeat delivered", slog.Int64(obs.KeySeq, e.Seq), slog.Int64(obs.KeyLagMS, lag.Milliseconds()))
	return nil
}

func (m *Monitor) logger() *slog.Logger {
	if m.Logger == nil {
		return slog.Default()
	}
	return m.Logger
}

// Catalog is the catalog of the heartbeat alone: what the heartbeat
// writer emits with (it needs no application).
func Catalog() (*catalog.Catalog, error) { return catalog.New(Module.Spec()) }

// Emitter is the part of the event store the writer uses.
type Emitter interface {
	EmitWith(ctx context.Context, in eventstore.EmitInput) (envelope.Envelope, error)
}

var _ Emitter = (*eventstore.Store)(nil)

// Write appends one heartbeat to the heartbeat's chain and returns it. A
// scheduler's retry may write a second one for the same tick: each is an
// event of its own, and the subscriber counts both, which only makes the
// alarm quieter for a minute that was healthy anyway.
func Write(ctx context.Context, store Emitter) (envelope.Envelope, error) {
	e, err := store.EmitWith(tenancy.WithHeartbeat(ctx), eventstore.EmitInput{Type: keys.HeartbeatType, Payload: Beat{Writer: keys.FnHeartbeat}})
	if err != nil {
		return e, fmt.Errorf("write heartbeat: %w", err)
	}
	return e, nil
}
