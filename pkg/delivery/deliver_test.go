package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/obs/obstest"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

type thingV1 struct {
	N int `json:"n"`
}

// recv counts handler runs per subscription and fails those told to.
type recv struct {
	mu    sync.Mutex
	runs  map[string]int
	fail  map[string]error
	block map[string]chan struct{} // a handler waits on its channel before returning
	errs  []string                 // what the handlers found wrong with their context
}

func newRecv() *recv {
	return &recv{runs: map[string]int{}, fail: map[string]error{}, block: map[string]chan struct{}{}}
}

func (r *recv) handle(name string, ctx context.Context, e envelope.Envelope) error {
	r.mu.Lock()
	r.runs[name]++
	if tn, err := tenancy.Tenant(ctx); err != nil || tn != e.TenantID {
		r.errs = append(r.errs, fmt.Sprintf("%s: tenant %q, %v; want %q", name, tn, err, e.TenantID))
	}
	if c := tenancy.Causation(ctx); c != e.ID {
		r.errs = append(r.errs, fmt.Sprintf("%s: causation %q, want the event id %q", name, c, e.ID))
	}
	err, ch := r.fail[name], r.block[name]
	r.mu.Unlock()
	if ch != nil {
		<-ch
	}
	if err != nil && err.Error() == "panic" {
		panic("handler exploded")
	}
	return err
}

func (r *recv) setFail(name string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail[name] = err
}

func (r *recv) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[name]
}

func (r *recv) first(ctx context.Context, e envelope.Envelope) error {
	return r.handle("test.first", ctx, e)
}
func (r *recv) second(ctx context.Context, e envelope.Envelope) error {
	return r.handle("test.second", ctx, e)
}
func (r *recv) third(ctx context.Context, e envelope.Envelope) error {
	return r.handle("test.third", ctx, e)
}
func (r *recv) local(ctx context.Context, e envelope.Envelope) error {
	return r.handle("test.local", ctx, e)
}

var testModule = catalog.Module[*recv]{
	Name: "test",
	Emits: []catalog.EventType{
		{Name: "thing.happened", Versions: []catalog.Version{catalog.V[thingV1](1), catalog.V[thingV1](2)}},
		{Name: "thing.ignored", Versions: []catalog.Version{catalog.V[thingV1](1)}},
	},
	Subscribes: []catalog.Subscription[*recv]{
		{Name: "test.first", Types: "thing.happened", Lane: catalog.Durable, Reads: []int{1, 2}, Handler: (*recv).first},
		{Name: "test.second", Types: "thing.happened", Lane: catalog.Durable, Reads: []int{1}, Handler: (*recv).second},
		{Name: "test.third", Types: "thing.h*", Lane: catalog.Durable, Reads: []int{1, 2}, Handler: (*recv).third},
		{Name: "test.local", Types: "thing.happened", Lane: catalog.Local, Reads: []int{1, 2}, Handler: (*recv).local},
	},
}

