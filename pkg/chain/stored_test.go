package chain_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// TestCheckStored: a stored event checked on its own, as a consumer, the
// enrichment, repair and reconcile's anchor check it. Each failure is an
// *IntegrityError with its Reason and a message naming tenant and seq and
// what to do; its Break is what Verify reports at the same event.
func TestCheckStored(t *testing.T) {
	evs, _ := validChain(t, "acme", 3)
	const other = "0000000000000000000000000000000000000000000000000000000000000000"
	cases := []struct {
		name   string
		mutate func(e *envelope.Envelope)
		reason chain.Reason // "" for a valid event
	}{
		{"valid", func(e *envelope.Envelope) {}, ""},
		{"tampered payload", func(e *envelope.Envelope) { e.Payload["total_cents"] = numberOne() }, chain.ReasonHashMismatch},
		{"tampered hash", func(e *envelope.Envelope) { e.Hash = other }, chain.ReasonHashMismatch},
		{"tampered prev_hash", func(e *envelope.Envelope) { e.PrevHash = other }, chain.ReasonHashMismatch},
		{"hash not hex", func(e *envelope.Envelope) { e.Hash = "not-a-hash" }, chain.ReasonMalformed},
		{"no seq", func(e *envelope.Envelope) { e.Seq = 0 }, chain.ReasonMalformed},
		{"bad type", func(e *envelope.Envelope) { e.Type = "Order Placed" }, chain.ReasonMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := clone(evs)[2]
			c.mutate(&e)
			err := chain.CheckStored(&e)
			if c.reason == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			var ie *chain.IntegrityError
			if !errors.As(err, &ie) {
				t.Fatalf("got %T %v, want an *IntegrityError", err, err)
			}
			if ie.Reason != c.reason || ie.Tenant != "acme" || ie.Seq != e.Seq || ie.Stored != e.Hash {
				t.Errorf("got %+v, want reason %q, tenant acme, seq %d, stored %s", ie, c.reason, e.Seq, e.Hash)
			}
			for _, want := range []string{`tenant "acme"`, "seq " + strconv.FormatInt(e.Seq, 10), "run reconcile on the tenant"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q does not name %q", err, want)
				}
			}
			switch c.reason {
			case chain.ReasonHashMismatch:
				h, herr := chain.Hash(&e)
				if herr != nil || ie.Computed != h || ie.Computed == ie.Stored || ie.Err != nil {
					t.Errorf("computed %s, err %v: want the recomputed %s (%v), unlike the stored hash, and no Err", ie.Computed, ie.Err, h, herr)
				}
			case chain.ReasonMalformed:
				var fe *envelope.FieldError
				if !errors.As(err, &fe) || ie.Computed != "" {
					t.Errorf("got Err %v, computed %q: want a *envelope.FieldError and nothing computed", ie.Err, ie.Computed)
				}
			}
		})
	}
}

// TestCheckStoredBreakIsVerifys: where an event is wrong in itself, the
// *BreakError its IntegrityError gives is the one Verify reports there.
func TestCheckStoredBreakIsVerifys(t *testing.T) {
	evs, head := validChain(t, "acme", 3)
	for name, mutate := range map[string]func(e *envelope.Envelope){
		"tampered payload": func(e *envelope.Envelope) { e.Payload["total_cents"] = numberOne() },
		"hash not hex":     func(e *envelope.Envelope) { e.Hash = "not-a-hash" },
		"bad time":         func(e *envelope.Envelope) { e.OccurredAt = "yesterday" },
	} {
		t.Run(name, func(t *testing.T) {
			bad := clone(evs)
			mutate(&bad[1])
			var ie *chain.IntegrityError
			if !errors.As(chain.CheckStored(&bad[1]), &ie) {
				t.Fatal("CheckStored: got no *IntegrityError")
			}
			var be *chain.BreakError
			if !errors.As(chain.Verify("acme", bad, head), &be) {
				t.Fatal("Verify: got no *BreakError")
			}
			if diff := cmp.Diff(be, ie.Break()); diff != "" {
				t.Errorf("Break() differs from Verify's break (-Verify +Break):\n%s", diff)
			}
		})
	}
}

// numberOne is the payload number 1 in envelope form.
func numberOne() any { p, _ := envelope.NormalizePayload(map[string]any{"n": 1}); return p["n"] }
