package serve

import (
	"github.com/aws/aws-lambda-go/lambda"
	"log/slog"
	"os"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/changefeed"
	"github.com/fourlanes/fourlanes/pkg/consumer"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/enrich"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/notary"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
	"github.com/fourlanes/fourlanes/pkg/repair"
	"github.com/fourlanes/fourlanes/pkg/tamper"
	"github.com/fourlanes/fourlanes/pkg/tracing"
)

// StreamFilter runs stream-filter, the events Pipe's enrichment: stream
// records of the events table in, envelopes of new event rows out, checked
// against the application's declared types (package enrich).
func StreamFilter(a app.Application) {
	b := start(keys.FnStreamFilter)
	cat := b.catalog(a)
	h := get(enrich.New(enrich.Config{Catalog: cat, Logger: b.log, Metrics: b.metrics})).or(b, "handler")
	enrich.LogServed(b.ctx, b.log, cat)
	run(b, h.Handle)
}

// DurableConsumer runs durable-consumer, the DURABLE lane: SQS FIFO batches
// of envelopes in, one delivery per (event, subscription) to the
// application's DURABLE handlers, batchItemFailures out (package consumer).
func DurableConsumer(a app.Application) {
	b := start(keys.FnDurableConsumer)
	cat := b.catalog(a)
	durable := []catalog.Lane{catalog.Durable}
	env := b.env(a, durable, keys.EnvStateTable, keys.EnvEventsTable)
	db := awsenv.DynamoDB(b.aws())
	state := env[keys.EnvStateTable]
	// DURABLE handlers that emit flush their LOCAL lane through
	// consumer.Config.Flusher; the application value does not bind one yet.
	reg, _ := b.bind(a, cat, env, db, state, durable...)
	// The prefetch reads the batch's claims and its event rows together;
	// delivery refuses an envelope that is not the log's event at its seq.
	claims := get(delivery.NewDynamoStore(db, state).PerPairClaims(os.Getenv(keys.EnvPerPairClaims))).or(b, "environment")
	claims = claims.WithLog(env[keys.EnvEventsTable])
	store := get(delivery.NewBatchedStore(claims)).or(b, "claim store")
	d := get(delivery.New(reg, delivery.Config{Store: store, Log: claims, Effects: b.effects(db, state), Logger: b.log, Metrics: b.metrics})).or(b, "deliverer")
	h := get(consumer.New(b.ctx, consumer.Config{Deliverer: d, Registry: reg, Logger: b.log, Metrics: b.metrics})).or(b, "handler")
	run(b, h.Handle)
}

// Changefeed runs changefeed, the BEST_EFFORT lane: stream records of the
// application's tracked tables in, change events recorded in the change-feed
// table and dispatched to its BEST_EFFORT handlers, failed sequence numbers
// out (package changefeed).
func Changefeed(a app.Application) {
	b := start(keys.FnChangefeed)
	cat := b.catalog(a)
	bestEffort := []catalog.Lane{catalog.BestEffort}
	names := append([]string{keys.EnvChangeFeedTable, keys.EnvStateTable}, a.Env(bestEffort...)...)
	env, tables, err := changefeed.RequireEnv(cat.Entities(), names...)
	if err != nil {
		b.fail("environment", err)
	}
	db := awsenv.DynamoDB(b.aws())
	reg, _ := b.bind(a, cat, env, db, env[keys.EnvStateTable], bestEffort...)
	feed := get(changefeed.New(changefeed.Config{
		DB: db, Table: env[keys.EnvChangeFeedTable], Tables: tables,
		Dispatcher: lanes.NewBestEffort(reg, lanes.Config{Logger: b.log, Metrics: b.metrics, Effects: b.effects(db, env[keys.EnvStateTable])}),
		Logger:     b.log, Metrics: b.metrics,
	})).or(b, "feed")
	h := get(changefeed.NewHandler(b.ctx, changefeed.HandlerConfig{Feed: feed, Registry: reg, Logger: b.log, Metrics: b.metrics})).or(b, "handler")
	run(b, h.Handle)
}

// Reconcile runs reconcile behind its Function URL and its schedules: it
// re-walks tenants' hash chains, compares them with the notary's signed view
// (it never signs), reports each DURABLE
// subscription's delivery audit and counts open dead letters (package
// reconcile).
func Reconcile(a app.Application) {
	b := start(keys.FnReconcile)
	cat := b.catalog(a)
	env := get(awsenv.Require(keys.EnvEventsTable, keys.EnvStateTable)).or(b, "environment")
	cfg := b.aws()
	db := awsenv.DynamoDB(cfg)
	events := get(eventstore.New(db, eventstore.Config{Table: env[keys.EnvEventsTable]})).or(b, "event store") // reads only: no Catalog
	claims := delivery.NewDynamoStore(db, env[keys.EnvStateTable])
	// Checkpoints: signed with the KMS key, kept in the Object Lock bucket.
	rows := reconcile.NewDynamoState(db, env[keys.EnvStateTable])
	state := get(checkpointState(b.ctx, cfg, rows, b.log)).or(b, "signed checkpoints")
	r := get(reconcile.New(reconcile.Config{
		Log:        events,
		Watermarks: claims,
		// The delivery audit covers the application's DURABLE subscriptions.
		Subscriptions: delivery.DurableSubscriptions(cat),
		DeadLetters:   claims,
		State:         state,
		// The notary's view of each chain: a walk compares the table with it.
		Notary: notary.NewDynamoStore(db, env[keys.EnvStateTable]),
		Rounds: rows, // scheduled rounds' cursors (scheduled=true)
		Logger: b.log,
	})).or(b, "reconciler")
	b.log.InfoContext(b.ctx, "reconcile serving GET /?tenant=T and GET / (every tenant, paged) on its Function URL, and scheduled rounds (scheduled=true, direct invoke only)",
		slog.String(obs.KeyFunction, keys.FnReconcile), slog.String("events_table", env[keys.EnvEventsTable]),
		slog.String("state_table", env[keys.EnvStateTable]), slog.String("tracing", tracing.Mode()),
		slog.Bool("tracing_compiled", tracing.Available))
	run(b, reconcile.NewHandler(r, b.log).Handle)
}