type rig struct {
	d       *delivery.Deliverer
	store   delivery.Store
	r       *recv
	logs    *obstest.Buffer
	metrics *obstest.Buffer
	now     *clock
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newRig(t *testing.T, st delivery.Store, bind bool) *rig {
	t.Helper()
	cat, err := catalog.New(testModule.Spec())
	if err != nil {
		t.Fatal(err)
	}
	r := newRecv()
	var bindings []catalog.Binding
	if bind {
		bindings = append(bindings, testModule.Bind(r))
	}
	reg, err := catalog.NewRegistry(cat, bindings...)
	if err != nil {
		t.Fatal(err)
	}
	rg := &rig{store: st, r: r, logs: &obstest.Buffer{}, metrics: &obstest.Buffer{}, now: &clock{t: time.Now()}}
	rg.d, err = delivery.New(reg, delivery.Config{
		Store: st, Logger: obs.NewLogger(rg.logs, "debug"), Metrics: obs.NewMetrics(rg.metrics),
		Backoff: time.Millisecond, Now: rg.now.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return rg
}

func event(t *testing.T, typ, tenant string, version int) envelope.Envelope {
	t.Helper()
	id, err := envelope.NewID()
	if err != nil {
		t.Fatal(err)
	}
	p, err := envelope.NormalizePayload(thingV1{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	return envelope.Envelope{ID: id, Type: typ, TenantID: tenant, OccurredAt: envelope.FormatTime(time.Now()),
		SchemaVersion: version, Payload: p, Seq: 1, CorrelationID: "corr-1"}
}

func outcomes(res delivery.Result) string {
	var out []string
	for _, s := range res.Subscriptions {
		out = append(out, s.Subscription+"="+string(s.Outcome))
	}
	return strings.Join(out, " ")
}

func TestRedeliverFiveTimesRunsEachSubscriptionOnce(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) delivery.Store) {
		rg := newRig(t, newStore(t), true)
		e := event(t, "thing.happened", "t1", 1)
		for i := range 5 {
			res, err := rg.d.Deliver(context.Background(), e)
			if err != nil || res.RetryLater() {
				t.Fatalf("delivery %d: %v (retry later %v)", i+1, err, res.RetryLater())
			}
			want := "test.first=already_completed test.second=already_completed test.third=already_completed"
			if i == 0 {
				want = "test.first=completed test.second=completed test.third=completed"
			}
			if got := outcomes(res); got != want {
				t.Errorf("delivery %d: got %s, want %s", i+1, got, want)
			}
		}
		for _, s := range []string{"test.first", "test.second", "test.third"} {
			if n := rg.r.count(s); n != 1 {
				t.Errorf("%s ran %d times, want 1", s, n)
			}
		}
		if n := rg.r.count("test.local"); n != 0 {
			t.Errorf("LOCAL subscription ran %d times on the DURABLE lane, want 0", n)
		}
		if len(rg.r.errs) > 0 {
			t.Errorf("handler context: %v", rg.r.errs)
		}
		rec, _, _ := rg.store.Get(context.Background(), delivery.Key{EventID: e.ID, Subscription: "test.first"})
		if min := time.Now().Add(14 * 24 * time.Hour); rec.ExpiresAt.Before(min) {
			t.Errorf("completed claim expires %v, want after %v (longer than any redelivery)", rec.ExpiresAt, min)
		}
	})
}

func TestFailingSubscriptionIsDeadLetteredAndReplayed(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) delivery.Store) {
		ctx := context.Background()
		rg := newRig(t, newStore(t), true)
		rg.r.setFail("test.second", errors.New("smtp relay refused"))
		e := event(t, "thing.happened", "tenant-a", 1)

		res, err := rg.d.Deliver(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := outcomes(res), "test.first=completed test.second=dead_lettered test.third=completed"; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
		if res.RetryLater() {
			t.Error("a dead-lettered subscription must not make the message retry (it would block the tenant)")
		}
		if sr := res.Subscriptions[1]; sr.Attempts != 3 || sr.Err == nil {
			t.Errorf("second: got %d attempts, err %v; want 3 attempts and the handler error", sr.Attempts, sr.Err)
		}
		letters, _, err := rg.store.DeadLetters(ctx, "tenant-a", "", 0)
		if err != nil || len(letters) != 1 {
			t.Fatalf("dead letters of tenant-a: got %v, %v; want 1", letters, err)
		}
		if dl := letters[0]; dl.EventID != e.ID || dl.Subscription != "test.second" || !strings.Contains(dl.Error, "smtp relay refused") || dl.Seq != e.Seq {
			t.Errorf("dead letter: got %+v", dl)
		}
		if n, _ := rg.store.CountDeadLetters(ctx, "tenant-b"); n != 0 {
			t.Errorf("tenant-b dead letters: got %d, want 0", n)
		}
		if !strings.Contains(rg.metrics.String(), keys.MetricDeadLettered) {
			t.Errorf("no %s metric in %s", keys.MetricDeadLettered, rg.metrics.String())
		}

		// A redelivery runs nothing: completed ones skip, the dead one is parked.
		res, err = rg.d.Deliver(ctx, e)
		if got, want := outcomes(res), "test.first=already_completed test.second=already_dead test.third=already_completed"; err != nil || got != want {
			t.Fatalf("redelivery: got %s, %v; want %s", got, err, want)
		}

		// Replay while still broken: stays dead, counted.
		sr, err := rg.d.Replay(ctx, e, "test.second")
		if err != nil || sr.Outcome != delivery.DeadLettered {
			t.Fatalf("replay while broken: got %+v, %v; want dead_lettered", sr, err)
		}
		letters, _, _ = rg.store.DeadLetters(ctx, "tenant-a", "", 0)
		if len(letters) != 1 || letters[0].Replays != 1 {
			t.Fatalf("after failed replay: got %+v; want one letter, Replays 1", letters)
		}

		// Fixed: the replay runs only the second and resolves its dead letter.
		rg.r.setFail("test.second", nil)
		sr, err = rg.d.Replay(ctx, e, "test.second")
		if err != nil || sr.Outcome != delivery.Completed {
			t.Fatalf("replay after the fix: got %+v, %v; want completed", sr, err)
		}
		if n, _ := rg.store.CountDeadLetters(ctx, "tenant-a"); n != 0 {
			t.Errorf("dead letters after replay: got %d, want 0", n)
		}
		if a, b, c := rg.r.count("test.first"), rg.r.count("test.second"), rg.r.count("test.third"); a != 1 || c != 1 || b != 3+3+1 {
			t.Errorf("runs: first %d, second %d, third %d; want 1, 7, 1", a, b, c)
		}
		// Replaying again is a no-op.
		sr, err = rg.d.Replay(ctx, e, "test.second")
		if err != nil || sr.Outcome != delivery.AlreadyCompleted {
			t.Errorf("second replay: got %+v, %v; want already_completed", sr, err)
		}
		if _, err := rg.d.Replay(ctx, e, "test.first.typo"); !errors.Is(err, delivery.ErrUnknownSubscription) {
			t.Errorf("replay of an unknown subscription: got %v, want ErrUnknownSubscription", err)
		}
		if _, err := rg.d.Replay(ctx, event(t, "thing.happened", "tenant-a", 1), "test.first"); !errors.Is(err, delivery.ErrNotDead) {
			t.Errorf("replay of a subscription never dead-lettered: got %v, want ErrNotDead", err)
		}
	})
}

