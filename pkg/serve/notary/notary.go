// Package notary is the entry point of fourlanes' notary function: its main
// calls Run and links only the AWS clients this function uses.
package notary

import (
	"log/slog"

	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	nt "github.com/fourlanes/fourlanes/pkg/notary"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/boot"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/signing"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/wire"
)

// Run runs the notary: it reads the events table's stream (every INSERT,
// MODIFY and REMOVE), keeps each chain's last (seq, hash) seen appended in
// the state table, reports what is not an append, and alone signs
// checkpoints of what it saw appended (package notary). It needs no
// application.
func Run() {
	b := boot.Start(keys.FnNotary)
	env := boot.Get(awsenv.Require(keys.EnvEventsTable, keys.EnvStateTable)).Or(b, "environment")
	cfg := wire.AWS(b)
	db := awsenv.DynamoDB(cfg)
	events := boot.Get(eventstore.New(db, eventstore.Config{Table: env[keys.EnvEventsTable]})).Or(b, "event store") // reads only
	signed, signer, err := signing.Signed(b.Ctx, cfg, nil, b.Log)
	if err != nil {
		b.Fail("checkpoint signing key", err)
	}
	n := boot.Get(nt.New(nt.Config{
		Store: nt.NewDynamoStore(db, env[keys.EnvStateTable]),
		Log:   events,
		Signer: &nt.Checkpoints{S3: signing.S3(cfg), Bucket: signed.Bucket, Log: signed.Log,
			Signer: signer, Key: signed.Key, Logger: b.Log},
		Seeds:   signing.Seeds{S: signed},
		Logger:  b.Log,
		Metrics: b.Metrics,
	})).Or(b, "notary")
	b.Log.Info("notary reading the events stream; it alone signs checkpoints", slog.String(obs.KeyFunction, keys.FnNotary),
		slog.String(obs.KeyEventsTable, env[keys.EnvEventsTable]), slog.String(obs.KeyBucket, signed.Bucket), slog.String(obs.KeyLog, signed.Log))
	boot.RunErr(b, n.Handle)
}
