package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/test/relay"
	"github.com/fourlanes/fourlanes/test/relay/next"
	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// TestDeployInAnyOrder: two builds of one application with different
// catalogs. The backbone runs the relay's build; a producer built from the
// next release (test/relay/next: ticket.opened v2) ships first and emits
// v2 beside the old build's v1 events, on the same shard.
//
// Before the backbone is redeployed: stream-filter passes the v2 event (its
// hash and link checked), logging a WARN and counting UndeclaredEvents for
// ticket.opened v2; nothing is rejected and the Pipe DLQ stays empty; the
// other tenant's events, the same tenant's later v1 event and their
// follow-on type all deliver; triage, which cannot read v2, dead-letters
// that one event alone, and reconcile reports it.
//
// After the backbone is redeployed with the next release's functions,
// dlq-repair replays the dead letter: triage reads v2, its follow-on is
// emitted and paged, and every subscription settles; a new v2 event
// delivers straight, without a warning.
func TestDeployInAnyOrder(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go: no fault rules
	s, oldDesk := startRelay(t, nil)
	ctx := context.Background()
	store, err := next.App.EventStore(s.ddb, s.env[keys.EnvEventsTable])
	if err != nil {
		t.Fatal(err)
	}
	newDesk := &next.Desk{Events: store}
	in := func(tenant string) context.Context { return tenancy.MustWithTenant(ctx, tenant) }
	const fresh, other = "deploy-new", "deploy-old"

	v2, err := newDesk.Open(in(fresh), "n-1", "!disk full", "ops")
	if err != nil || v2.SchemaVersion != 2 {
		t.Fatalf("the next release's emit: v%d, %v; want ticket.opened v2", v2.SchemaVersion, err)
	}
	later, err := oldDesk.Open(in(fresh), "n-2", "mouse")
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, err := oldDesk.Open(in(other), "o-1", "keyboard")
	if err != nil {
		t.Fatal(err)
	}

	// Other tenants, later events and other types deliver.
	for _, e := range []envelope.Envelope{later, elsewhere} {
		s.waitPaged(t, e)
	}
	// v2 is parked alone, loudly.
	eventually(t, 60*time.Second, "triage's claim of the v2 event dead", func() (bool, string) {
		c, ok := s.claim(v2.ID, relay.SubTriage)
		return ok && c.Status == "dead", fmt.Sprintf("claim %+v (found %v)", c, ok)
	})
	warns := s.lineFields(t, keys.FnStreamFilter, "", "event_id", v2.ID)
	if len(warns) != 1 || warns[0]["level"] != "WARN" || warns[0]["event_type"] != relay.TypeOpened || warns[0]["schema_version"] != 2.0 {
		t.Errorf("stream-filter's lines about the v2 event: %v, want one WARN naming ticket.opened v2", warns)
	}
	if !s.emfSeen(keys.FnStreamFilter, keys.MetricUndeclaredEvents, `"Type":"`+relay.TypeOpened+`"`, `"Version":"2"`) {
		t.Error("stream-filter counted no UndeclaredEvents for ticket.opened v2")
	}
	if n := len(s.grep(s.fn[keys.FnStreamFilter], "stream record rejected")); n != 0 {
		t.Errorf("stream-filter rejected %d records, want none", n)
	}
	if n := s.depth(keys.EnvPipeDLQURL); n != 0 {
		t.Errorf("Pipe DLQ holds %d messages, want 0", n)
	}
	dead := s.lineFields(t, keys.FnDurableConsumer, "subscription dead-lettered", "event_id", v2.ID)
	if len(dead) != 1 || dead[0]["subscription"] != relay.SubTriage || !strings.Contains(fmt.Sprint(dead[0]["err"]), "schema version 2") {
		t.Errorf("dead-lettering of the v2 event: %v, want triage's, naming schema version 2", dead)
	}
	if r := s.reconcile(fresh); r.DeadLetterCount != 1 {
		t.Errorf("reconcile %s: dead_letter_count %d, want 1 (the v2 event's triage): %v", fresh, r.DeadLetterCount, r.DeadLetters)
	}

	// Redeploy the backbone with the next release.
	root, err := localaws.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	build := t.TempDir()
	if err := twin.BuildHost(ctx, root, "test/relay/next/functions", build, keys.Functions); err != nil {
		t.Fatal(err)
	}
	for _, fn := range keys.Functions {
		f, err := s.tw.Function(s.fn[fn])
		if err != nil {
			t.Fatal(err)
		}
		f.Redeploy(filepath.Join(build, fn, "bootstrap"))
	}
	rep, out := s.repair()
	if rep.Fixed < 1 || rep.Open != 0 {
		t.Errorf("dlq-repair after the redeploy: fixed %d, open %d, want the dead letter fixed: %s", rep.Fixed, rep.Open, out)
	}
	triaged := s.waitPaged(t, v2)
	var p relay.TriagedV1
	if err := triaged.DecodePayload(&p); err != nil || p.Ticket != "n-1" || p.Priority != "urgent" {
		t.Errorf("the v2 event's follow-on: %+v, %v; want n-1 urgent", p, err)
	}
	if r := s.reconcile(fresh); r.DeadLetterCount != 0 {
		t.Errorf("reconcile %s after the replay: dead_letter_count %d, want 0: %v", fresh, r.DeadLetterCount, r.DeadLetters)
	}
	after, err := newDesk.Open(in(fresh), "n-3", "printer", "ops")
	if err != nil {
		t.Fatal(err)
	}
	s.waitPaged(t, after)
	if n := len(s.lineFields(t, keys.FnStreamFilter, "", "event_id", after.ID)); n != 0 {
		t.Errorf("stream-filter warned %d times about a v2 event after the redeploy, want 0", n)
	}
	s.checkSettled(t, fresh)
	s.checkSettled(t, other)
}

// waitPaged waits until opened's follow-on ticket.triaged is in the log and
// pager completed it, and returns the follow-on.
func (s *stack) waitPaged(t *testing.T, opened envelope.Envelope) envelope.Envelope {
	t.Helper()
	store, err := relay.App.EventStore(s.ddb, s.env[keys.EnvEventsTable])
	if err != nil {
		t.Fatal(err)
	}
	var triaged envelope.Envelope
	eventually(t, 90*time.Second, "the follow-on of "+opened.ID+" paged", func() (bool, string) {
		triaged = envelope.Envelope{}
		for _, e := range s.events(t, store, opened.TenantID) {
			if e.Type == relay.TypeTriaged && e.CausationID == opened.ID {
				triaged = e
			}
		}
		if triaged.ID == "" {
			return false, "no ticket.triaged caused by it"
		}
		c, ok := s.claim(triaged.ID, relay.SubPage)
		return ok && c.Status == "completed", fmt.Sprintf("pager's claim %q (found %v)", c.Status, ok)
	})
	return triaged
}

// emfSeen reports whether function fn (a folder name) wrote an EMF line for
// metric that contains every one of has.
func (s *stack) emfSeen(fn, metric string, has ...string) bool {
	for _, l := range s.grep(s.fn[fn], `"`+metric+`":`) {
		ok := strings.Contains(l, `"_aws"`)
		for _, h := range has {
			ok = ok && strings.Contains(l, h)
		}
		if ok {
			return true
		}
	}
	return false
}
