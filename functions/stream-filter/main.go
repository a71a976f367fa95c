// Command stream-filter is the events Pipe's enrichment: stream records of
// the events table in, envelopes of new event rows out (package enrich).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fourlanes/fourlanes/functions/stream-filter/enrich"
	"github.com/fourlanes/fourlanes/pkg/example"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

func main() {
	log := obs.Setup()
	ctx := context.Background()
	cat, err := example.Catalog()
	if err != nil {
		log.ErrorContext(ctx, "stream-filter cannot start: invalid catalog", slog.String(obs.KeyErr, err.Error()))
		os.Exit(1)
	}
	h, err := enrich.New(enrich.Config{Catalog: cat, Log: log})
	if err != nil {
		log.ErrorContext(ctx, "stream-filter cannot start", slog.String(obs.KeyErr, err.Error()))
		os.Exit(1)
	}
	enrich.LogServed(ctx, log, cat)
	// enrich writes its own metrics as it counts them (enrich.Config.EMF).
	lambda.StartWithOptions(obs.PerInvocation(nil, h.Handle), lambda.WithEnableSIGTERM(func() {
		log.Info("stream-filter shutting down")
	}))
}
