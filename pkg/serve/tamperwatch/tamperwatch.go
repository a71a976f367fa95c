// Package tamperwatch is the entry point of fourlanes' tamper-watch
// function: its main calls Run. It needs no application and links no AWS
// service client.
package tamperwatch

import (
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/boot"
	"github.com/fourlanes/fourlanes/pkg/tamper"
)

// Run runs tamper-watch: it reads the events table's stream beside the Pipe
// (filtered to MODIFY and REMOVE) and reports every change to the
// insert-only log (package tamper).
func Run() {
	b := boot.Start(keys.FnTamperWatch)
	h := &tamper.Handler{Logger: b.Log, Metrics: b.Metrics}
	b.Log.Info("tamper-watch watching the events stream for MODIFY and REMOVE", obs.KeyFunction, keys.FnTamperWatch)
	boot.RunErr(b, h.Handle)
}
