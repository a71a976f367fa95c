// Command dlq-repair drains the DURABLE FIFO DLQ, the Pipe DLQ, the change
// feed's on-failure queue and the dead-lettered subscriptions by re-reading
// the source of truth, and answers a report (package pkg/repair).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/changefeed"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/example"
	"github.com/fourlanes/fourlanes/pkg/example/notifications"
	"github.com/fourlanes/fourlanes/pkg/example/search"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/repair"
)

func main() {
	log := obs.Setup()
	ctx := context.Background()
	fail := func(what string, err error) {
		log.ErrorContext(ctx, "dlq-repair cannot start: "+what, slog.String(obs.KeyErr, err.Error()))
		os.Exit(1)
	}
	cat, err := example.Catalog()
	if err != nil {
		fail("invalid catalog", err)
	}
	names := []string{keys.EnvDurableDLQURL, keys.EnvPipeDLQURL, keys.EnvChangeFeedDLQURL, keys.EnvEventsTable,
		keys.EnvStateTable, keys.EnvChangeFeedTable, keys.EnvSearchTable}
	env, tables, err := changefeed.RequireEnv(cat.Entities(), names...)
	if err != nil {
		fail("environment", err)
	}
	cfg, err := awsenv.Load(ctx)
	if err != nil {
		fail("AWS configuration", err)
	}
	db := awsenv.DynamoDB(cfg)
	state := env[keys.EnvStateTable]
	metrics := obs.NewMetrics(nil)

	// The DURABLE subscriptions (to redeliver and replay) and the
	// BEST_EFFORT ones (to re-run the change feed) are bound here.
	projector := &search.Projector{
		Store:  &search.DynamoStore{DB: db, SearchTable: env[keys.EnvSearchTable], StateTable: state},
		Logger: log, Metrics: metrics,
	}
	reg, err := catalog.NewRegistry(cat,
		notifications.Module.Bind(&notifications.Notifier{
			Mailer: notifications.LogMailer{Logger: log}, Sent: &notifications.DynamoSentLog{DB: db, Table: state}, Logger: log,
		}),
		search.Module.Bind(projector),
	)
	if err != nil {
		fail("registry", err)
	}
	if err := reg.LogServed(ctx, log, catalog.Durable, catalog.BestEffort); err != nil {
		fail("registry", err)
	}
	claims := delivery.NewDynamoStore(db, state)
	d, err := delivery.New(reg, delivery.Config{Store: claims, Logger: log, Metrics: metrics})
	if err != nil {
		fail("deliverer", err)
	}
	events, err := eventstore.New(db, eventstore.Config{Table: env[keys.EnvEventsTable], Catalog: cat})
	if err != nil {
		fail("event log", err)
	}
	feed, err := changefeed.New(changefeed.Config{
		DB: db, Table: env[keys.EnvChangeFeedTable], Tables: tables,
		Dispatcher: lanes.NewBestEffort(reg, lanes.Config{Logger: log, Metrics: metrics}),
		Logger:     log, Metrics: metrics,
	})
	if err != nil {
		fail("feed", err)
	}
	r, err := repair.New(repair.Config{
		SQS: awsenv.SQS(cfg), Streams: awsenv.Streams(cfg), DB: db, Log: events, Deliverer: d, DeadLetters: claims,
		Feed: feed, Projections: []repair.Reapplier{projector},
		DurableDLQ: env[keys.EnvDurableDLQURL], PipeDLQ: env[keys.EnvPipeDLQURL], ChangeFeedDLQ: env[keys.EnvChangeFeedDLQURL],
		EventsTable: env[keys.EnvEventsTable], StateTable: state,
		Logger: log, Metrics: metrics,
	})
	if err != nil {
		fail("repairer", err)
	}
	lambda.StartWithOptions(obs.PerInvocation(metrics, r.Handle), lambda.WithEnableSIGTERM(func() {
		log.Info("dlq-repair shutting down")
	}))
}
