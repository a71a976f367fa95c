// Package dlqrepair is the entry point of fourlanes' dlq-repair function: its main
// calls Run and links only the AWS clients this function uses.
package dlqrepair

import (
	"os"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/changefeed"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/repair"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/boot"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/wire"
)

// Run runs dlq-repair: it drains every dead-letter queue by re-reading
// the source of truth, redelivering to the application's DURABLE handlers
// and re-running its BEST_EFFORT ones (package repair).
func Run(a app.Application) {
	b := boot.Start(keys.FnDLQRepair)
	cat := wire.Catalog(b, a)
	both := []catalog.Lane{catalog.Durable, catalog.BestEffort}
	names := append([]string{keys.EnvDurableDLQURL, keys.EnvPipeDLQURL, keys.EnvChangeFeedDLQURL, keys.EnvEventsTable,
		keys.EnvStateTable, keys.EnvChangeFeedTable}, a.Env(both...)...)
	env, tables, err := changefeed.RequireEnv(cat.Entities(), names...)
	if err != nil {
		b.Fail("environment", err)
	}
	cfg := wire.AWS(b)
	db := awsenv.DynamoDB(cfg)
	state := env[keys.EnvStateTable]
	reg, re := wire.Bind(b, a, cat, env, db, state, both...)
	if err := reg.LogServed(b.Ctx, b.Log, catalog.Durable, catalog.BestEffort); err != nil {
		b.Fail("registry", err)
	}
	claims := boot.Get(delivery.NewDynamoStore(db, state).PerPairClaims(os.Getenv(keys.EnvPerPairClaims))).Or(b, "environment")
	effects := wire.Effects(b, db, state)
	d := boot.Get(delivery.New(reg, delivery.Config{Store: claims, Effects: effects, Logger: b.Log, Metrics: b.Metrics})).Or(b, "deliverer")
	events := boot.Get(eventstore.New(db, eventstore.Config{Table: env[keys.EnvEventsTable], Catalog: cat})).Or(b, "event log")
	feed := boot.Get(changefeed.New(changefeed.Config{
		DB: db, Table: env[keys.EnvChangeFeedTable], Tables: tables,
		Dispatcher: lanes.NewBestEffort(reg, lanes.Config{Logger: b.Log, Metrics: b.Metrics, Effects: effects}),
		Logger:     b.Log, Metrics: b.Metrics,
	})).Or(b, "feed")
	projections := make([]repair.Reapplier, len(re))
	for i, p := range re {
		projections[i] = p
	}
	r := boot.Get(repair.New(repair.Config{
		SQS: sqs.NewFromConfig(cfg), Streams: dynamodbstreams.NewFromConfig(cfg), DB: db, Log: events, Deliverer: d, DeadLetters: claims,
		Feed: feed, Projections: projections,
		DurableDLQ: env[keys.EnvDurableDLQURL], PipeDLQ: env[keys.EnvPipeDLQURL], ChangeFeedDLQ: env[keys.EnvChangeFeedDLQURL],
		EventsTable: env[keys.EnvEventsTable], StateTable: state,
		Logger: b.Log, Metrics: b.Metrics,
	})).Or(b, "repairer")
	boot.Run(b, r.Handle)
}
