package repair_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/repair"
)

// TestParseRetireGrace: unset is the 24 h default; a duration shortens it;
// anything else is refused, naming the variable and what it takes.
func TestParseRetireGrace(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 24 * time.Hour, "90s": 90 * time.Second, "2h": 2 * time.Hour} {
		if got, err := repair.ParseRetireGrace(v); err != nil || got != want {
			t.Errorf("ParseRetireGrace(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"24", "soon", "-1h", "0s", "500ms"} {
		_, err := repair.ParseRetireGrace(v)
		if err == nil || !strings.Contains(err.Error(), keys.EnvRetireGrace) || !strings.Contains(err.Error(), "at least 1s") {
			t.Errorf("ParseRetireGrace(%q): %v; want an error naming %s and its minimum", v, err, keys.EnvRetireGrace)
		}
	}
}
