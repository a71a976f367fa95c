// Package streamfilter is the entry point of fourlanes' stream-filter function: its main
// calls Run and links only the AWS clients this function uses.
package streamfilter

import (
	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/enrich"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/boot"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/wire"
)

// Run runs stream-filter, the events Pipe's enrichment: stream
// records of the events table in, envelopes of new event rows out, checked
// against the application's declared types (package enrich).
func Run(a app.Application) {
	b := boot.Start(keys.FnStreamFilter)
	cat := wire.Catalog(b, a)
	h := boot.Get(enrich.New(enrich.Config{Catalog: cat, Logger: b.Log, Metrics: b.Metrics})).Or(b, "handler")
	enrich.LogServed(b.Ctx, b.Log, cat)
	boot.Run(b, h.Handle)
}