func TestConcurrentDeliveriesRunEachHandlerOnce(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) delivery.Store) {
		rg := newRig(t, newStore(t), true)
		e := event(t, "thing.happened", "t1", 1)
		// The first handler to run blocks until both deliveries have claimed
		// (or found claimed) every subscription, so they truly overlap.
		release := make(chan struct{})
		rg.r.block["test.first"] = release
		var wg sync.WaitGroup
		results := make([]delivery.Result, 2)
		errs := make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = rg.d.Deliver(context.Background(), e)
			}()
		}
		// Wait until one delivery is inside test.first and the other has answered.
		deadline := time.Now().Add(10 * time.Second)
		for rg.r.count("test.first") == 0 || strings.Count(rg.logs.String(), "another delivery holds the claim") == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("deliveries did not overlap; logs:\n%s", rg.logs.String())
			}
			time.Sleep(2 * time.Millisecond) // poll interval, bounded by the deadline
		}
		close(release)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("delivery %d: %v", i, err)
			}
		}
		// The delivery that found test.first held must be told to retry
		// (its message comes back; by then the claim is completed).
		held := 0
		for _, r := range results {
			if r.Subscriptions[0].Outcome == delivery.Pending {
				held++
				if !r.RetryLater() {
					t.Errorf("a delivery that found a held claim did not ask to retry: %s", outcomes(r))
				}
			}
		}
		if held != 1 {
			t.Errorf("deliveries that found test.first held: got %d, want 1 (%s | %s)", held, outcomes(results[0]), outcomes(results[1]))
		}
		for _, s := range []string{"test.first", "test.second", "test.third"} {
			if n := rg.r.count(s); n != 1 {
				t.Errorf("%s ran %d times, want 1", s, n)
			}
		}
	})
}

func TestConcurrentDeliveriesStress(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) delivery.Store) {
		rg := newRig(t, newStore(t), true)
		e := event(t, "thing.happened", "t1", 1)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := rg.d.Deliver(context.Background(), e); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		for _, s := range []string{"test.first", "test.second", "test.third"} {
			if n := rg.r.count(s); n != 1 {
				t.Errorf("%s ran %d times, want 1", s, n)
			}
		}
	})
}

