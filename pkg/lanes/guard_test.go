package lanes_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/lanes"
)

// TestGuard: the wrappers compose as Guard documents: the version check
// first (nothing runs), then retries that stop on a permanent error or a
// panic, each run counted, a panic turned into a *PanicError.
func TestGuard(t *testing.T) {
	errFlaky := errors.New("throttled")
	for _, tc := range []struct {
		name     string
		version  int
		fail     func(run int) error // nil: panic
		wantRuns int
		wantErr  func(error) bool
	}{
		{"succeeds first", 1, func(int) error { return nil }, 1, func(err error) bool { return err == nil }},
		{"succeeds on the third run", 1, func(run int) error {
			if run < 3 {
				return errFlaky
			}
			return nil
		}, 3, func(err error) bool { return err == nil }},
		{"fails every run", 1, func(int) error { return errFlaky }, 3, func(err error) bool { return errors.Is(err, errFlaky) }},
		{"permanent stops at once", 1, func(int) error { return lanes.Permanent(errFlaky) }, 1, lanes.IsPermanent},
		{"panic stops at once", 1, nil, 1, func(err error) bool {
			var pe *lanes.PanicError
			return errors.As(err, &pe) && pe.Subscription == "g.sub" && pe.Value == "boom"
		}},
		{"unreadable version runs nothing", 2, func(int) error { return nil }, 0, func(err error) bool {
			var ve *lanes.VersionError
			return errors.As(err, &ve) && ve.Version == 2 && ve.Subscription == "g.sub"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			handled := 0
			b := catalog.Bound{Handler: func(context.Context, envelope.Envelope) error {
				handled++
				if tc.fail == nil {
					panic("boom")
				}
				return tc.fail(handled)
			}}
			b.Name, b.Reads = "g.sub", []int{1}
			retries := 0
			r := lanes.Retry{Attempts: 3, Backoff: time.Millisecond, OnRetry: func(context.Context, int, error) { retries++ }}
			runs := 0
			err := lanes.Guard(b, lanes.Retrying(r), lanes.Counted(&runs))(context.Background(), envelope.Envelope{ID: "e1", Type: "g.made", SchemaVersion: tc.version})
			if !tc.wantErr(err) {
				t.Errorf("got error %v", err)
			}
			if runs != tc.wantRuns || handled != tc.wantRuns {
				t.Errorf("got %d counted runs, %d handler calls; want %d", runs, handled, tc.wantRuns)
			}
			if want := max(tc.wantRuns-1, 0); retries != want {
				t.Errorf("got %d retries announced, want %d", retries, want)
			}
		})
	}
}

// TestRetryingStopsWhenTheContextEnds: a pause cut short by the context's
// end returns an error that wraps ctx.Err() and names the last run's error.
func TestRetryingStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	runs := 0
	h := lanes.Retrying(lanes.Retry{Attempts: 5, Backoff: time.Hour, OnRetry: func(context.Context, int, error) { cancel() }})(
		lanes.Counted(&runs)(func(context.Context, envelope.Envelope) error { return errors.New("throttled") }))
	err := h(ctx, envelope.Envelope{})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "throttled") || runs != 1 {
		t.Errorf("got %v after %d runs; want context.Canceled naming the last error, after 1 run", err, runs)
	}
}

// TestRetryingFinal: a Final of the caller's own replaces the default.
func TestRetryingFinal(t *testing.T) {
	stop := errors.New("stop")
	runs := 0
	h := lanes.Retrying(lanes.Retry{Attempts: 5, Backoff: time.Millisecond, Final: func(err error) bool { return errors.Is(err, stop) }})(
		lanes.Counted(&runs)(func(context.Context, envelope.Envelope) error {
			if runs == 2 {
				return stop
			}
			return lanes.Permanent(errors.New("not final here"))
		}))
	if err := h(context.Background(), envelope.Envelope{}); !errors.Is(err, stop) || runs != 2 {
		t.Errorf("got %v after %d runs; want stop after 2 (a permanent error retried under this Final)", err, runs)
	}
}
