// Package tamperwatch is the entry point of fourlanes' tamper-watch
// function: its main calls Run. It needs no application and links no AWS
// service client.
package tamperwatch

import (
	"os"

	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/boot"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/wire"
	"github.com/fourlanes/fourlanes/pkg/tamper"
)

// Run runs tamper-watch: it reads the events table's stream beside the Pipe
// (filtered to MODIFY and REMOVE) and reports every change to the
// insert-only log (package tamper).
func Run() {
	b := boot.Start(keys.FnTamperWatch)
	h := &tamper.Handler{Logger: b.Log, Metrics: b.Metrics}
	// With the state table, it also watches that table's stream for the
	// deletes of dead letters, claims and watermarks (infra/backbone gives
	// it the table; a stack deployed before that gives none).
	if state := os.Getenv(keys.EnvStateTable); state != "" {
		h.StateTable, h.State = state, awsenv.DynamoDB(wire.AWS(b))
	}
	b.Log.Info("tamper-watch watching the events stream for MODIFY and REMOVE", obs.KeyFunction, keys.FnTamperWatch,
		"state_table", h.StateTable)
	boot.RunErr(b, h.Handle)
}
