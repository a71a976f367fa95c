// Package dlqrepair is the entry point of fourlanes' dlq-repair function: its main
// calls Run and links only the AWS clients this function uses.
package dlqrepair

import (
	"context"
	"os"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/changefeed"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/projection"
	"github.com/fourlanes/fourlanes/pkg/repair"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/boot"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/seal"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/wire"
)

// Run runs dlq-repair: it drains every dead-letter queue by re-reading
// the source of truth, redelivering to the application's DURABLE handlers
// and re-running its BEST_EFFORT ones (package repair), then keeps the
// projections (a park sweep and a share of a compare).
func Run(a app.Application) {
	b := boot.Start(keys.FnDLQRepair)
	cat := wire.Catalog(b, a)
	mods := a.RunsDurable()
	for _, m := range a.Runs(catalog.BestEffort) {
		if !slices.ContainsFunc(mods, func(x app.Module) bool { return x.Spec.Name == m.Spec.Name }) {
			mods = append(mods, m)
		}
	}
	names := append([]string{keys.EnvDurableDLQURL, keys.EnvPipeDLQURL, keys.EnvChangeFeedDLQURL, keys.EnvEventsTable,
		keys.EnvStateTable, keys.EnvChangeFeedTable}, app.EnvOf(mods)...)
	env, tables, err := changefeed.RequireEnv(cat.Entities(), names...)
	if err != nil {
		b.Fail("environment", err)
	}
	cfg := wire.AWS(b)
	db := awsenv.DynamoDB(cfg)
	seal.Vault(b, cat, cfg, db)
	state := env[keys.EnvStateTable]
	reg, re := wire.BindModules(b, mods, cat, env, db, state)
	if err := reg.LogServed(b.Ctx, b.Log, catalog.Durable, catalog.BestEffort); err != nil {
		b.Fail("registry", err)
	}
	claims := boot.Get(delivery.NewDynamoStore(db, state).PerPairClaims(os.Getenv(keys.EnvPerPairClaims))).Or(b, "environment")
	// The log resolves a subscription's start for a tenant (its watermark
	// begins there), bounds a backfill, and is what a replay must find.
	claims = claims.WithLog(env[keys.EnvEventsTable])
	effects := wire.Effects(b, db, state)
	// Replayed DURABLE handlers emit follow-on events as in durable-consumer.
	// It delivers only what the log holds and its chain covers, as the
	// consumer does: a planted row dead-lettered there stays open here.
	inproc, events := wire.FollowOn(b, a, cat, reg, db, env[keys.EnvEventsTable])
	d := boot.Get(delivery.New(reg, delivery.Config{Store: claims, Log: claims, Effects: effects, Events: events, Logger: b.Log, Metrics: b.Metrics})).Or(b, "deliverer")
	feed := boot.Get(changefeed.New(changefeed.Config{
		DB: db, Table: env[keys.EnvChangeFeedTable], Tables: tables,
		Dispatcher: lanes.NewBestEffort(reg, lanes.Config{Logger: b.Log, Metrics: b.Metrics, Effects: effects}),
		Logger:     b.Log, Metrics: b.Metrics,
	})).Or(b, "feed")
	projections := make([]repair.Reapplier, len(re))
	for i, p := range re {
		projections[i] = p
	}
	grace := boot.Get(repair.ParseRetireGrace(os.Getenv(keys.EnvRetireGrace))).Or(b, "environment")
	r := boot.Get(repair.New(repair.Config{
		SQS: sqs.NewFromConfig(cfg), Streams: dynamodbstreams.NewFromConfig(cfg), DB: db, Log: events, Deliverer: d, DeadLetters: claims,
		Feed: feed, Projections: projections, Backfills: claims, Subscriptions: reg, Cursors: claims,
		Retirer: claims, Declared: append([]string{}, delivery.DurableSubscriptions(cat)...), // non-nil: none declared retires all
		RetireGrace: grace,
		DurableDLQ:  env[keys.EnvDurableDLQURL], PipeDLQ: env[keys.EnvPipeDLQURL], ChangeFeedDLQ: env[keys.EnvChangeFeedDLQURL],
		EventsTable: env[keys.EnvEventsTable], StateTable: state,
		Logger: b.Log, Metrics: b.Metrics,
	})).Or(b, "repairer")
	// After each run, the projections' upkeep: a park sweep and a share of
	// a compare against their tracked tables (package projection).
	receivers := make([]any, len(re))
	for i, p := range re {
		receivers[i] = p
	}
	upkeep := projection.NewMaintenance(db, state, tables, receivers, b.Log, b.Metrics)
	handle := wire.Flushed(b, r.Handle, inproc)
	boot.Run(b, func(ctx context.Context, req repair.Request) (repair.Report, error) {
		rep, err := handle(ctx, req)
		_ = upkeep.Run(ctx) // each failure is logged and counted; the repair report stands
		return rep, err
	})
}