func TestExpiredLeaseIsTakenOver(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) delivery.Store) {
		ctx := context.Background()
		rg := newRig(t, newStore(t), true)
		e := event(t, "thing.happened", "t1", 1)
		// A delivery that crashed: it claimed test.first and never finished.
		now := rg.now.Now()
		k := delivery.Key{EventID: e.ID, Subscription: "test.first"}
		if c, err := rg.store.Claim(ctx, delivery.ClaimRequest{Key: k, Tenant: "t1", Type: e.Type, Seq: 1, SchemaVersion: 1,
			Token: "crashed", Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil || !c.Acquired {
			t.Fatalf("crashed claim: %+v %v", c, err)
		}
		res, err := rg.d.Deliver(ctx, e)
		if err != nil || !res.RetryLater() || res.Subscriptions[0].Outcome != delivery.Pending {
			t.Fatalf("within the lease: got %s, %v; want test.first pending and retry later", outcomes(res), err)
		}
		if rg.r.count("test.second") != 1 || rg.r.count("test.first") != 0 {
			t.Errorf("siblings must run while one is held: first %d, second %d", rg.r.count("test.first"), rg.r.count("test.second"))
		}
		rg.now.Add(2 * time.Minute)
		res, err = rg.d.Deliver(ctx, e)
		if err != nil || res.RetryLater() || res.Subscriptions[0].Outcome != delivery.Completed {
			t.Fatalf("after the lease: got %s, %v; want test.first completed", outcomes(res), err)
		}
		if rg.r.count("test.first") != 1 {
			t.Errorf("test.first ran %d times, want 1", rg.r.count("test.first"))
		}
		if !strings.Contains(rg.logs.String(), "took over a pending claim") {
			t.Error("takeover not logged")
		}
	})
}

func TestLeaseFollowsRemainingTime(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) delivery.Store) {
		rg := newRig(t, newStore(t), true)
		e := event(t, "thing.happened", "t1", 1)
		rg.r.block["test.first"] = make(chan struct{}) // never released: we look at the lease while it runs
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(200*time.Millisecond))
		defer cancel()
		// The claim is written with the context's deadline; read it while the handler runs.
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = rg.d.Deliver(ctx, e)
		}()
		k := delivery.Key{EventID: e.ID, Subscription: "test.first"}
		var rec delivery.ClaimRecord
		for until := time.Now().Add(5 * time.Second); ; {
			r, ok, err := rg.store.Get(context.Background(), k)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				rec = r
				break
			}
			if time.Now().After(until) {
				t.Fatal("no claim written")
			}
			time.Sleep(time.Millisecond) // poll interval, bounded
		}
		dl, _ := ctx.Deadline()
		if want := dl.Add(10 * time.Second); rec.LeaseUntil.Sub(want).Abs() > time.Millisecond {
			t.Errorf("lease until %v, want the context deadline + 10 s grace = %v", rec.LeaseUntil, want)
		}
		close(rg.r.block["test.first"])
		<-done
	})
}

func TestUnreadableSchemaVersionIsDeadLettered(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) delivery.Store) {
		ctx := context.Background()
		rg := newRig(t, newStore(t), true)
		e := event(t, "thing.happened", "t1", 2) // test.second reads only version 1
		res, err := rg.d.Deliver(ctx, e)
		if got, want := outcomes(res), "test.first=completed test.second=dead_lettered test.third=completed"; err != nil || got != want {
			t.Fatalf("got %s, %v; want %s", got, err, want)
		}
		if rg.r.count("test.second") != 0 {
			t.Error("a handler ran on a schema version it does not read")
		}
		letters, _, _ := rg.store.DeadLetters(ctx, "t1", "", 0)
		if len(letters) != 1 || !strings.Contains(letters[0].Error, "schema version 2") {
			t.Errorf("dead letter: got %+v; want the schema-version reason", letters)
		}
	})
}

func TestPermanentErrorsAndPanicsAreNotRetried(t *testing.T) {
	rg := newRig(t, delivery.NewMemoryStore(), true)
	rg.r.setFail("test.first", delivery.Permanent(errors.New("bad payload")))
	rg.r.setFail("test.third", errors.New("panic"))
	res, err := rg.d.Deliver(context.Background(), event(t, "thing.happened", "t1", 1))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := outcomes(res), "test.first=dead_lettered test.second=completed test.third=dead_lettered"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if res.Subscriptions[0].Attempts != 1 || res.Subscriptions[2].Attempts != 1 {
		t.Errorf("attempts: permanent %d, panic %d; want 1 and 1", res.Subscriptions[0].Attempts, res.Subscriptions[2].Attempts)
	}
	if !strings.Contains(res.Subscriptions[2].Err.Error(), "panicked") {
		t.Errorf("panic error: %v", res.Subscriptions[2].Err)
	}
}

// failingStore fails claims like a throttled table.
type failingStore struct{ delivery.Store }

func (failingStore) Claim(context.Context, delivery.ClaimRequest) (delivery.Claim, error) {
	return delivery.Claim{}, errors.New("ProvisionedThroughputExceededException: throttled")
}

