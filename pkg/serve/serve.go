// Package serve is the entry point of each fourlanes function: one call with
// the application, from the function's main, and the function runs until
// Lambda stops it.
//
//	func main() { serve.DurableConsumer(example.App) }
//
// Each entry point sets up the JSON logger (obs.Setup), reads and checks its
// environment, builds its AWS clients, binds the application's modules for
// the lanes it runs (app.Module.Bind), and starts the Lambda runtime with its
// metrics flushed once per invocation (obs.PerInvocation). A function that
// cannot start logs why at ERROR, naming what is missing, and exits 1: Lambda
// reports the init failure, and the function's Errors alarm fires.
package serve

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/erasure"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// boot is what every entry point starts with.
type boot struct {
	fn      string // keys.Fn*
	ctx     context.Context
	log     *slog.Logger
	metrics *obs.Metrics
}

func start(fn string) *boot {
	return &boot{fn: fn, ctx: context.Background(), log: obs.Setup(), metrics: obs.NewMetrics(nil)}
}

// fail logs why the function cannot start and exits 1.
func (b *boot) fail(what string, err error) {
	b.log.ErrorContext(b.ctx, b.fn+" cannot start: "+what, slog.String(obs.KeyErr, err.Error()))
	os.Exit(1)
}

// result is a constructor's answer: get(New(…)).or(b, "what") returns the
// value, or fails the start naming what could not be made.
type result[T any] struct {
	v   T
	err error
}

func get[T any](v T, err error) result[T] { return result[T]{v, err} }

func (r result[T]) or(b *boot, what string) T {
	if r.err != nil {
		b.fail(what, r.err)
	}
	return r.v
}

// aws returns the AWS configuration, or fails.
func (b *boot) aws() aws.Config {
	return get(awsenv.Load(b.ctx)).or(b, "AWS configuration")
}

// catalog validates a and returns its catalog (built once), or fails.
func (b *boot) catalog(a app.Application) *catalog.Catalog {
	return get(a.Check()).or(b, "invalid application")
}

// vault gives cat the application's vault (pkg/erasure) when its catalog
// declares personal fields, so handlers read them opened (or erased) and
// follow-on emits seal them; without its environment the function fails.
func (b *boot) vault(cat *catalog.Catalog, cfg aws.Config, db *dynamodb.Client) {
	if !cat.Personal() {
		return
	}
	env := get(awsenv.Require(keys.EnvSubjectKeysTable, keys.EnvDataKeyID)).or(b, "environment (the catalog declares personal fields)")
	v := get(erasure.New(db, kms.NewFromConfig(cfg), erasure.Config{Table: env[keys.EnvSubjectKeysTable], KeyID: env[keys.EnvDataKeyID]})).or(b, "vault")
	cat.UseVault(v)
}

// bind binds mods, each given its Env from env, and returns the registry
// and the reappliers the modules offer.
func (b *boot) bind(mods []app.Module, cat *catalog.Catalog, env map[string]string, db *dynamodb.Client, stateTable string) (*catalog.Registry, []app.Reapplier) {
	var (
		bindings []catalog.Binding
		re       []app.Reapplier
	)
	for _, m := range mods {
		menv := make(map[string]string, len(m.Env))
		for _, n := range m.Env {
			menv[n] = env[n]
		}
		bound := get(m.Bind(app.Runtime{
			Function: b.fn, DynamoDB: db, StateTable: stateTable, Env: menv, Logger: b.log, Metrics: b.metrics,
		})).or(b, "binding module "+m.Spec.Name)
		bindings = append(bindings, bound.Binding)
		if bound.Reapplier != nil {
			re = append(re, bound.Reapplier)
		}
	}
	return get(catalog.NewRegistry(cat, bindings...)).or(b, "registry"), re
}

// followOn returns what DURABLE handlers emit follow-on events with: the
// log (the application's catalog and chain shards), whose INLINE and LOCAL
// subscribers reg binds run after each commit in this process, and that
// dispatcher, to flush before each invocation returns.
func (b *boot) followOn(a app.Application, cat *catalog.Catalog, reg *catalog.Registry, db *dynamodb.Client, eventsTable string) (*lanes.InProcess, *eventstore.Store) {
	inproc := lanes.NewInProcess(reg, lanes.Config{Logger: b.log, Metrics: b.metrics})
	store := get(eventstore.New(db, eventstore.Config{Table: eventsTable, Catalog: cat, Shards: a.ChainShards, Dispatcher: inproc})).or(b, "event log")
	if a.EmitsFollowOn() {
		b.log.InfoContext(b.ctx, "DURABLE handlers may emit follow-on events; their INLINE and LOCAL subscribers bound here run in this function",
			slog.Int("inline", len(reg.Served(catalog.Inline))), slog.Int("local", len(reg.Served(catalog.Local))))
	}
	return inproc, store
}

// flushed is h followed by the LOCAL handlers it started (follow-on
// events' subscribers), waited for before the invocation returns.
func flushed[In, Out any](h func(context.Context, In) (Out, error), inproc *lanes.InProcess, b *boot) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		out, err := h(ctx, in)
		if ferr := inproc.Flush(ctx); ferr != nil {
			b.log.ErrorContext(ctx, "LOCAL handlers still running when the invocation ends", slog.String(obs.KeyErr, ferr.Error()))
		}
		return out, err
	}
}

// effects returns the recorder of the handlers' side effects (effect.Do),
// kept in the state table, or fails.
func (b *boot) effects(db *dynamodb.Client, stateTable string) *effect.Recorder {
	return get(effect.New(effect.Config{Store: effect.NewDynamoStore(db, stateTable), Logger: b.log, Metrics: b.metrics})).or(b, "effect recorder")
}

// run starts the Lambda runtime with h, its metrics flushed once per
// invocation, until Lambda stops the function.
func run[In, Out any](b *boot, h func(context.Context, In) (Out, error)) {
	lambda.StartWithOptions(obs.PerInvocation(b.metrics, h), lambda.WithEnableSIGTERM(func() {
		b.log.Info(b.fn + " shutting down")
	}))
}
