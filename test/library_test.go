package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/examples/library"
	"github.com/fourlanes/fourlanes/examples/library/loans"
	"github.com/fourlanes/fourlanes/examples/library/reminders"
	"github.com/fourlanes/fourlanes/examples/library/shelf"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/testkit"
)

// libraryApp is where the library example lives in the workspace.
var libraryApp = testkit.Options{App: "./examples/library/infra", Functions: "examples/library/functions", StackPrefix: "lib"}

// assembleLibrary returns the library's synthesized template, what runs its
// functions, and its own build of the CLI (cli.Main(&library.App)).
func assembleLibrary(t *testing.T) (*cfn.Template, twin.CodeResolver, string) {
	t.Helper()
	tmpl, code := testkit.Assemble(t, libraryApp)
	return tmpl, code, buildCLI(t, libraryCLI)
}

// startLibrary brings up a twin of the library's stack, mutated by mutate if
// given (on a copy); the stack's app is nil (the test drives the library's
// own service).
func startLibrary(t *testing.T, mutate ...func(*cfn.Template)) *stack {
	t.Helper()
	_, _, cli := assembleLibrary(t)
	s := upStack(t, libraryApp, func(tm *cfn.Template) {
		for _, m := range mutate {
			m(tm)
		}
	}, cli)
	tw := s.tw
	var err error
	for _, name := range keys.Functions {
		if s.fn[name] == "" {
			t.Fatalf("the library's template has no function %s", name)
		}
	}
	if s.url == "" {
		t.Fatal("no Function URL for reconcile")
	}
	if s.env, err = tw.FunctionEnv(s.fn[keys.FnDLQRepair]); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{keys.EnvEventsTable, keys.EnvStateTable, loans.EnvTable, shelf.EnvTable} {
		if s.env[v] == "" {
			t.Fatalf("dlq-repair's environment lacks %s: %v", v, s.env)
		}
	}
	// The library is a new stack (backbone.Props.PerPairClaimsGone): its
	// durable-consumer and dlq-repair read one claim item per event, and
	// every delivery in its tests goes that way.
	consumer, err := tw.FunctionEnv(s.fn[keys.FnDurableConsumer])
	if err != nil {
		t.Fatal(err)
	}
	if consumer[keys.EnvPerPairClaims] != keys.PerPairClaimsGone || s.env[keys.EnvPerPairClaims] != keys.PerPairClaimsGone {
		t.Fatalf("%s: durable-consumer %q, dlq-repair %q; want %q on both", keys.EnvPerPairClaims,
			consumer[keys.EnvPerPairClaims], s.env[keys.EnvPerPairClaims], keys.PerPairClaimsGone)
	}
	return s
}

