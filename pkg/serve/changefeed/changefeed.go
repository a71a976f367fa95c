// Package changefeed is the entry point of fourlanes' changefeed function: its main
// calls Run and links only the AWS clients this function uses.
package changefeed

import (
	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	cf "github.com/fourlanes/fourlanes/pkg/changefeed"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/boot"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/seal"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/wire"
)

// Run runs changefeed, the BEST_EFFORT lane: stream records of the
// application's tracked tables in, change events recorded in the change-feed
// table and dispatched to its BEST_EFFORT handlers, failed sequence numbers
// out (package changefeed).
func Run(a app.Application) {
	b := boot.Start(keys.FnChangefeed)
	cat := wire.Catalog(b, a)
	bestEffort := []catalog.Lane{catalog.BestEffort}
	names := append([]string{keys.EnvChangeFeedTable, keys.EnvStateTable}, a.Env(bestEffort...)...)
	env, tables, err := cf.RequireEnv(cat.Entities(), names...)
	if err != nil {
		b.Fail("environment", err)
	}
	cfg := wire.AWS(b)
	db := awsenv.DynamoDB(cfg)
	seal.Vault(b, cat, cfg, db)
	reg, _ := wire.BindModules(b, a.Runs(bestEffort...), cat, env, db, env[keys.EnvStateTable])
	feed := boot.Get(cf.New(cf.Config{
		DB: db, Table: env[keys.EnvChangeFeedTable], Tables: tables,
		Dispatcher: lanes.NewBestEffort(reg, lanes.Config{Logger: b.Log, Metrics: b.Metrics, Effects: wire.Effects(b, db, env[keys.EnvStateTable])}),
		Logger:     b.Log, Metrics: b.Metrics,
	})).Or(b, "feed")
	h := boot.Get(cf.NewHandler(b.Ctx, cf.HandlerConfig{Feed: feed, Registry: reg, Logger: b.Log, Metrics: b.Metrics})).Or(b, "handler")
	boot.Run(b, h.Handle)
}
