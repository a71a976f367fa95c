// Package twintest gives tests of the local twin what they share: the
// endpoints of one DynamoDB and one ElasticMQ per test run, a log
// that goes to the test, and polling with a deadline.
package twintest

import (
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/twin/localaws"
)

// Endpoints returns the DynamoDB and ElasticMQ endpoints for the test: those
// `make test` exports, else servers this test binary starts once (DynamoDB
// in this process, twin/ddb; ElasticMQ from .cache).
// Without them the test is skipped, or fails when CI=true.
func Endpoints(t testing.TB) (dynamoDB, sqsEndpoint string) {
	t.Helper()
	return localaws.DynamoDBEndpoint(t), localaws.SQSEndpoint(t)
}

// Run runs the package's tests, stops the servers they started and returns
// the exit code, for a TestMain with clean-up of its own to do before
// os.Exit.
func Run(m *testing.M) int { return localaws.Run(m) }

// Main is Run, then os.Exit.
func Main(m *testing.M) { localaws.Main(m) }

// Logger returns a logger that writes to the test's log (and nowhere once
// the test has ended).
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(Writer(t), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// Writer returns a writer that logs each line to t until the test ends.
func Writer(t testing.TB) io.Writer {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return w
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// Eventually polls cond every interval until it returns true, and fails the
// test with what it last said when timeout passes first.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, timeout, last)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, bounded by the deadline above
	}
}
