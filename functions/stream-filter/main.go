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
	metrics := obs.NewMetrics(nil)
	h, err := enrich.New(enrich.Config{Catalog: cat, Log: log, Metrics: metrics})
	if err != nil {
		log.ErrorContext(ctx, "stream-filter cannot start", slog.String(obs.KeyErr, err.Error()))
		os.Exit(1)
	}
	enrich.LogServed(ctx, log, cat)
	lambda.StartWithOptions(obs.PerInvocation(metrics, h.Handle), lambda.WithEnableSIGTERM(func() {
		log.Info("stream-filter shutting down")
	}))
}
