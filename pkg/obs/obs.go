// Package obs is fourlanes' observability: slog JSON logs whose records carry
// the request id, tenant, event id and lane bound to the context, and
// CloudWatch metrics written as Embedded Metric Format (EMF) lines.
package obs

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/prozz/aws-embedded-metrics-golang/emf"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// Log attribute keys. Every package logs with these names.
const (
	KeyRequestID    = "request_id"
	KeyTenant       = "tenant"
	KeyEventID      = "event_id"
	KeyEventType    = "event_type"
	KeyLane         = "lane"
	KeySeq          = "seq"
	KeySubscription = "subscription"
	KeyErr          = "err"
	KeyReason       = "reason"
	KeyFunction     = "function"
	KeyCount        = "count"
)

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

// contextHandler adds the context's request id, tenant, event id and lane to
// every record.
type contextHandler struct{ slog.Handler }

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String(KeyRequestID, id))
	}
	if t, err := tenancy.Tenant(ctx); err == nil {
		r.AddAttrs(slog.String(KeyTenant, t))
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

// NewLogger returns a JSON logger on w whose records carry the context's
// request id, tenant, event id and lane. level is "debug", "info", "warn" or
// "error" (default info).
func NewLogger(w io.Writer, level string) *slog.Logger {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "warn":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		lv = slog.LevelInfo
	}
	return slog.New(contextHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv})})
}

// Setup installs the JSON logger on stdout as slog's default, with the level
// from LOG_LEVEL. Functions call it first in main.
func Setup() *slog.Logger {
	l := NewLogger(os.Stdout, os.Getenv(keys.EnvLogLevel))
	slog.SetDefault(l)
	return l
}

// Metrics writes CloudWatch EMF lines. The zero value writes to stdout.
type Metrics struct {
	mu sync.Mutex
	w  io.Writer
}

// NewMetrics writes EMF lines to w (stdout when nil).
func NewMetrics(w io.Writer) *Metrics { return &Metrics{w: w} }

// Count emits one EMF line: metric name = n (unit Count) in
// keys.MetricNamespace, with the given dimension pairs ("Lane", "DURABLE", …).
// A nil *Metrics is valid and writes to stdout, so components work without wiring.
func (m *Metrics) Count(name string, n int, dims ...string) {
	w := io.Writer(os.Stdout)
	if m != nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.w != nil {
			w = m.w
		}
	}
	l := emf.New(emf.WithWriter(w), emf.WithoutDimensions()).Namespace(keys.MetricNamespace)
	if len(dims) >= 2 {
		ds := make([]emf.Dimension, 0, len(dims)/2)
		for i := 0; i+1 < len(dims); i += 2 {
			ds = append(ds, emf.NewDimension(dims[i], dims[i+1]))
		}
		l = l.DimensionSet(ds...)
	}
	l.MetricAs(name, n, emf.Count).Log()
}
