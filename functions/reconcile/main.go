// Command reconcile serves the reconcile Function URL (payload format 2.0,
// BUFFERED): it re-walks tenants' hash chains and counts their open dead
// letters (package pkg/reconcile).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/example"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
	"github.com/fourlanes/fourlanes/pkg/tracing"
)

func main() {
	log := obs.Setup()
	ctx := context.Background()
	fail := func(msg string, err error) {
		log.ErrorContext(ctx, "reconcile cannot start: "+msg, slog.String(obs.KeyErr, err.Error()))
		os.Exit(1)
	}
	env, err := awsenv.Require(keys.EnvEventsTable, keys.EnvStateTable)
	if err != nil {
		fail("environment", err)
	}
	cfg, err := awsenv.Load(ctx)
	if err != nil {
		fail("AWS config", err)
	}
	db := awsenv.DynamoDB(cfg)
	events, err := eventstore.New(db, eventstore.Config{Table: env[keys.EnvEventsTable]}) // reads only: no Catalog
	if err != nil {
		fail("event store", err)
	}
	// The delivery audit covers the application's DURABLE subscriptions, as
	// durable-consumer knows them: from its catalog.
	cat, err := example.Catalog()
	if err != nil {
		fail("invalid catalog", err)
	}
	claims := delivery.NewDynamoStore(db, env[keys.EnvStateTable])
	// Checkpoints: signed with the KMS key, kept in the Object Lock bucket.
	rows := reconcile.NewDynamoState(db, env[keys.EnvStateTable])
	state, err := checkpointState(ctx, cfg, rows, log)
	if err != nil {
		fail("signed checkpoints", err)
	}
	r, err := reconcile.New(reconcile.Config{
		Log:           events,
		Watermarks:    claims,
		Subscriptions: delivery.DurableSubscriptions(cat),
		DeadLetters:   claims,
		State:         state,
		Rounds:        rows, // scheduled rounds' cursors (scheduled=true)
		Logger:        log,
	})
	if err != nil {
		fail("reconciler", err)
	}
	log.InfoContext(ctx, "reconcile serving GET /?tenant=T and GET / (every tenant, paged) on its Function URL, and scheduled rounds (scheduled=true, direct invoke only)",
		slog.String(obs.KeyFunction, keys.FnReconcile), slog.String("events_table", env[keys.EnvEventsTable]),
		slog.String("state_table", env[keys.EnvStateTable]), slog.String("tracing", tracing.Mode()),
		slog.Bool("tracing_compiled", tracing.Available))
	lambda.StartWithOptions(obs.PerInvocation(nil, reconcile.NewHandler(r, log).Handle), lambda.WithEnableSIGTERM(func() {
		log.Info("reconcile shutting down")
	}))
}
