package tracing

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// ModeOTel is the value of FOURLANES_TRACING that turns OpenTelemetry on.
// ModeXRay, the value templates set before OpenTelemetry replaced the X-Ray
// SDK, means the same: a function deployed with an older template keeps
// tracing.
const (
	ModeOTel = "otel"
	ModeXRay = "xray"
	ModeOff  = "off"
)

// Mode returns what FOURLANES_TRACING asks for: "otel" (for "otel" or
// "xray"), or "off" for anything else (unset included).
func Mode() string {
	switch os.Getenv(keys.EnvTracing) {
	case ModeOTel, ModeXRay:
		return ModeOTel
	}
	return ModeOff
}

// Endpoint is where spans are sent: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as
// it is, else OTEL_EXPORTER_OTLP_ENDPOINT + "/v1/traces" (the OpenTelemetry
// SDKs' own variables), else "" (no exporter).
func Endpoint() string {
	if v := os.Getenv(keys.EnvOTLPTracesEndpoint); v != "" {
		return v
	}
	if v := os.Getenv(keys.EnvOTLPEndpoint); v != "" {
		return strings.TrimSuffix(v, "/") + "/v1/traces"
	}
	return ""
}

// Enabled reports whether this process records and exports spans:
// FOURLANES_TRACING asks for it, an exporter endpoint is configured and the
// binary has the SDK (see Available). Otherwise every function of this
// package is a no-op that allocates nothing, except that trace context read
// from an envelope still flows on (Continue, TraceParent).
func Enabled() bool {
	v := os.Getenv(keys.EnvTracing)
	switch {
	case Mode() == ModeOTel && !Available:
		warnOnce.Do(func() {
			slog.Warn("tracing requested but this binary was built with -tags notrace; nothing is traced",
				slog.String(obs.KeyEnv, keys.EnvTracing))
		})
	case Mode() == ModeOTel && Endpoint() == "":
		warnOnce.Do(func() {
			slog.Warn("tracing requested but no exporter is configured; nothing is traced (set "+keys.EnvOTLPTracesEndpoint+
				", e.g. http://localhost:4318/v1/traces for the ADOT collector layer)",
				slog.String(obs.KeyEnv, keys.EnvTracing))
		})
	case Mode() == ModeOTel:
		return true
	case v != "" && v != ModeOff:
		warnOnce.Do(func() {
			slog.Warn("unknown tracing mode; nothing is traced (use \"otel\" or \"off\")",
				slog.String(obs.KeyEnv, keys.EnvTracing), slog.String(obs.KeyValue, v))
		})
	}
	return false
}

// warnOnce: a misconfiguration is said once per process, not per call.
var warnOnce sync.Once

// Instrument adds a client span per AWS SDK call to every client built from
// cfg, and sends the call's trace context downstream (X-Amzn-Trace-Id), when
// Enabled; otherwise it leaves cfg alone. Call it once per aws.Config,
// before creating clients (awsenv.Load does).
func Instrument(cfg *aws.Config) {
	if Enabled() {
		instrument(cfg)
	}
}

// Invocation wraps a Lambda handler: each invocation runs in a server span
// named fn, the child of Lambda's own segment (the trace header aws-lambda-go
// puts in the context), and the spans it recorded are exported before the
// handler returns, since Lambda may freeze the process right after. Not
// Enabled, it returns h itself.
func Invocation[In, Out any](fn string, h func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	if !Enabled() {
		return h
	}
	return func(ctx context.Context, in In) (Out, error) {
		ctx, end := startInvocation(ctx, fn)
		out, err := h(ctx, in)
		end(ctx, err)
		return out, err
	}
}

// InvocationErr is Invocation for a handler that returns only an error.
func InvocationErr[In any](fn string, h func(context.Context, In) error) func(context.Context, In) error {
	if !Enabled() {
		return h
	}
	return func(ctx context.Context, in In) error {
		ctx, end := startInvocation(ctx, fn)
		err := h(ctx, in)
		end(ctx, err)
		return err
	}
}

func startInvocation(ctx context.Context, fn string) (context.Context, func(context.Context, error)) {
	if p := lambdaParent(ctx); p.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, p)
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		opts = append(opts, trace.WithAttributes(attrInvocationID.String(lc.AwsRequestID)))
	}
	ctx, span := tracer().Start(ctx, fn, opts...)
	return ctx, func(ctx context.Context, err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		flush(ctx)
	}
}

// Shutdown exports what is pending and stops the exporter; the SIGTERM hook
// of every function that traces calls it (a function registers for SIGTERM
// only when tracing is on: pkg/serve/internal/boot).
func Shutdown(ctx context.Context) {
	if Enabled() {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		shutdown(ctx)
	}
}

// TraceParent returns the W3C traceparent of ctx's span ("00-<trace id>-
// <span id>-<flags>"), or "" when ctx has none: what an envelope carries so
// that the work its event causes joins the emitting request's trace.
func TraceParent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	return c[headerTraceParent]
}

// ParseTraceParent returns the span context of a W3C traceparent, remote,
// or an invalid one when tp is empty or malformed.
func ParseTraceParent(tp string) trace.SpanContext {
	if tp == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{headerTraceParent: tp})
	return trace.SpanContextFromContext(ctx)
}

const headerTraceParent = "traceparent"

// ValidTraceParent reports whether tp is empty or a well-formed W3C
// traceparent.
func ValidTraceParent(tp string) bool { return tp == "" || ParseTraceParent(tp).IsValid() }

// Continue starts the span of one event's work (name: what is done, e.g.
// "deliver orders.billing") as a child of the emitting request's span
// (traceparent, from the envelope), linked to ctx's span (the invocation
// that carries many events). Without a valid traceparent the span is a
// child of ctx's. Not Enabled, no span is recorded but the returned
// context still carries the emitting request's trace, so a follow-on emit
// and the handler see it. Call end with the work's error.
func Continue(ctx context.Context, name, traceparent string, attrs ...Attr) (context.Context, func(error)) {
	parent := ParseTraceParent(traceparent)
	if !Enabled() {
		if parent.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
		}
		return ctx, func(error) {}
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	for _, a := range attrs {
		opts = append(opts, trace.WithAttributes(a.kv()))
	}
	if parent.IsValid() {
		if cur := trace.SpanContextFromContext(ctx); cur.IsValid() && cur.TraceID() != parent.TraceID() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: cur}))
		}
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	ctx, span := tracer().Start(ctx, name, opts...)
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// TraceID returns the trace id of ctx's span in hex, or "".
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}
