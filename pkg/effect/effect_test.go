package effect_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// rig is a recorder over a store, with its log and metrics captured.
type rig struct {
	store effect.Store
	rec   *effect.Recorder
	logs  *bytes.Buffer
	emf   *bytes.Buffer
}

func newRig(t *testing.T, st effect.Store) *rig {
	t.Helper()
	r := &rig{store: st, logs: &bytes.Buffer{}, emf: &bytes.Buffer{}}
	var err error
	r.rec, err = effect.New(effect.Config{Store: st, Logger: slog.New(slog.NewJSONHandler(r.logs, nil)), Metrics: obs.NewMetrics(r.emf)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// delivery returns a context bound as one delivery (token) of event e1 to
// subscription s.one on lane.
func (r *rig) delivery(token, lane string) context.Context {
	return r.rec.Bind(context.Background(), effect.Scope{Tenant: "t1", EventID: "e1", Seq: 3, Subscription: "s.one", Lane: lane, Token: token})
}

var key = effect.Key{EventID: "e1", Subscription: "s.one", Name: "email"}

// counter is an effect that counts its runs and checks its key.
type counter struct {
	t    *testing.T
	runs atomic.Int32
	err  error // returned by every run, if set
}

func (c *counter) fn(_ context.Context, k string) error {
	if k != key.String() {
		c.t.Errorf("effect got key %q, want %q", k, key)
	}
	c.runs.Add(1)
	return c.err
}

func (r *rig) status(t *testing.T) effect.Status {
	t.Helper()
	rec, _, err := r.store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Status
}

func TestDoOnceAcrossRedeliveries(t *testing.T) {
	r := newRig(t, effect.NewMemoryStore())
	c := &counter{t: t}
	for _, token := range []string{"d1", "d2", "d3"} {
		if err := effect.Do(r.delivery(token, effect.LaneDurable), "email", c.fn); err != nil {
			t.Fatalf("delivery %s: %v", token, err)
		}
	}
	if n := c.runs.Load(); n != 1 {
		t.Errorf("effect ran %d times over three deliveries, want 1", n)
	}
	if st := r.status(t); st != effect.StatusDone {
		t.Errorf("record %q, want done", st)
	}
}

// TestDoFailureReleases: an effect that fails is released, so the retry
// (in the same delivery or the next) does it; fn's error is wrapped, its
// permanence kept.
func TestDoFailureReleases(t *testing.T) {
	r := newRig(t, effect.NewMemoryStore())
	c := &counter{t: t, err: lanes.Permanent(errors.New("mailbox refused"))}
	ctx := r.delivery("d1", effect.LaneDurable)
	err := effect.Do(ctx, "email", c.fn)
	if err == nil || !strings.Contains(err.Error(), "mailbox refused") || !lanes.IsPermanent(err) {
		t.Fatalf("got %v, want fn's permanent error", err)
	}
	if _, found, _ := r.store.Get(context.Background(), key); found {
		t.Fatal("a failed effect left its record")
	}
	c.err = nil
	if err := effect.Do(r.delivery("d2", effect.LaneDurable), "email", c.fn); err != nil {
		t.Fatal(err)
	}
	if n := c.runs.Load(); n != 2 || r.status(t) != effect.StatusDone {
		t.Errorf("runs %d, record %q; want 2 (the failure, then the retry), done", n, r.status(t))
	}
}

// TestDoRedoesAfterCrash: a delivery crashed between its start and done
// (its record stays started). AtLeastOnce: the next delivery does it again,
// WARN and EffectRedone; declared Idempotent, INFO and no metric.
func TestDoRedoesAfterCrash(t *testing.T) {
	for _, idem := range []bool{false, true} {
		t.Run(fmt.Sprintf("idempotent=%v", idem), func(t *testing.T) {
			r := newRig(t, effect.NewMemoryStore())
			crashed(t, r.store)
			c := &counter{t: t}
			var opts []effect.Option
			if idem {
				opts = append(opts, effect.Idempotent())
			}
			if err := effect.Do(r.delivery("d2", effect.LaneDurable), "email", c.fn, opts...); err != nil {
				t.Fatal(err)
			}
			if n := c.runs.Load(); n != 1 || r.status(t) != effect.StatusDone {
				t.Fatalf("runs %d, record %q; want the effect done again once, done", n, r.status(t))
			}
			metric := strings.Contains(r.emf.String(), `"`+keys.MetricEffectRedone+`"`)
			warned := strings.Contains(r.logs.String(), `"level":"WARN"`) && strings.Contains(r.logs.String(), "it may happen twice")
			if metric == idem || warned == idem {
				t.Errorf("%s emitted %v, WARN %v; want both %v\nlogs: %s", keys.MetricEffectRedone, metric, warned, !idem, r.logs)
			}
		})
	}
}

// crashed leaves the record of a delivery d1 that started the effect and
// was killed before it recorded it done.
func crashed(t *testing.T, st effect.Store) {
	t.Helper()
	if _, ok, err := st.Start(context.Background(), effect.Record{Key: key, Tenant: "t1", Seq: 3, Status: effect.StatusStarted, Token: "d1",
		UpdatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}, false); err != nil || !ok {
		t.Fatal(ok, err)
	}
}

// TestDoAtMostOnceUnknown: AtMostOnce, after the same crash, does not do
// the effect: the record becomes unknown, Do returns a permanent
// *UnknownError naming the key and the way out, ERROR and EffectUnknown;
// later deliveries still refuse until an operator decides: redo does it
// once, done skips it.
func TestDoAtMostOnceUnknown(t *testing.T) {
	for _, decision := range []effect.Status{effect.StatusRedo, effect.StatusDone} {
		t.Run(string(decision), func(t *testing.T) {
			r := newRig(t, effect.NewMemoryStore())
			crashed(t, r.store)
			c := &counter{t: t}
			amo := effect.WithMode(effect.AtMostOnce)
			for _, token := range []string{"d2", "d3"} {
				err := effect.Do(r.delivery(token, effect.LaneDurable), "email", c.fn, amo)
				var ue *effect.UnknownError
				if !errors.As(err, &ue) || ue.Key != key || !errors.Is(err, effect.ErrUnknown) || !lanes.IsPermanent(err) ||
					!strings.Contains(err.Error(), "fourlanes effects -redo "+key.String()) {
					t.Fatalf("delivery %s: got %v, want a permanent *UnknownError for %s naming the way out", token, err, key)
				}
			}
			if n := c.runs.Load(); n != 0 || r.status(t) != effect.StatusUnknown {
				t.Fatalf("runs %d, record %q; want 0, unknown", n, r.status(t))
			}
			if !strings.Contains(r.emf.String(), `"`+keys.MetricEffectUnknown+`"`) || !strings.Contains(r.logs.String(), `"level":"ERROR"`) {
				t.Errorf("no %s metric or ERROR line:\n%s\n%s", keys.MetricEffectUnknown, r.emf, r.logs)
			}
			if _, err := r.store.Decide(context.Background(), key, decision, time.Now(), time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if err := effect.Do(r.delivery("d4", effect.LaneDurable), "email", c.fn, amo); err != nil {
				t.Fatalf("after the decision %s: %v", decision, err)
			}
			want := int32(0)
			if decision == effect.StatusRedo {
				want = 1
			}
			if n := c.runs.Load(); n != want || r.status(t) != effect.StatusDone {
				t.Errorf("after %s: runs %d, record %q; want %d, done", decision, n, r.status(t), want)
			}
		})
	}
}

// TestDoAtMostOnceMaybeDone: an error the effect marks MaybeDone makes it
// unknown under AtMostOnce (never released for a retry that could do it
// twice), and is released under AtLeastOnce.
func TestDoAtMostOnceMaybeDone(t *testing.T) {
	r := newRig(t, effect.NewMemoryStore())
	c := &counter{t: t, err: effect.MaybeDone(errors.New("provider timed out"))}
	err := effect.Do(r.delivery("d1", effect.LaneDurable), "email", c.fn, effect.WithMode(effect.AtMostOnce))
	if !errors.Is(err, effect.ErrUnknown) || !strings.Contains(err.Error(), "provider timed out") || r.status(t) != effect.StatusUnknown {
		t.Fatalf("got %v, record %q; want unknown, naming the provider's error", err, r.status(t))
	}
	r2 := newRig(t, effect.NewMemoryStore())
	if err := effect.Do(r2.delivery("d1", effect.LaneDurable), "email", c.fn); err == nil || errors.Is(err, effect.ErrUnknown) {
		t.Fatalf("AtLeastOnce: got %v, want the provider's error", err)
	}
	if _, found, _ := r2.store.Get(context.Background(), key); found {
		t.Error("AtLeastOnce left the record of a failed effect")
	}
}

// failingDone is a store whose Done fails the first n times.
type failingDone struct {
	effect.Store
	n int
}

func (f *failingDone) Done(ctx context.Context, k effect.Key, token string, now, exp time.Time) error {
	if f.n > 0 {
		f.n--
		return errors.New("InternalServerError")
	}
	return f.Store.Done(ctx, k, token, now, exp)
}

// TestDoDoneFailsThenRetried: the effect ran and recording it failed; the
// handler's retry in the same delivery records it without doing it again.
func TestDoDoneFailsThenRetried(t *testing.T) {
	st := &failingDone{Store: effect.NewMemoryStore(), n: 1}
	r := newRig(t, st)
	c := &counter{t: t}
	ctx := r.delivery("d1", effect.LaneDurable)
	if err := effect.Do(ctx, "email", c.fn); err == nil || !strings.Contains(err.Error(), "recording it failed") {
		t.Fatalf("got %v, want the failed record named", err)
	}
	if err := effect.Do(ctx, "email", c.fn); err != nil {
		t.Fatal(err)
	}
	if n := c.runs.Load(); n != 1 || r.status(t) != effect.StatusDone {
		t.Errorf("runs %d, record %q; want 1, done", n, r.status(t))
	}
}

func TestDoRefusesMisuse(t *testing.T) {
	c := &counter{t: t}
	if err := effect.Do(context.Background(), "email", c.fn); !errors.Is(err, effect.ErrNotBound) || !lanes.IsPermanent(err) {
		t.Errorf("unbound: %v, want a permanent ErrNotBound", err)
	}
	r := newRig(t, effect.NewMemoryStore())
	for _, name := range []string{"", "Email", "e mail", strings.Repeat("x", 65)} {
		if err := effect.Do(r.delivery("d1", effect.LaneDurable), name, c.fn); err == nil || !lanes.IsPermanent(err) || !strings.Contains(err.Error(), "effect name") {
			t.Errorf("name %q: %v, want a permanent error naming the effect name", name, err)
		}
	}
	err := effect.Do(r.delivery("d1", effect.LaneBestEffort), "email", c.fn, effect.WithMode(effect.AtMostOnce))
	if err == nil || !lanes.IsPermanent(err) || !strings.Contains(err.Error(), "AtMostOnce needs the DURABLE lane") {
		t.Errorf("AtMostOnce on BEST_EFFORT: %v, want refused", err)
	}
	if n := c.runs.Load(); n != 0 {
		t.Errorf("a refused call ran the effect %d times", n)
	}
}

// The faults of the orders example's lost emails, on the framework's helper
// against the local DynamoDB (its fault injection acts on the test's own
// table): the answer to the start write is lost after it committed, and the
// answer comes after the invocation's deadline.

// TestDoStartAnswerLost: the start commits, its answer is dropped, and the
// SDK resends it by itself. The resend meets the record its first attempt
// wrote, which holds the same token: Do recognises its own, does the effect
// and records it done. (The example's reservation took it for another
// delivery's and never sent.)
func TestDoStartAnswerLost(t *testing.T) {
	for _, mode := range []effect.Mode{effect.AtLeastOnce, effect.AtMostOnce} {
		t.Run(mode.String(), func(t *testing.T) {
			db, table := stateTable(t)
			r := newRig(t, effect.NewDynamoStore(db, table))
			localaws.InjectFault(t, db, localaws.Fault{Action: "UpdateItem", Table: table, Match: `"started"`, Kind: "drop"})
			c := &counter{t: t}
			if err := effect.Do(r.delivery("d1", effect.LaneDurable), "email", c.fn, effect.WithMode(mode)); err != nil {
				t.Fatalf("Do: %v", err)
			}
			if n := c.runs.Load(); n != 1 || r.status(t) != effect.StatusDone {
				t.Fatalf("runs %d, record %q; want 1, done", n, r.status(t))
			}
			if rec, _, _ := r.store.Get(context.Background(), key); rec.Attempts != 2 {
				t.Errorf("start writes %d, want 2: the fault did not hit the start", rec.Attempts)
			}
		})
	}
}

// TestDoStartAnswerAfterDeadline: the start commits and its answer comes
// after the invocation's deadline, so the handler fails without knowing.
// The redelivery (another token) does the effect: once, never zero times.
func TestDoStartAnswerAfterDeadline(t *testing.T) {
	db, table := stateTable(t)
	r := newRig(t, effect.NewDynamoStore(db, table))
	localaws.InjectFault(t, db, localaws.Fault{Action: "UpdateItem", Table: table, Match: `"started"`, Kind: "delay", DelayMs: 1500})
	c := &counter{t: t}
	ctx, cancel := context.WithTimeout(r.delivery("d1", effect.LaneDurable), 300*time.Millisecond)
	defer cancel()
	if err := effect.Do(ctx, "email", c.fn); err == nil {
		t.Fatal("Do past its deadline succeeded")
	}
	if n := c.runs.Load(); n != 0 {
		t.Fatalf("effect ran %d times before the deadline's error, want 0", n)
	}
	eventuallyStatus(t, r, effect.StatusStarted) // the held start did commit
	if err := effect.Do(r.delivery("d2", effect.LaneDurable), "email", c.fn); err != nil {
		t.Fatal(err)
	}
	if n := c.runs.Load(); n != 1 || r.status(t) != effect.StatusDone {
		t.Errorf("runs %d, record %q; want 1, done", n, r.status(t))
	}
}

func eventuallyStatus(t *testing.T, r *rig, want effect.Status) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.status(t) != want {
		if time.Now().After(deadline) {
			t.Fatalf("record %q, want %q", r.status(t), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
