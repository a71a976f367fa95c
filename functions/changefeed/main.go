// Command changefeed is the BEST_EFFORT lane: stream records of tracked
// tables in (a Lambda event source mapping), change events recorded in the
// change-feed table and dispatched, failed sequence numbers out
// (package pkg/changefeed).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/changefeed"
	"github.com/fourlanes/fourlanes/pkg/example"
	"github.com/fourlanes/fourlanes/pkg/example/search"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

func main() {
	log := obs.Setup()
	ctx := context.Background()
	fail := func(what string, err error) {
		log.ErrorContext(ctx, "changefeed cannot start: "+what, slog.String(obs.KeyErr, err.Error()))
		os.Exit(1)
	}
	cat, err := example.Catalog()
	if err != nil {
		fail("invalid catalog", err)
	}
	env, tables, err := changefeed.RequireEnv(cat.Entities(), keys.EnvChangeFeedTable, keys.EnvSearchTable, keys.EnvStateTable)
	if err != nil {
		fail("environment", err)
	}
	cfg, err := awsenv.Load(ctx)
	if err != nil {
		fail("AWS configuration", err)
	}
	db := awsenv.DynamoDB(cfg)
	metrics := obs.NewMetrics(nil)

	// Every BEST_EFFORT subscription of the application is bound here.
	reg, err := catalog.NewRegistry(cat, search.Module.Bind(&search.Projector{
		Store:   &search.DynamoStore{DB: db, SearchTable: env[keys.EnvSearchTable], StateTable: env[keys.EnvStateTable]},
		Logger:  log,
		Metrics: metrics,
	}))
	if err != nil {
		fail("registry", err)
	}
	feed, err := changefeed.New(changefeed.Config{
		DB: db, Table: env[keys.EnvChangeFeedTable], Tables: tables,
		Dispatcher: lanes.NewBestEffort(reg, lanes.Config{Logger: log, Metrics: metrics}),
		Logger:     log, Metrics: metrics,
	})
	if err != nil {
		fail("feed", err)
	}
	h, err := changefeed.NewHandler(ctx, changefeed.HandlerConfig{Feed: feed, Registry: reg, Logger: log, Metrics: metrics})
	if err != nil {
		fail("handler", err)
	}
	lambda.StartWithOptions(obs.PerInvocation(metrics, h.Handle), lambda.WithEnableSIGTERM(func() {
		log.Info("changefeed shutting down")
	}))
}
