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

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tracing"
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

// env requires names and the environment the modules of a on lanes read,
// all at once (the error names every one missing), or fails.
func (b *boot) env(a app.Application, lanes []catalog.Lane, names ...string) map[string]string {
	return get(awsenv.Require(append(names, a.Env(lanes...)...)...)).or(b, "environment")
}

// bind binds every module of a with a subscription on lanes, each given its
// Env from env, and returns the registry and the reappliers the modules
// offer.
func (b *boot) bind(a app.Application, cat *catalog.Catalog, env map[string]string, db *dynamodb.Client, stateTable string, lanes ...catalog.Lane) (*catalog.Registry, []app.Reapplier) {
	var (
		bindings []catalog.Binding
		re       []app.Reapplier
	)
	for _, m := range a.Runs(lanes...) {
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

// effects returns the recorder of the handlers' side effects (effect.Do),
// kept in the state table, or fails.
func (b *boot) effects(db *dynamodb.Client, stateTable string) *effect.Recorder {
	return get(effect.New(effect.Config{Store: effect.NewDynamoStore(db, stateTable), Logger: b.log, Metrics: b.metrics})).or(b, "effect recorder")
}

// run starts the Lambda runtime with h, its metrics flushed once per
// invocation and each invocation traced (tracing.Invocation), until Lambda
// stops the function.
func run[In, Out any](b *boot, h func(context.Context, In) (Out, error)) {
	lambda.StartWithOptions(obs.PerInvocation(b.metrics, tracing.Invocation(b.fn, h)), lambda.WithEnableSIGTERM(b.shutdown))
}

// shutdown is every function's SIGTERM hook: spans still pending are sent.
func (b *boot) shutdown() {
	b.log.Info(b.fn + " shutting down")
	tracing.Shutdown(b.ctx)
}
