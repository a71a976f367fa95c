// Package obs is fourlanes' observability: slog JSON logs whose records carry
// the request id, tenant, event id and lane bound to the context (and, in a
// Lambda invocation, the function's name, cold start and X-Ray trace id), and
// CloudWatch metrics written as Embedded Metric Format (EMF) lines.
package obs

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// Log attribute keys. Every package logs with these names.
const (
	KeyRequestID    = "request_id"
	KeyTenant       = "tenant"
	KeyChain        = "chain" // a chain shard's name, beside its tenant (tenancy.WithChain)
	KeyEventID      = "event_id"
	KeyEventType    = "event_type"
	KeyLane         = "lane"
	KeySeq          = "seq"
	KeySubscription = "subscription"
	KeyErr          = "err"
	KeyReason       = "reason"
	KeyFunction     = "function"
	KeyCount        = "count"
	KeyLagMS        = "lag_ms" // commit → handled, milliseconds
	// In a Lambda invocation: AWS_LAMBDA_FUNCTION_NAME, whether this is the
	// process's first invocation, and the X-Ray trace id (the Root of the
	// invocation's trace header).
	KeyFunctionName = "function_name"
	KeyColdStart    = "cold_start"
	KeyTraceID      = "xray_trace_id"
	// KeyTrace is the W3C trace id (32 hex digits) of the work in
	// progress: for an event's handler, the trace of the request that
	// emitted the event (pkg/tracing), which may differ from the
	// invocation's xray_trace_id.
	KeyTrace = "trace_id"
)

// envLambdaLogLevel is set by Lambda when the function's LoggingConfig has an
// application log level (docs: monitoring-cloudwatchlogs-log-level).
const envLambdaLogLevel = "AWS_LAMBDA_LOG_LEVEL"

type ctxKey int

const (
	eventKey ctxKey = iota
	laneKey
	requestKey
)

// WithEvent binds the event id being handled, for log records.
func WithEvent(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, eventKey, id)
}

// WithLane binds the lane being dispatched, for log records.
func WithLane(ctx context.Context, lane string) context.Context {
	return context.WithValue(ctx, laneKey, lane)
}

// WithRequestID binds a request id where no Lambda context carries one.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestKey, id)
}

// RequestID is the bound request id, or the Lambda invocation's, or "".
func RequestID(ctx context.Context) string {
	if s, _ := ctx.Value(requestKey).(string); s != "" {
		return s
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		return lc.AwsRequestID
	}
	return ""
}

// traceID is the Root of the invocation's X-Ray trace header, which
// aws-lambda-go puts in the context (and, one invocation at a time, in
// _X_AMZN_TRACE_ID), or "".
func traceID(ctx context.Context) string {
	h, _ := ctx.Value("x-amzn-trace-id").(string) // aws-lambda-go's key
	if h == "" {
		h = os.Getenv("_X_AMZN_TRACE_ID")
	}
	for part := range strings.SplitSeq(h, ";") {
		if root, ok := strings.CutPrefix(part, "Root="); ok {
			return root
		}
	}
	return h
}

// contextHandler adds the context's request id, trace id (W3C), tenant,
// event id and lane to every record, and in a Lambda invocation the
// function's name, cold start and X-Ray trace id.
type contextHandler struct{ slog.Handler }

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String(KeyRequestID, id))
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		if lambdacontext.FunctionName != "" {
			r.AddAttrs(slog.String(KeyFunctionName, lambdacontext.FunctionName))
		}
		r.AddAttrs(slog.Bool(KeyColdStart, coldStart(lc.AwsRequestID)))
		if id := traceID(ctx); id != "" {
			r.AddAttrs(slog.String(KeyTraceID, id))
		}
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String(KeyTrace, sc.TraceID().String()))
	}
	if t, err := tenancy.Tenant(ctx); err == nil {
		r.AddAttrs(slog.String(KeyTenant, t))
	}
	if c := tenancy.ChainOf(ctx); c != "" {
		r.AddAttrs(slog.String(KeyChain, c))
	}
	if id, _ := ctx.Value(eventKey).(string); id != "" {
		r.AddAttrs(slog.String(KeyEventID, id))
	}
	if l, _ := ctx.Value(laneKey).(string); l != "" {
		r.AddAttrs(slog.String(KeyLane, l))
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(as)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}

// parseLevel reads a level as LOG_LEVEL or Lambda's application log level
// spells it, in any case. slog has no TRACE or FATAL: TRACE is debug, the
// most detail fourlanes logs; FATAL is error, the closest (Lambda itself then
// drops the ERROR lines).
func parseLevel(s string) (slog.Level, bool) {
	switch strings.ToLower(s) {
	case "trace", "debug":
		return slog.LevelDebug, true
	case "info":
		return slog.LevelInfo, true
	case "warn", "warning":
		return slog.LevelWarn, true
	case "error", "fatal":
		return slog.LevelError, true
	}
	return slog.LevelInfo, false
}

// timestampKey: Lambda's log-level filtering reads a record's "level" and an
// RFC 3339 "timestamp"; a record without a timestamp it knows counts as INFO
// and would be dropped at WARN.
func timestampKey(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		a.Key = "timestamp"
	}
	return a
}

// NewLogger returns a JSON logger on w whose records carry the context's
// request id, tenant, event id and lane (and function_name, cold_start and
// xray_trace_id in a Lambda invocation). level is "trace", "debug", "info",
// "warn", "error" or "fatal" in any case (default info).
func NewLogger(w io.Writer, level string) *slog.Logger {
	lv, _ := parseLevel(level)
	return slog.New(contextHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv, ReplaceAttr: timestampKey})})
}

// Setup installs the JSON logger on stdout as slog's default. Its level is
// AWS_LAMBDA_LOG_LEVEL (the function's application log level, which the
// Lambda console changes without a deploy), else LOG_LEVEL, else info.
// Functions call it first in main.
func Setup() *slog.Logger {
	level := os.Getenv(keys.EnvLogLevel)
	lambdaLevel := os.Getenv(envLambdaLogLevel)
	lv, ok := parseLevel(lambdaLevel)
	if ok {
		level = lambdaLevel
	}
	l := NewLogger(os.Stdout, level)
	slog.SetDefault(l)
	if ok && lv > slog.LevelInfo {
		// Lambda gives a line without a level, as an EMF document is, the
		// level INFO, and filters it out above INFO.
		l.Error("the application log level drops this function's EMF metric lines, and the alarms on them see nothing: set it to INFO or below",
			slog.String(envLambdaLogLevel, lambdaLevel))
	}
	return l
}
