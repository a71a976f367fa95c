//go:build notrace

package tracing_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tracing"
)

// TestNotraceIsNoop: built with -tags notrace, even FOURLANES_TRACING=xray
// leaves the config alone.
func TestNotraceIsNoop(t *testing.T) {
	t.Setenv(keys.EnvTracing, tracing.ModeXRay)
	cfg := aws.Config{}
	tracing.Instrument(&cfg)
	if len(cfg.APIOptions) != 0 || tracing.Available || tracing.Enabled() {
		t.Errorf("notrace build: got %d API options, Available %v, Enabled %v; want 0, false, false",
			len(cfg.APIOptions), tracing.Available, tracing.Enabled())
	}
}
