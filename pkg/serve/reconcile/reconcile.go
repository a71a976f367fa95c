// Package reconcile is the entry point of fourlanes' reconcile function: its main
// calls Run and links only the AWS clients this function uses.
package reconcile

import (
	"log/slog"
	"os"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/notary"
	"github.com/fourlanes/fourlanes/pkg/obs"
	rec "github.com/fourlanes/fourlanes/pkg/reconcile"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/boot"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/signing"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/wire"
	"github.com/fourlanes/fourlanes/pkg/tracing"
)

// Run runs reconcile behind its Function URL and its schedules: it
// re-walks tenants' hash chains, compares them with the notary's signed
// view (it never signs), reports each DURABLE
// subscription's delivery audit and counts open dead letters (package
// reconcile).
func Run(a app.Application) {
	b := boot.Start(keys.FnReconcile)
	cat := wire.Catalog(b, a)
	env := boot.Get(awsenv.Require(keys.EnvEventsTable, keys.EnvStateTable)).Or(b, "environment")
	cfg := wire.AWS(b)
	db := awsenv.DynamoDB(cfg)
	events := boot.Get(eventstore.New(db, eventstore.Config{Table: env[keys.EnvEventsTable]})).Or(b, "event store") // reads only: no Catalog
	claims := delivery.NewDynamoStore(db, env[keys.EnvStateTable]).WithLog(env[keys.EnvEventsTable])
	// Checkpoints: signed with the KMS key, kept in the Object Lock bucket.
	rows := rec.NewDynamoState(db, env[keys.EnvStateTable])
	state := boot.Get(signing.State(b.Ctx, cfg, rows, b.Log)).Or(b, "signed checkpoints")
	// The consumer writes no watermark: the audit derives each from its
	// checkpoint and the claims after it, and writes the checkpoint on.
	carry := boot.Get(delivery.NewWatermarkReader(claims, cat)).Or(b, "watermark reader")
	r := boot.Get(rec.New(rec.Config{
		Log:        events,
		Watermarks: claims,
		Carry:      carry,
		// The delivery audit covers the application's DURABLE subscriptions.
		Subscriptions: delivery.DurableSubscriptions(cat),
		// Each subscription's start and backfill, and where an absent
		// watermark begins.
		Starts:      claims,
		Declared:    delivery.DeclaredStarts(cat),
		DeadLetters: claims,
		State:       state,
		// The notary's view of each chain: a walk compares the table with it.
		Notary: notary.NewDynamoStore(db, env[keys.EnvStateTable]),
		Rounds: rows, // scheduled rounds' cursors (scheduled=true)
		Logger: b.Log,
	})).Or(b, "reconciler")
	b.Log.InfoContext(b.Ctx, "reconcile serving GET /?tenant=T and GET / (every tenant, paged) on its Function URL, and scheduled rounds (scheduled=true, direct invoke only)",
		slog.String(obs.KeyFunction, keys.FnReconcile), slog.String(obs.KeyEventsTable, env[keys.EnvEventsTable]),
		slog.String(obs.KeyStateTable, env[keys.EnvStateTable]), slog.String(obs.KeyTracing, tracing.Mode()),
		slog.Bool(obs.KeyTracingCompiled, tracing.Available))
	access := boot.Get(rec.ParseTenantAccess(os.Getenv(keys.EnvReconcileAccess))).Or(b, "environment")
	if access == nil {
		b.Log.InfoContext(b.Ctx, "every caller the Function URL admits sees every tenant ("+keys.EnvReconcileAccess+" unset)")
	}
	boot.Run(b, rec.NewHandler(r, b.Log).WithAccess(access).Handle)
}
