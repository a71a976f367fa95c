package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/test/relay"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/testkit"
	"github.com/fourlanes/fourlanes/twin/twintest"
)

// relayApp is the A → B → C choreography (test/relay): desk's
// ticket.opened, triage's follow-on ticket.triaged, pager's page.
var relayApp = testkit.Options{App: "./test/relay/infra", Functions: "test/relay/functions", StackPrefix: "relay"}

// startRelay brings the relay's stack up, mutated by mutate if given, with
// the generic CLI for reconcile.
func startRelay(t *testing.T, mutate func(*cfn.Template)) (*stack, *relay.Desk) {
	t.Helper()
	twintest.Endpoints(t) // skip before building when there are no servers
	cli := buildCLI(t, fourlanesCLI)
	s := upStack(t, relayApp, mutate, cli)
	var err error
	if s.env, err = s.tw.FunctionEnv(s.fn[keys.FnDLQRepair]); err != nil {
		t.Fatal(err)
	}
	store, err := relay.App.EventStore(s.ddb, s.env[keys.EnvEventsTable])
	if err != nil {
		t.Fatal(err)
	}
	return s, &relay.Desk{Events: store}
}

// TestFollowOnChain: A → B → C across three modules, with durable-consumer
// killed between B's effect (the transaction that writes triage's row and
// appends ticket.triaged, committed, its answer held) and its claim's
// completion. The message comes back, triage runs again, and its emit
// appends nothing: each event is in the log exactly once, chained, with
// causation opened → triaged; pager pages once per triaged ticket; every
// subscription settles. Without a kill, triage's LOCAL subscriber of the
// follow-on runs in durable-consumer, once.
func TestFollowOnChain(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s, desk := startRelay(t, shortConsumer)
	fs := newFaults(t)
	ctx := context.Background()
	events := s.env[keys.EnvEventsTable]

	// The kill: only triage's follow-on transactions carry ticket.triaged.
	fs.arm(fault{Action: "TransactWriteItems", Table: events, Match: `"` + relay.TypeTriaged + `"`, Kind: "delay", DelayMs: 60_000})
	const crashed = "relay-crash"
	opened, err := desk.Open(tenancy.MustWithTenant(ctx, crashed), "t-1", "!printer on fire")
	if err != nil {
		t.Fatal(err)
	}
	s.killConsumerWhenHeld(t, fs, "TransactWriteItems", events)
	if c, ok := s.claim(opened.ID, relay.SubTriage); !ok || c.Status != "pending" {
		t.Fatalf("triage's claim after the kill: %+v (found %v), want pending: the kill was not before the completion", c, ok)
	}
	if evs := s.events(t, desk.Events, crashed); len(evs) != 2 {
		t.Fatalf("log of %s after the kill: %d events, want 2: the follow-on did not commit before the kill", crashed, len(evs))
	}

	const calm = "relay-calm"
	calmOpened, err := desk.Open(tenancy.MustWithTenant(ctx, calm), "t-2", "coffee machine")
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		tenant string
		opened envelope.Envelope
	}{{crashed, opened}, {calm, calmOpened}} {
		var triaged envelope.Envelope
		eventually(t, 90*time.Second, "ticket.triaged of "+c.tenant+" paged", func() (bool, string) {
			evs := s.events(t, desk.Events, c.tenant)
			if len(evs) < 2 {
				return false, fmt.Sprintf("%d events", len(evs))
			}
			triaged = evs[1]
			rec, ok := s.claim(triaged.ID, relay.SubPage)
			return ok && rec.Status == "completed", fmt.Sprintf("pager's claim %q (found %v)", rec.Status, ok)
		})
		s.checkSettled(t, c.tenant)
		if evs := s.events(t, desk.Events, c.tenant); len(evs) != 2 || evs[0].ID != c.opened.ID || evs[1].Seq != 2 {
			t.Errorf("log of %s: %d events, want ticket.opened %s at 1 and its follow-on at 2: %+v", c.tenant, len(evs), c.opened.ID, evs)
		}
		if r := s.reconcile(c.tenant); r.ChainIntact == nil || !*r.ChainIntact || r.LastSeq != 2 || r.DeadLetterCount != 0 {
			t.Errorf("reconcile %s: chain intact %v, last_seq %d, dead letters %d; want intact, 2, 0", c.tenant, r.ChainIntact != nil && *r.ChainIntact, r.LastSeq, r.DeadLetterCount)
		}
		if triaged.Type != relay.TypeTriaged || triaged.CausationID != c.opened.ID {
			t.Errorf("%s: second event %s caused by %q, want %s caused by %s", c.tenant, triaged.Type, triaged.CausationID, relay.TypeTriaged, c.opened.ID)
		}
		var p relay.TriagedV1
		if err := triaged.DecodePayload(&p); err != nil || p.Ticket == "" {
			t.Errorf("%s: triaged payload %+v, %v", c.tenant, p, err)
		}
		// The causation chain as an operator sees it: the page names the
		// triaged event and what caused that.
		pages := s.lineFields(t, keys.FnDurableConsumer, relay.LinePaged, "triaged_id", triaged.ID)
		if len(pages) != 1 || pages[0]["caused_by"] != c.opened.ID {
			t.Errorf("%s: pages for %s: %v, want one caused by %s", c.tenant, triaged.ID, pages, c.opened.ID)
		}
		// triage ran to its end once per tenant: the killed run never got
		// its emit's answer, the redelivery's got the first run's event.
		runs := s.lineFields(t, keys.FnDurableConsumer, relay.LineTriaged, "followon_id", triaged.ID)
		if len(runs) != 1 {
			t.Errorf("%s: triage completed %d runs naming %s, want 1", c.tenant, len(runs), triaged.ID)
		}
	}
	// The redelivery of the killed message took over triage's claim.
	if n := len(s.grep(s.fn[keys.FnDurableConsumer], "took over a pending claim")); n == 0 {
		t.Error("no takeover of triage's claim logged after the kill")
	}
	// The follow-on's LOCAL subscriber ran where it was emitted.
	calmTriaged := s.events(t, desk.Events, calm)[1]
	if got := s.lineFields(t, keys.FnDurableConsumer, relay.LineTallied, "triaged_id", calmTriaged.ID); len(got) != 1 || got[0]["caused_by"] != calmOpened.ID {
		t.Errorf("LOCAL tally of %s in durable-consumer: %v, want once, caused by %s", calmTriaged.ID, got, calmOpened.ID)
	}
}

// events returns tenant's log.
func (s *stack) events(t *testing.T, store *eventstore.Store, tenant string) []envelope.Envelope {
	t.Helper()
	evs, err := store.AllEvents(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// lineFields returns the JSON lines function fn (a folder name) printed with
// msg (any, when empty) whose field key is value, decoded.
func (s *stack) lineFields(t *testing.T, fn, msg, key, value string) []map[string]any {
	t.Helper()
	sub := `"msg":"` + msg + `"`
	if msg == "" {
		sub = value
	}
	var out []map[string]any
	for _, l := range s.grep(s.fn[fn], sub) {
		_, text, _ := strings.Cut(l, ": ")
		var m map[string]any
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			continue
		}
		if m[key] == value {
			out = append(out, m)
		}
	}
	return out
}
