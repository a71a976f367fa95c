package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/twin"
)

const emailSub = "notifications.order-email"

// Orders of three tenants flow from Emit through the Pipe and the FIFO
// queue to the durable subscriber, and through the change feed to the
// search projection; reconcile finds every chain intact and counts exactly
// the dead letters injected (payloads the subscriber cannot decode).
func TestOrdersFlowEndToEnd(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, nil)
	ctx := context.Background()
	tenants := []string{"acme", "globex", "initech"}
	const perTenant = 4
	placed, err := s.app.Workload(ctx, tenants, perTenant)
	if err != nil {
		t.Fatal(err)
	}
	injected := map[string]int{"acme": 0, "globex": 1, "initech": 2}
	var dead []envelope.Envelope
	for tenant, n := range injected {
		for range n {
			e, err := s.app.EmitUnchecked(ctx, tenant)
			if err != nil {
				t.Fatal(err)
			}
			dead = append(dead, e)
		}
	}
	if err := s.app.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// Every event of the log reaches the DURABLE subscriber once: completed,
	// or dead-lettered for the injected ones.
	all := map[string][]envelope.Envelope{}
	for _, tenant := range tenants {
		evs, err := s.app.Events.AllEvents(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		all[tenant] = evs
		if want := perTenant*3 + injected[tenant]; len(evs) != want {
			t.Fatalf("tenant %s: %d events in the log, want %d", tenant, len(evs), want)
		}
	}
	isDead := map[string]bool{}
	for _, e := range dead {
		isDead[e.ID] = true
	}
	eventually(t, 90*time.Second, "every event delivered to "+emailSub, func() (bool, string) {
		for tenant, evs := range all {
			for _, e := range evs {
				want := delivery.StatusCompleted
				if isDead[e.ID] {
					want = delivery.StatusDead
				}
				c, ok := s.claim(e.ID, emailSub)
				if !ok || c.Status != want {
					return false, fmt.Sprintf("tenant %s seq %d (%s): claim %+v (found %v), want %s", tenant, e.Seq, e.Type, c.Status, ok, want)
				}
			}
		}
		return true, ""
	})

	// Each dead letter names the field the producer left out: the reader
	// refused it (a missing required field is never read as its zero value).
	for tenant, n := range injected {
		letters, _, err := delivery.NewDynamoStore(s.ddb, s.env[keys.EnvStateTable]).DeadLetters(ctx, tenant, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(letters) != n {
			t.Errorf("tenant %s: %d dead letters, want %d", tenant, len(letters), n)
		}
		for _, dl := range letters {
			if want := "decode payload into orders.PaidV1: payload.payment_ref: is missing"; dl.Attempts != 1 || !strings.Contains(dl.Error, want) {
				t.Errorf("dead letter of %s seq %d: %d attempts, error %q; want 1 attempt (permanent) and the error to say %q", tenant, dl.Seq, dl.Attempts, dl.Error, want)
			}
		}
	}

	// Every order is projected by the change feed at its final version.
	eventually(t, 60*time.Second, "the search projection", func() (bool, string) {
		for tenant, os := range placed {
			for _, o := range os {
				v, ok, err := s.app.SearchVersion(ctx, tenant, o.ID)
				if err != nil {
					return false, err.Error()
				}
				if !ok || v != o.Version {
					return false, fmt.Sprintf("order %s of %s: projected v%d (found %v), want v%d", o.ID, tenant, v, ok, o.Version)
				}
			}
		}
		return true, ""
	})

	for _, tenant := range tenants {
		r := s.reconcile(tenant)
		if r.ChainIntact == nil || !*r.ChainIntact || r.LastSeq != int64(len(all[tenant])) || string(r.FirstBreak) != "null" {
			t.Errorf("reconcile %s: chain_intact %v last_seq %d first_break %s, want intact through %d", tenant, r.ChainIntact, r.LastSeq, r.FirstBreak, len(all[tenant]))
		}
		if r.DeadLetterCount != injected[tenant] {
			t.Errorf("reconcile %s: dead_letter_count %d, want %d (injected)", tenant, r.DeadLetterCount, injected[tenant])
		}
	}
	// Every tenant at once, paged (the CLI follows the cursor).
	if out := s.reconcileCLI("-url", s.url); strings.Count(out, `"chain_intact": true`) != len(tenants) {
		t.Errorf("reconcile of every tenant: want %d intact chains, got:\n%s", len(tenants), out)
	}

	// The design never shares a dedup id, and the filter kept head rows out.
	if n := s.tw.Journal().Count(func(e twin.Entry) bool { return e.Kind == twin.KindDuplicate }); n != 0 {
		t.Errorf("%d messages dropped as duplicates; the design never shares a dedup id", n)
	}
	if st, _ := s.tw.Poller(s.pipe); st.Filtered == 0 || st.Failed != 0 {
		t.Errorf("Pipe: %+v, want head rows filtered and nothing failed", st)
	}
	for _, src := range []string{s.pipe, s.feedMap} {
		if n := s.tw.Journal().Count(func(e twin.Entry) bool { return e.Source == src && e.Kind == twin.KindDestination }); n != 0 {
			t.Errorf("%s: %d batches given up on, want 0", src, n)
		}
	}
}
