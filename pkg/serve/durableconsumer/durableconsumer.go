// Package durableconsumer is the entry point of fourlanes' durable-consumer function: its main
// calls Run and links only the AWS clients this function uses.
package durableconsumer

import (
	"os"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/consumer"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/boot"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/seal"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/wire"
)

// Run runs durable-consumer, the DURABLE lane: SQS FIFO batches
// of envelopes in, one delivery per (event, subscription) to the
// application's DURABLE handlers, batchItemFailures out (package consumer).
func Run(a app.Application) {
	b := boot.Start(keys.FnDurableConsumer)
	cat := wire.Catalog(b, a)
	mods := a.RunsDurable()
	env := boot.Get(awsenv.Require(append([]string{keys.EnvStateTable, keys.EnvEventsTable, keys.EnvDurableDLQURL}, app.EnvOf(mods)...)...)).Or(b, "environment")
	cfg := wire.AWS(b)
	db := awsenv.DynamoDB(cfg)
	seal.Vault(b, cat, cfg, db)
	state := env[keys.EnvStateTable]
	reg, _ := wire.BindModules(b, mods, cat, env, db, state)
	// DURABLE handlers emit follow-on events through the log (Config.Events);
	// their INLINE and LOCAL subscribers run here, flushed per invocation.
	inproc, events := wire.FollowOn(b, a, cat, reg, db, env[keys.EnvEventsTable])
	// The prefetch reads the batch's claims and its event rows together;
	// delivery refuses an envelope that is not the log's event at its seq.
	claims := boot.Get(delivery.NewDynamoStore(db, state).PerPairClaims(os.Getenv(keys.EnvPerPairClaims))).Or(b, "environment")
	claims = claims.WithLog(env[keys.EnvEventsTable])
	store := boot.Get(delivery.NewBatchedStore(claims)).Or(b, "claim store")
	d := boot.Get(delivery.New(reg, delivery.Config{Store: store, Log: claims, Effects: wire.Effects(b, db, state), Events: events, Logger: b.Log, Metrics: b.Metrics})).Or(b, "deliverer")
	// A poison message goes to the FIFO DLQ at its first receive.
	h := boot.Get(consumer.New(b.Ctx, consumer.Config{Deliverer: d, Registry: reg, Flusher: inproc, Logger: b.Log, Metrics: b.Metrics,
		DeadLetters: sqs.NewFromConfig(cfg), DeadLetterQueue: env[keys.EnvDurableDLQURL]})).Or(b, "handler")
	boot.Run(b, h.Handle)
}