// DLQRepair runs dlq-repair: it drains every dead-letter queue by re-reading
// the source of truth, redelivering to the application's DURABLE handlers
// and re-running its BEST_EFFORT ones (package repair).
func DLQRepair(a app.Application) {
	b := start(keys.FnDLQRepair)
	cat := b.catalog(a)
	both := []catalog.Lane{catalog.Durable, catalog.BestEffort}
	names := append([]string{keys.EnvDurableDLQURL, keys.EnvPipeDLQURL, keys.EnvChangeFeedDLQURL, keys.EnvEventsTable,
		keys.EnvStateTable, keys.EnvChangeFeedTable}, a.Env(both...)...)
	env, tables, err := changefeed.RequireEnv(cat.Entities(), names...)
	if err != nil {
		b.fail("environment", err)
	}
	cfg := b.aws()
	db := awsenv.DynamoDB(cfg)
	state := env[keys.EnvStateTable]
	reg, re := b.bind(a, cat, env, db, state, both...)
	if err := reg.LogServed(b.ctx, b.log, catalog.Durable, catalog.BestEffort); err != nil {
		b.fail("registry", err)
	}
	claims := get(delivery.NewDynamoStore(db, state).PerPairClaims(os.Getenv(keys.EnvPerPairClaims))).or(b, "environment")
	effects := b.effects(db, state)
	d := get(delivery.New(reg, delivery.Config{Store: claims, Effects: effects, Logger: b.log, Metrics: b.metrics})).or(b, "deliverer")
	events := get(eventstore.New(db, eventstore.Config{Table: env[keys.EnvEventsTable], Catalog: cat})).or(b, "event log")
	feed := get(changefeed.New(changefeed.Config{
		DB: db, Table: env[keys.EnvChangeFeedTable], Tables: tables,
		Dispatcher: lanes.NewBestEffort(reg, lanes.Config{Logger: b.log, Metrics: b.metrics, Effects: effects}),
		Logger:     b.log, Metrics: b.metrics,
	})).or(b, "feed")
	projections := make([]repair.Reapplier, len(re))
	for i, p := range re {
		projections[i] = p
	}
	r := get(repair.New(repair.Config{
		SQS: awsenv.SQS(cfg), Streams: awsenv.Streams(cfg), DB: db, Log: events, Deliverer: d, DeadLetters: claims,
		Feed: feed, Projections: projections,
		DurableDLQ: env[keys.EnvDurableDLQURL], PipeDLQ: env[keys.EnvPipeDLQURL], ChangeFeedDLQ: env[keys.EnvChangeFeedDLQURL],
		EventsTable: env[keys.EnvEventsTable], StateTable: state,
		Logger: b.log, Metrics: b.metrics,
	})).or(b, "repairer")
	run(b, r.Handle)
}

// TamperWatch runs tamper-watch: it reads the events table's stream beside
// the Pipe (filtered to MODIFY and REMOVE) and reports every change to the
// insert-only log (package tamper). It needs no application.
func TamperWatch() {
	b := start(keys.FnTamperWatch)
	h := &tamper.Handler{Logger: b.log, Metrics: b.metrics}
	b.log.Info("tamper-watch watching the events stream for MODIFY and REMOVE", obs.KeyFunction, keys.FnTamperWatch)
	lambda.StartWithOptions(obs.PerInvocationErr(b.metrics, h.Handle), lambda.WithEnableSIGTERM(func() {
		b.log.Info(b.fn + " shutting down")
	}))
}

// Notary runs the notary: it reads the events table's stream (every INSERT,
// MODIFY and REMOVE), keeps each chain's last (seq, hash) seen appended in
// the state table, reports what is not an append, and alone signs
// checkpoints of what it saw appended (package notary). It needs no
// application.
func Notary() {
	b := start(keys.FnNotary)
	env := get(awsenv.Require(keys.EnvEventsTable, keys.EnvStateTable)).or(b, "environment")
	cfg := b.aws()
	db := awsenv.DynamoDB(cfg)
	events := get(eventstore.New(db, eventstore.Config{Table: env[keys.EnvEventsTable]})).or(b, "event store") // reads only
	signed, signer, err := signedState(b.ctx, cfg, nil, b.log)
	if err != nil {
		b.fail("checkpoint signing key", err)
	}
	n := get(notary.New(notary.Config{
		Store: notary.NewDynamoStore(db, env[keys.EnvStateTable]),
		Log:   events,
		Signer: &notary.Checkpoints{S3: checkpointS3(cfg), Bucket: signed.Bucket, Log: signed.Log,
			Signer: signer, Public: signed.Public, Logger: b.log},
		Seeds:   seeds{signed},
		Logger:  b.log,
		Metrics: b.metrics,
	})).or(b, "notary")
	b.log.Info("notary reading the events stream; it alone signs checkpoints", slog.String(obs.KeyFunction, keys.FnNotary),
		slog.String("events_table", env[keys.EnvEventsTable]), slog.String("bucket", signed.Bucket), slog.String("log", signed.Log))
	lambda.StartWithOptions(obs.PerInvocationErr(b.metrics, n.Handle), lambda.WithEnableSIGTERM(func() {
		b.log.Info(b.fn + " shutting down")
	}))
}
