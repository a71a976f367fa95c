// Command durable-consumer is the DURABLE lane: SQS FIFO batches of envelopes
// in, one delivery per (event, subscription), batchItemFailures out
// (package consumer).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fourlanes/fourlanes/functions/durable-consumer/consumer"
	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/example"
	"github.com/fourlanes/fourlanes/pkg/example/notifications"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

func main() {
	log := obs.Setup()
	ctx := context.Background()
	fail := func(what string, err error) {
		log.ErrorContext(ctx, "durable-consumer cannot start: "+what, slog.String(obs.KeyErr, err.Error()))
		os.Exit(1)
	}
	env, err := awsenv.Require(keys.EnvStateTable, keys.EnvEventsTable)
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

	cat, err := example.Catalog()
	if err != nil {
		fail("invalid catalog", err)
	}
	// Every DURABLE subscription of the application is bound here. The
	// example's handlers emit nothing, so there is no LOCAL lane to flush
	// (consumer.Config.Flusher); an application whose DURABLE handlers emit
	// passes its lanes.InProcess.
	reg, err := catalog.NewRegistry(cat, notifications.Module.Bind(&notifications.Notifier{
		Mailer: notifications.LogMailer{Logger: log},
		Sent:   &notifications.DynamoSentLog{DB: db, Table: state},
		Logger: log,
	}))
	if err != nil {
		fail("registry", err)
	}
	// The prefetch reads the batch's claims and its event rows together;
	// Deliver refuses an envelope that is not the log's event at its seq.
	claims := delivery.NewDynamoStore(db, state).WithLog(env[keys.EnvEventsTable])
	store, err := delivery.NewBatchedStore(claims)
	if err != nil {
		fail("claim store", err)
	}
	d, err := delivery.New(reg, delivery.Config{Store: store, Log: claims, Logger: log, Metrics: metrics})
	if err != nil {
		fail("deliverer", err)
	}
	h, err := consumer.New(ctx, consumer.Config{Deliverer: d, Registry: reg, Logger: log, Metrics: metrics})
	if err != nil {
		fail("handler", err)
	}
	lambda.StartWithOptions(obs.PerInvocation(metrics, h.Handle), lambda.WithEnableSIGTERM(func() {
		log.Info("durable-consumer shutting down")
	}))
}
