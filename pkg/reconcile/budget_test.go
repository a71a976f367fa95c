package reconcile

import (
	"context"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/delivery"
)

// TestBudgetFromDeadline: a call stops 10 % (at least MinReserve) before the
// Lambda deadline, so it can still answer.
func TestBudgetFromDeadline(t *testing.T) {
	r, err := New(Config{Log: nopLog{}, DeadLetters: nopDead{}, State: NewMemoryState()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		remaining, wantReserve time.Duration
	}{
		{60 * time.Second, 6 * time.Second},
		{10 * time.Second, 2 * time.Second},
	} {
		dl := time.Now().Add(tc.remaining)
		ctx, cancel := context.WithDeadline(context.Background(), dl)
		b := r.budget(ctx, 0)
		cancel()
		if got := dl.Sub(b.stopAt); got < tc.wantReserve-50*time.Millisecond || got > tc.wantReserve+50*time.Millisecond {
			t.Errorf("%v left: reserve %v, want %v", tc.remaining, got, tc.wantReserve)
		}
	}
	b := r.budget(context.Background(), 3)
	if got := b.stopAt.Sub(time.Now()); got < 29*time.Second || got > 30*time.Second {
		t.Errorf("no deadline: stop in %v, want MaxDuration 30 s", got)
	}
	if got := b.clamp(500); got != 3 {
		t.Errorf("clamp with 3 events left: got %d, want 3", got)
	}
	b.used = 3
	if !b.exhausted() {
		t.Error("3 of 3 events used: not exhausted")
	}
}

type nopLog struct{ Log }
type nopDead struct{}

func (n nopDead) DeadLetters(ctx context.Context, tenant, cursor string, limit int32) ([]delivery.DeadLetter, string, error) {
	return nil, "", nil
}

func (n nopDead) CountDeadLetters(context.Context, string) (int, error) { return 0, nil }
