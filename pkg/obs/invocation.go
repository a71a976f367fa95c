package obs

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// flushMargin is how long before an invocation's deadline PerInvocation
// writes what the invocation has counted so far: Lambda stops a timed-out
// invocation without running its deferred calls.
const flushMargin = 100 * time.Millisecond

// PerInvocation wraps a Lambda handler so that m writes once per invocation:
// while an invocation runs, m's counts are aggregated per metric name and
// dimensions (each count a value of the metric, so Sum, Maximum and
// SampleCount stay what they were), and when it ends, returning, failing or
// panicking, they are written as few EMF documents as fit (at most 100
// metrics and 100 values of a metric each). Near the invocation's deadline,
// what is counted so far is written too. Counts outside an invocation (at
// init, on SIGTERM) are written at once. A nil m is the Metrics a nil
// *Metrics writes through.
//
// It also adds a Service dimension (the function's name,
// AWS_LAMBDA_FUNCTION_NAME) to every metric of m, as a dimension set of its
// own: each metric keeps its identity (name and dimensions, as the alarms
// match it) and also gets one per function. That costs one more CloudWatch
// metric, billed like any custom metric, per metric name and function
// (whatever the metric's other dimension values), and a Metrics Insights
// query FROM the namespace now sees both sets: SUM over it counts twice,
// unless it selects one set with SCHEMA(namespace, Service).
//
// Call it once per process, in main:
//
//	lambda.StartWithOptions(obs.PerInvocation(metrics, h.Handle), …)
func PerInvocation[In, Out any](m *Metrics, f func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	m = m.perInvocation()
	return func(ctx context.Context, in In) (Out, error) {
		defer m.begin(ctx)()
		return f(ctx, in)
	}
}

// PerInvocationErr is PerInvocation for a handler that returns only an error.
func PerInvocationErr[In any](m *Metrics, f func(context.Context, In) error) func(context.Context, In) error {
	m = m.perInvocation()
	return func(ctx context.Context, in In) error {
		defer m.begin(ctx)()
		return f(ctx, in)
	}
}

func (m *Metrics) perInvocation() *Metrics {
	m = m.or()
	m.mu.Lock()
	m.service = lambdacontext.FunctionName
	m.mu.Unlock()
	return m
}

// begin starts buffering for one invocation and returns its end, which
// writes what is pending.
func (m *Metrics) begin(ctx context.Context) (end func()) {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		coldStart(lc.AwsRequestID)
	}
	m.mu.Lock()
	m.inflight++
	m.mu.Unlock()
	var early *time.Timer
	if deadline, ok := ctx.Deadline(); ok {
		early = time.AfterFunc(time.Until(deadline)-flushMargin, m.flush)
	}
	return func() {
		if early != nil {
			early.Stop()
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.inflight--
		m.flushLocked()
	}
}

// first is the request id of the process's first invocation.
var first struct {
	once sync.Once
	id   string
}

// coldStart reports whether requestID is the process's first invocation:
// the first one PerInvocation began or the logger saw.
func coldStart(requestID string) bool {
	first.once.Do(func() { first.id = requestID })
	return first.id == requestID
}