// The library, from its own declarations, deployed by the twin from its own
// stack: two branches (tenants) open and return loans through the library's
// service; every event reaches reminders (DURABLE) once, the shelf
// projection (BEST_EFFORT) reaches every loan's final version, and reconcile
// through the stack's Function URL finds every chain intact and no dead
// letters. It clears no fault rules, so it runs in parallel.
func TestLibraryEndToEnd(t *testing.T) {
	t.Parallel()
	s := startLibrary(t)
	ctx := context.Background()

	events, err := library.App.EventStore(s.ddb, s.env[keys.EnvEventsTable], s.vault(t))
	if err != nil {
		t.Fatal(err)
	}
	desk := &loans.Service{Events: events, Table: s.env[loans.EnvTable]}

	// Each branch opens 6 loans and returns every other one, the branches
	// at once.
	tenants := []string{"north-branch", "south-branch"}
	const opened = 6
	final := map[string][]loans.Loan{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(tenants))
	for _, tenant := range tenants {
		wg.Go(func() {
			tctx, err := tenancy.WithTenant(ctx, tenant)
			if err != nil {
				errs <- err
				return
			}
			var ls []loans.Loan
			for i := range opened {
				l, err := desk.Open(tctx, fmt.Sprintf("isbn-%03d", i), fmt.Sprintf("member-%d", i%3), fmt.Sprintf("member-%d@example.com", i%3))
				if err != nil {
					errs <- err
					return
				}
				if i%2 == 0 {
					if l, err = desk.Return(tctx, l); err != nil {
						errs <- err
						return
					}
				}
				ls = append(ls, l)
			}
			mu.Lock()
			final[tenant] = ls
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A stale return is refused, and changes nothing.
	nctx, _ := tenancy.WithTenant(ctx, tenants[0])
	stale := final[tenants[0]][0]
	stale.Version = 1
	if _, err := desk.Return(nctx, stale); !errors.Is(err, loans.ErrStale) {
		t.Fatalf("return of a loan at a stale version: err %v, want ErrStale", err)
	}

	const perTenant = opened + opened/2
	all := map[string][]envelope.Envelope{}
	total := 0
	for _, tenant := range tenants {
		evs, err := events.AllEvents(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != perTenant {
			t.Fatalf("tenant %s: %d events in the log, want %d", tenant, len(evs), perTenant)
		}
		all[tenant] = evs
		total += len(evs)
	}

	// Every event reaches reminders once: its claim completed, its reminder
	// recorded in the state table, and exactly one "reminder sent" line.
	eventually(t, 90*time.Second, "every event delivered to "+reminders.Subscription, func() (bool, string) {
		sent := s.remindersSent()
		for tenant, evs := range all {
			for _, e := range evs {
				if c, ok := s.claim(e.ID, reminders.Subscription); !ok || c.Status != delivery.StatusCompleted {
					return false, fmt.Sprintf("tenant %s seq %d (%s): claim %q (found %v), want %s", tenant, e.Seq, e.Type, c.Status, ok, delivery.StatusCompleted)
				}
				if n := sent[e.ID]; n != 1 {
					return false, fmt.Sprintf("tenant %s seq %d (%s): %d %q lines, want 1", tenant, e.Seq, e.Type, n, reminders.Sent)
				}
			}
		}
		return true, ""
	})
	sent := s.remindersSent()
	lines := 0
	for _, n := range sent {
		lines += n
	}
	if len(sent) != total || lines != total {
		t.Errorf("%d %q lines for %d events, want one per event (%d events in the log)", lines, reminders.Sent, len(sent), total)
	}
	effects := effect.NewDynamoStore(s.ddb, s.env[keys.EnvStateTable])
	for _, evs := range all {
		for _, e := range evs {
			k := effect.Key{EventID: e.ID, Subscription: reminders.Subscription, Name: reminders.EffectReminder}
			if r, ok, err := effects.Get(ctx, k); err != nil || !ok || r.Status != effect.StatusDone {
				t.Errorf("event %s (%s): reminder effect %+v (found %v, %v), want recorded done in the state table", e.ID, e.Type, r, ok, err)
			}
		}
	}

	// The shelf projection reaches every loan's final version.
	eventually(t, 60*time.Second, "the shelf projection", func() (bool, string) {
		for tenant, ls := range final {
			for _, l := range ls {
				r, ok, err := shelf.Get(ctx, s.ddb, s.env[shelf.EnvTable], tenant, l.ID)
				if err != nil {
					return false, err.Error()
				}
				if want := (shelf.Row{Version: l.Version, Book: l.Book, OnShelf: l.Status == loans.StatusReturned}); !ok || r != want {
					return false, fmt.Sprintf("loan %s of %s: projected %+v (found %v), want %+v", l.ID, tenant, r, ok, want)
				}
			}
		}
		return true, ""
	})

	// Reconcile through the stack's Function URL: every chain intact, no
	// dead letters.
	for _, tenant := range tenants {
		r := s.reconcile(tenant)
		if r.ChainIntact == nil || !*r.ChainIntact || r.LastSeq != perTenant || string(r.FirstBreak) != "null" {
			t.Errorf("reconcile %s: chain_intact %v last_seq %d first_break %s, want intact through %d", tenant, r.ChainIntact, r.LastSeq, r.FirstBreak, perTenant)
		}
		if r.DeadLetterCount != 0 || len(r.DeadLetters) != 0 {
			t.Errorf("reconcile %s: %d dead letters %v, want none", tenant, r.DeadLetterCount, r.DeadLetters)
		}
	}
	if out := s.reconcileCLI("-url", s.url); strings.Count(out, `"chain_intact": true`) != len(tenants) {
		t.Errorf("reconcile of every tenant: want %d intact chains, got:\n%s", len(tenants), out)
	}
	// The library's own build of the CLI knows its catalog: watermarks
	// lists its DURABLE subscription for every tenant, settled to the head.
	eventually(t, 60*time.Second, "the library CLI's watermarks at the head", func() (bool, string) {
		code, out, errOut := s.cli2("watermarks", "-table", s.env[keys.EnvEventsTable], "-state-table", s.env[keys.EnvStateTable])
		if code != 0 {
			return false, fmt.Sprintf("exit %d: %s", code, errOut)
		}
		for _, tenant := range tenants {
			found := false
			for _, line := range strings.Split(out, "\n") {
				f := strings.Fields(line)
				if len(f) >= 5 && f[0] == tenant && f[1] == reminders.Subscription {
					found = f[3] == fmt.Sprint(perTenant) && f[4] == "0"
				}
			}
			if !found {
				return false, fmt.Sprintf("no line for %s %s at head %d, 0 behind:\n%s", tenant, reminders.Subscription, perTenant, out)
			}
		}
		return true, ""
	})
	t.Logf("library: %d events of %d tenants delivered once and projected", total, len(tenants))
}

// remindersSent counts the "reminder sent" lines the functions printed, by
// event id.
func (s *stack) remindersSent() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, l := range s.lines {
		_, text, _ := strings.Cut(l, ": ")
		var line struct {
			Msg     string `json:"msg"`
			EventID string `json:"event_id"`
		}
		if json.Unmarshal([]byte(text), &line) == nil && line.Msg == reminders.Sent {
			out[line.EventID]++
		}
	}
	return out
}

// TestLibraryReminderOfUnknownOutcome: the library's reminder is at most
// once (examples/library/reminders). durable-consumer is killed after the
// reminder's record committed and before it was sent. The redelivery does
// not send it: it dead-letters the subscription naming the effect, and that
// is loud everywhere an operator looks: the consumer's EffectUnknown,
// reconcile's effects_unknown and UnknownEffectsOpen (so the delivery audit
// is not settled), `fourlanes effects` (exit 3), dlq-repair leaving it open.
// The operator decides (redo); dlq-repair's next run sends it, once, and
// everything is settled.
func TestLibraryReminderOfUnknownOutcome(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startLibrary(t, shortConsumer)
	fs := newFaults(t)
	ctx := context.Background()
	state, eventsTable := s.env[keys.EnvStateTable], s.env[keys.EnvEventsTable]
	events, err := library.App.EventStore(s.ddb, eventsTable, s.vault(t))
	if err != nil {
		t.Fatal(err)
	}
	desk := &loans.Service{Events: events, Table: s.env[loans.EnvTable]}
	const tenant = "east-branch"

	fs.arm(fault{Action: "UpdateItem", Table: state, Match: `"` + keys.StateEffectPrefix, Kind: "delay", DelayMs: 60_000})
	if _, err := desk.Open(tenancy.MustWithTenant(ctx, tenant), "isbn-777", "member-9", ""); err != nil {
		t.Fatal(err)
	}
	s.killConsumerWhenHeld(t, fs, "UpdateItem", state)
	evs, err := events.AllEvents(ctx, tenant)
	if err != nil || len(evs) != 1 {
		t.Fatalf("log of %s: %d events, %v; want 1", tenant, len(evs), err)
	}
	e := evs[0]
	k := effect.Key{EventID: e.ID, Subscription: reminders.Subscription, Name: reminders.EffectReminder}

	eventually(t, 90*time.Second, "the redelivery dead-letters the reminder of unknown outcome", func() (bool, string) {
		c, ok := s.claim(e.ID, reminders.Subscription)
		return ok && c.Status == delivery.StatusDead, fmt.Sprintf("claim %+v (found %v)", c, ok)
	})
	if n := s.remindersSent()[e.ID]; n != 0 {
		t.Fatalf("%d reminders sent, want 0 (at most once, outcome unknown)", n)
	}
	s.waitMetric(t, keys.FnDurableConsumer, keys.MetricEffectUnknown, reminders.Subscription, "1", func(v float64) bool { return v >= 1 })
	audit := func() (dead, unknown int) {
		var r struct {
			DeadLetterCount int `json:"dead_letter_count"`
			Subscriptions   []struct {
				EffectsUnknown int `json:"effects_unknown"`
			} `json:"subscriptions"`
		}
		out := s.reconcileCLI("-url", s.url, "-tenant", tenant)
		if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Subscriptions) != 1 {
			t.Fatalf("reconcile output %q: %v", out, err)
		}
		return r.DeadLetterCount, r.Subscriptions[0].EffectsUnknown
	}
	if dead, unknown := audit(); dead != 1 || unknown != 1 {
		t.Errorf("reconcile %s: %d dead letters, %d effects unknown; want 1, 1", tenant, dead, unknown)
	}
	s.waitMetric(t, keys.FnReconcile, keys.MetricUnknownEffectsOpen, reminders.Subscription, "1", func(v float64) bool { return v == 1 })

	tables := []string{"-table", eventsTable, "-state-table", state}
	code, out, stderr := s.cli2(append([]string{"effects", "-json"}, tables...)...)
	if code != 3 || !strings.Contains(out, `"key":"`+k.String()+`"`) || !strings.Contains(out, `"status":"unknown"`) {
		t.Fatalf("fourlanes effects: exit %d, %q %q; want 3 and the reminder's effect unknown", code, out, stderr)
	}
	// Repair before a decision replays it and it stays parked, open.
	rep, out := s.repairAllowOpen()
	if src := rep.Sources["dead_letters"]; src.Open != 1 || src.Fixed != 0 {
		t.Fatalf("dead letters before a decision: %+v, want 1 open\n%s", src, out)
	}
	if n := s.remindersSent()[e.ID]; n != 0 {
		t.Fatalf("%d reminders sent by a repair before the decision, want 0", n)
	}

	// The operator finds it was never sent and decides redo.
	if code, out, stderr := s.cli2(append([]string{"effects", "-redo", k.String()}, tables...)...); code != 0 || !strings.Contains(out, "redo") {
		t.Fatalf("fourlanes effects -redo: exit %d, %q %q", code, out, stderr)
	}
	if rep, out := s.repair(); rep.Sources["dead_letters"].Fixed != 1 {
		t.Fatalf("dead letters after the decision: %+v, want 1 fixed\n%s", rep.Sources["dead_letters"], out)
	}
	eventually(t, 10*time.Second, "one reminder", func() (bool, string) {
		n := s.remindersSent()[e.ID]
		return n == 1, fmt.Sprintf("%d reminders", n)
	})
	if dead, unknown := audit(); dead != 0 || unknown != 0 {
		t.Errorf("reconcile %s after the decision: %d dead letters, %d effects unknown; want 0, 0", tenant, dead, unknown)
	}
	s.checkSettled(t, tenant)
	if code, out, _ := s.cli2(append([]string{"effects"}, tables...)...); code != 0 || strings.Contains(out, k.String()) {
		t.Errorf("fourlanes effects after the replay: exit %d, %q; want 0 and nothing listed", code, out)
	}
}
