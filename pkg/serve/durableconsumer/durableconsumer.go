// Package durableconsumer is the entry point of fourlanes' durable-consumer function: its main
// calls Run and links only the AWS clients this function uses.
package durableconsumer

import (
	"os"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/consumer"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/boot"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/wire"
)

// Run runs durable-consumer, the DURABLE lane: SQS FIFO batches
// of envelopes in, one delivery per (event, subscription) to the
// application's DURABLE handlers, batchItemFailures out (package consumer).
func Run(a app.Application) {
	b := boot.Start(keys.FnDurableConsumer)
	cat := wire.Catalog(b, a)
	durable := []catalog.Lane{catalog.Durable}
	env := wire.Env(b, a, durable, keys.EnvStateTable, keys.EnvEventsTable)
	db := awsenv.DynamoDB(wire.AWS(b))
	state := env[keys.EnvStateTable]
	// DURABLE handlers that emit flush their LOCAL lane through
	// consumer.Config.Flusher; the application value does not bind one yet.
	reg, _ := wire.Bind(b, a, cat, env, db, state, durable...)
	// The prefetch reads the batch's claims and its event rows together;
	// delivery refuses an envelope that is not the log's event at its seq.
	claims := boot.Get(delivery.NewDynamoStore(db, state).PerPairClaims(os.Getenv(keys.EnvPerPairClaims))).Or(b, "environment")
	claims = claims.WithLog(env[keys.EnvEventsTable])
	store := boot.Get(delivery.NewBatchedStore(claims)).Or(b, "claim store")
	d := boot.Get(delivery.New(reg, delivery.Config{Store: store, Log: claims, Effects: wire.Effects(b, db, state), Logger: b.Log, Metrics: b.Metrics})).Or(b, "deliverer")
	h := boot.Get(consumer.New(b.Ctx, consumer.Config{Deliverer: d, Registry: reg, Logger: b.Log, Metrics: b.Metrics})).Or(b, "handler")
	boot.Run(b, h.Handle)
}
