// Package wire builds what the entry points that read or write DynamoDB
// share: the AWS configuration, the application's modules bound for a
// function's lanes, and the recorder of the handlers' side effects.
package wire

import (
	"context"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/serve/internal/boot"
)

// AWS returns the AWS configuration (awsenv.Load, traced), or fails.
func AWS(b *boot.Boot) aws.Config {
	return boot.Get(awsenv.Load(b.Ctx)).Or(b, "AWS configuration")
}

// Catalog validates a and returns its catalog (built once), or fails.
func Catalog(b *boot.Boot, a app.Application) *catalog.Catalog {
	return boot.Get(a.Check()).Or(b, "invalid application")
}

// Env requires names and the environment the modules of a on lanes read,
// all at once (the error names every one missing), or fails.
func Env(b *boot.Boot, a app.Application, lanes []catalog.Lane, names ...string) map[string]string {
	return boot.Get(awsenv.Require(append(names, a.Env(lanes...)...)...)).Or(b, "environment")
}

// Bind binds every module of a with a subscription on lanes, each given its
// Env from env, and returns the registry and the reappliers the modules
// offer, or fails.
func Bind(b *boot.Boot, a app.Application, cat *catalog.Catalog, env map[string]string, db *dynamodb.Client, stateTable string, lanes ...catalog.Lane) (*catalog.Registry, []app.Reapplier) {
	var (
		bindings []catalog.Binding
		re       []app.Reapplier
	)
	for _, m := range a.Runs(lanes...) {
		menv := make(map[string]string, len(m.Env))
		for _, n := range m.Env {
			menv[n] = env[n]
		}
		bound := boot.Get(m.Bind(app.Runtime{
			Function: b.Fn, DynamoDB: db, StateTable: stateTable, Env: menv, Logger: b.Log, Metrics: b.Metrics,
		})).Or(b, "binding module "+m.Spec.Name)
		bindings = append(bindings, bound.Binding)
		if bound.Reapplier != nil {
			re = append(re, bound.Reapplier)
		}
	}
	return boot.Get(catalog.NewRegistry(cat, bindings...)).Or(b, "registry"), re
}

// Effects returns the recorder of the handlers' side effects (effect.Do),
// kept in the state table, or fails.
func Effects(b *boot.Boot, db *dynamodb.Client, stateTable string) *effect.Recorder {
	return boot.Get(effect.New(effect.Config{Store: effect.NewDynamoStore(db, stateTable), Logger: b.Log, Metrics: b.Metrics})).Or(b, "effect recorder")
}

// BindModules binds mods, each given its Env from env, and returns the
// registry and the reappliers the modules offer, or fails.
func BindModules(b *boot.Boot, mods []app.Module, cat *catalog.Catalog, env map[string]string, db *dynamodb.Client, stateTable string) (*catalog.Registry, []app.Reapplier) {
	var (
		bindings []catalog.Binding
		re       []app.Reapplier
	)
	for _, m := range mods {
		menv := make(map[string]string, len(m.Env))
		for _, n := range m.Env {
			menv[n] = env[n]
		}
		bound := boot.Get(m.Bind(app.Runtime{
			Function: b.Fn, DynamoDB: db, StateTable: stateTable, Env: menv, Logger: b.Log, Metrics: b.Metrics,
		})).Or(b, "binding module "+m.Spec.Name)
		bindings = append(bindings, bound.Binding)
		if bound.Reapplier != nil {
			re = append(re, bound.Reapplier)
		}
	}
	return boot.Get(catalog.NewRegistry(cat, bindings...)).Or(b, "registry"), re
}

// FollowOn is what DURABLE handlers emit follow-on events through: the log
// with the application's catalog and chain shards, its INLINE and LOCAL
// subscribers bound in reg run in process (flushed per invocation: Flushed).
func FollowOn(b *boot.Boot, a app.Application, cat *catalog.Catalog, reg *catalog.Registry, db *dynamodb.Client, eventsTable string) (*lanes.InProcess, *eventstore.Store) {
	inproc := lanes.NewInProcess(reg, lanes.Config{Logger: b.Log, Metrics: b.Metrics})
	store := boot.Get(eventstore.New(db, eventstore.Config{Table: eventsTable, Catalog: cat, Shards: a.ChainShards, Dispatcher: inproc})).Or(b, "event log")
	if a.EmitsFollowOn() {
		b.Log.InfoContext(b.Ctx, "DURABLE handlers may emit follow-on events; their INLINE and LOCAL subscribers bound here run in this function",
			slog.Int(obs.KeyInline, len(reg.Served(catalog.Inline))), slog.Int(obs.KeyLocal, len(reg.Served(catalog.Local))))
	}
	return inproc, store
}

// Flushed is h followed by the LOCAL handlers it started (follow-on
// events' subscribers), waited for before the invocation returns.
func Flushed[In, Out any](b *boot.Boot, h func(context.Context, In) (Out, error), inproc *lanes.InProcess) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		out, err := h(ctx, in)
		if ferr := inproc.Flush(ctx); ferr != nil {
			b.Log.ErrorContext(ctx, "LOCAL handlers still running when the invocation ends", obs.Err(ferr))
		}
		return out, err
	}
}
