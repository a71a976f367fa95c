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

// Run runs tamper-watch: infra/backbone maps it to the state table's stream
// and it reports the deletes of dead letters, claims and watermarks no
// honest write makes (package tamper). Changes to the log itself are the
// notary's findings (the events stream's readers are the Pipe and the
// notary).
func Run() {
	b := boot.Start(keys.FnTamperWatch)
	h := &tamper.Handler{Logger: b.Log, Metrics: b.Metrics}
	// The state table names the stream it watches and the claims it reads
	// (infra/backbone gives it the table).
	if state := os.Getenv(keys.EnvStateTable); state != "" {
		h.StateTable, h.State = state, awsenv.DynamoDB(wire.AWS(b))
	}
	b.Log.Info("tamper-watch watching the state table's stream for deletes of dead letters, claims and watermarks", obs.KeyFunction, keys.FnTamperWatch,
		obs.KeyStateTable, h.StateTable)
	boot.RunErr(b, h.Handle)
}
