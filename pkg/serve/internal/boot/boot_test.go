package boot

import (
	"testing"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tracing"
)

// TestSIGTERMOnlyWhenTracing: the SIGTERM extension (a round trip to the
// Extensions API at every cold start) is registered only when spans can be
// pending at shutdown.
func TestSIGTERMOnlyWhenTracing(t *testing.T) {
	b := &Boot{Fn: keys.FnTamperWatch}
	t.Setenv(keys.EnvTracing, "")
	if got := len(b.options()); got != 0 {
		t.Errorf("tracing off: got %d runtime options, want none (no SIGTERM extension)", got)
	}
	t.Setenv(keys.EnvTracing, tracing.ModeOTel)
	t.Setenv(keys.EnvOTLPTracesEndpoint, "http://127.0.0.1:4318/v1/traces")
	want := 0
	if tracing.Available {
		want = 1
	}
	if got := len(b.options()); got != want {
		t.Errorf("tracing on (compiled in: %v): got %d runtime options, want %d", tracing.Available, got, want)
	}
}
