//go:build notrace

package tracing_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tracing"
)

// TestNotraceIsNoop: built with -tags notrace, even FOURLANES_TRACING=otel
// with an endpoint leaves the config alone and records nothing, but an
// envelope's trace context still flows on.
func TestNotraceIsNoop(t *testing.T) {
	t.Setenv(keys.EnvTracing, tracing.ModeOTel)
	t.Setenv(keys.EnvOTLPTracesEndpoint, "http://127.0.0.1:1/v1/traces")
	tracing.Reset()
	t.Cleanup(tracing.Reset)
	cfg := aws.Config{}
	tracing.Instrument(&cfg)
	if len(cfg.APIOptions) != 0 || tracing.Available || tracing.Enabled() {
		t.Errorf("notrace build: got %d API options, Available %v, Enabled %v; want 0, false, false",
			len(cfg.APIOptions), tracing.Available, tracing.Enabled())
	}
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx, end := tracing.Continue(context.Background(), "deliver", tp)
	end(nil)
	if got := tracing.TraceParent(ctx); got != tp {
		t.Errorf("TraceParent after Continue: got %q, want %q", got, tp)
	}
}