func (failingStore) ClaimEvent(context.Context, delivery.EventClaimRequest) ([]delivery.Claim, error) {
	return nil, errors.New("ProvisionedThroughputExceededException: throttled")
}

func TestInfrastructureErrorFailsTheMessage(t *testing.T) {
	rg := newRig(t, failingStore{delivery.NewMemoryStore()}, true)
	res, err := rg.d.Deliver(context.Background(), event(t, "thing.happened", "t1", 1))
	if err == nil || !strings.Contains(err.Error(), "throttled") {
		t.Fatalf("got %v, want the infrastructure error", err)
	}
	if !res.RetryLater() || res.Count(delivery.Failed) != 3 {
		t.Errorf("got %s; want every subscription failed", outcomes(res))
	}
	if rg.r.count("test.first") != 0 {
		t.Error("a handler ran without a claim")
	}
}

func TestUnmatchedEventIsLoud(t *testing.T) {
	rg := newRig(t, delivery.NewMemoryStore(), true)
	res, err := rg.d.Deliver(context.Background(), event(t, "thing.ignored", "t1", 1))
	if err != nil || len(res.Subscriptions) != 0 {
		t.Fatalf("got %s, %v", outcomes(res), err)
	}
	if logs := rg.logs.String(); !strings.Contains(logs, `"level":"WARN"`) || !strings.Contains(logs, `"event_type":"thing.ignored"`) || !strings.Contains(logs, "matched no subscription") {
		t.Errorf("no warning naming the type; logs:\n%s", logs)
	}
	if m := rg.metrics.String(); !strings.Contains(m, `"`+keys.MetricUnmatched+`"`) {
		t.Errorf("no %s metric; got %s", keys.MetricUnmatched, m)
	}
}

func TestForgottenRegistrationIsLoud(t *testing.T) {
	rg := newRig(t, delivery.NewMemoryStore(), false) // the module's handlers were never bound
	res, err := rg.d.Deliver(context.Background(), event(t, "thing.happened", "t1", 1))
	if err != nil || len(res.Subscriptions) != 0 {
		t.Fatalf("got %s, %v", outcomes(res), err)
	}
	if logs := rg.logs.String(); strings.Count(logs, "declared but not registered in this process") != 3 {
		t.Errorf("want an error per unbound DURABLE subscription; logs:\n%s", logs)
	}
	if !strings.Contains(rg.metrics.String(), keys.MetricUnmatched) {
		t.Error("no Unmatched metric for unbound subscriptions")
	}
}

// TestUndeclaredEventsDeadLetterOnlyWhoCannotRead: events of a producer
// deployed before this build (a schema version and a type its catalog does
// not declare) reach the DURABLE lane. A subscription that cannot read the
// version is dead-lettered for that event alone, its siblings and the
// tenant's next event go on; a glob subscription that reads version 1 of the
// new type runs it.
func TestUndeclaredEventsDeadLetterOnlyWhoCannotRead(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) delivery.Store) {
		ctx := context.Background()
		rg := newRig(t, newStore(t), true)
		newer := event(t, "thing.happened", "t1", 7) // version 7: declared nowhere here
		res, err := rg.d.Deliver(ctx, newer)
		if got, want := outcomes(res), "test.first=dead_lettered test.second=dead_lettered test.third=dead_lettered"; err != nil || got != want {
			t.Fatalf("undeclared version: %s, %v; want %s", got, err, want)
		}
		letters, _, _ := rg.store.DeadLetters(ctx, "t1", "", 0)
		if len(letters) != 3 || !strings.Contains(letters[0].Error, "schema version 7") {
			t.Errorf("dead letters: %+v, want three naming schema version 7", letters)
		}
		next := event(t, "thing.happened", "t1", 1)
		next.Seq = 2
		if res, err := rg.d.Deliver(ctx, next); err != nil || outcomes(res) != "test.first=completed test.second=completed test.third=completed" {
			t.Errorf("the tenant's next event: %s, %v; want every subscription completed", outcomes(res), err)
		}
		hatched := event(t, "thing.hatched", "t1", 1) // a type declared nowhere here; test.third's glob thing.h* matches
		hatched.Seq = 3
		if res, err := rg.d.Deliver(ctx, hatched); err != nil || outcomes(res) != "test.third=completed" {
			t.Errorf("undeclared type: %s, %v; want test.third completed", outcomes(res), err)
		}
		if n := rg.r.count("test.third"); n != 2 {
			t.Errorf("test.third ran %d times, want 2 (the v1 event and the new type)", n)
		}
	})
}
