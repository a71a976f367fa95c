// Package boot is what every fourlanes entry point (pkg/serve/*) starts
// with: the JSON logger, the metrics, start-up failures that exit 1 naming
// what is missing, and the Lambda runtime with per-invocation metrics and
// tracing. It links no AWS service client: each entry point imports the
// ones it uses (package wire for DynamoDB and the application's modules).
package boot

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tracing"
)

// Boot is one function's start.
type Boot struct {
	Fn      string // keys.Fn*
	Ctx     context.Context
	Log     *slog.Logger
	Metrics *obs.Metrics
}

// Start sets up the logger and the metrics of function fn.
func Start(fn string) *Boot {
	return &Boot{Fn: fn, Ctx: context.Background(), Log: obs.Setup(), Metrics: obs.NewMetrics(nil)}
}

// Fail logs why the function cannot start and exits 1: Lambda reports the
// init failure, and the function's Errors alarm fires.
func (b *Boot) Fail(what string, err error) {
	b.Log.ErrorContext(b.Ctx, b.Fn+" cannot start: "+what, obs.Err(err))
	os.Exit(1)
}

// Result is a constructor's answer: Get(New(…)).Or(b, "what") returns the
// value, or fails the start naming what could not be made.
type Result[T any] struct {
	v   T
	err error
}

// Get holds a constructor's answer.
func Get[T any](v T, err error) Result[T] { return Result[T]{v, err} }

// Or returns the value, or fails the start naming what.
func (r Result[T]) Or(b *Boot, what string) T {
	if r.err != nil {
		b.Fail(what, r.err)
	}
	return r.v
}

// Run starts the Lambda runtime with h, its metrics flushed once per
// invocation and each invocation traced (tracing.Invocation), until Lambda
// stops the function.
func Run[In, Out any](b *Boot, h func(context.Context, In) (Out, error)) {
	lambda.StartWithOptions(obs.PerInvocation(b.Metrics, tracing.Invocation(b.Fn, h)), b.options()...)
}

// RunErr is Run for a handler that returns only an error.
func RunErr[In any](b *Boot, h func(context.Context, In) error) {
	lambda.StartWithOptions(obs.PerInvocationErr(b.Metrics, tracing.InvocationErr(b.Fn, h)), b.options()...)
}

// options are the runtime's options: the SIGTERM hook only when tracing is
// on, as only spans can be pending when Lambda stops the function (metrics
// are written per invocation). aws-lambda-go asks Lambda for SIGTERM by
// registering an extension, a round trip to the Extensions API before the
// runtime's first /next: a function without tracing does not pay it at
// every cold start, and Lambda stops it with SIGKILL.
func (b *Boot) options() []lambda.Option {
	if !tracing.Enabled() {
		return nil
	}
	return []lambda.Option{lambda.WithEnableSIGTERM(b.shutdown)}
}

// shutdown is the SIGTERM hook of a function that traces: spans still
// pending are sent.
func (b *Boot) shutdown() {
	b.Log.Info(b.Fn + " shutting down")
	tracing.Shutdown(b.Ctx)
}
