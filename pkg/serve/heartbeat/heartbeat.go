// Package heartbeat is the entry point of fourlanes' heartbeat function: its
// main calls Run. It needs no application and links only the DynamoDB
// client.
package heartbeat

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	hb "github.com/fourlanes/fourlanes/pkg/heartbeat"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/boot"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/wire"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// Run runs the heartbeat writer: each invocation (EventBridge Scheduler's,
// infra/backbone) appends one fourlanes.heartbeat to the heartbeat's chain
// through Emit (package heartbeat). A failed write fails the invocation:
// Scheduler retries it, the function's Errors alarm fires, and the missing
// beat makes the heartbeat alarm fire too.
func Run() {
	b := boot.Start(keys.FnHeartbeat)
	env := boot.Get(awsenv.Require(keys.EnvEventsTable)).Or(b, "environment")
	cat := boot.Get(hb.Catalog()).Or(b, "heartbeat catalog")
	db := awsenv.DynamoDB(wire.AWS(b))
	store := boot.Get(eventstore.New(db, eventstore.Config{Table: env[keys.EnvEventsTable], Catalog: cat})).Or(b, "event log")
	b.Log.Info("heartbeat writing one event per scheduled invocation", slog.String(obs.KeyFunction, keys.FnHeartbeat),
		slog.String(obs.KeyChain, tenancy.HeartbeatTenant))
	boot.RunErr(b, func(ctx context.Context, _ json.RawMessage) error {
		e, err := hb.Write(ctx, store)
		if err != nil {
			b.Log.ErrorContext(ctx, "heartbeat not written", obs.Err(err))
			return err
		}
		b.Log.InfoContext(ctx, "heartbeat written", slog.String(obs.KeyEventID, e.ID), slog.Int64(obs.KeySeq, e.Seq))
		return nil
	})
}
