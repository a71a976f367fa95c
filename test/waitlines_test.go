package e2e

import (
	"fmt"
	"testing"
	"time"
)

// waitLines waits until function fn has logged a line containing sub and returns the
// lines that do. A function's output travels on its own pipe, so a line can trail what
// the twin's journal already shows of the same invocation.
func (s *stack) waitLines(t *testing.T, fn, sub string) []string {
	t.Helper()
	var lines []string
	eventually(t, 10*time.Second, fmt.Sprintf("a line of %s containing %q", fn, sub), func() (bool, string) {
		lines = s.grep(fn, sub)
		return len(lines) > 0, fmt.Sprintf("%d such lines", len(lines))
	})
	return lines
}
