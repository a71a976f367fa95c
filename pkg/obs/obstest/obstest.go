// Package obstest holds what tests need to read the logs and EMF lines that
// code under test writes from several goroutines.
package obstest

import (
	"bytes"
	"strings"
	"sync"
	"time"
)

// Buffer is an io.Writer safe for concurrent writes and reads: a logger or a
// process's output copier writes while the test reads.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Lines returns the non-empty lines written so far.
func (s *Buffer) Lines() []string {
	var out []string
	for _, l := range strings.Split(s.String(), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// WaitFor reports whether sub appears in what was written within d. A
// writer fed from another goroutine (a process's output) may lag what the
// test already saw: an answer can arrive before the line printed before it.
func (s *Buffer) WaitFor(sub string, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if strings.Contains(s.String(), sub) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
