package chain_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
)

var update = flag.Bool("update", false, "rewrite testdata/negative")

type vector struct {
	Name      string          `json:"name"`
	Kind      string          `json:"kind"`
	TenantID  string          `json:"tenant_id"`
	Envelope  json.RawMessage `json:"envelope"`
	Canonical string          `json:"canonical"`
	Expected  string          `json:"expected"`
}

// TestKnownAnswerVectors checks the Go implementation against vectors
// derived independently by testdata/derive.py from SPEC.md.
func TestKnownAnswerVectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Vectors []vector }
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) < 6 {
		t.Fatalf("got %d vectors, want at least 6", len(file.Vectors))
	}
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			switch v.Kind {
			case "genesis":
				if got := chain.Genesis(v.TenantID); got != v.Expected {
					t.Errorf("Genesis(%q): got %s, want %s", v.TenantID, got, v.Expected)
				}
			case "event":
				var line bytes.Buffer
				if err := json.Compact(&line, v.Envelope); err != nil {
					t.Fatal(err)
				}
				e, err := envelope.FromJSON(line.Bytes())
				if err != nil {
					t.Fatalf("decode envelope: %v", err)
				}
				canon, err := e.CanonicalBytes()
				if err != nil {
					t.Fatal(err)
				}
				if string(canon) != v.Canonical {
					t.Errorf("canonical bytes:\n got %s\nwant %s", canon, v.Canonical)
				}
				h, err := chain.Hash(&e)
				if err != nil {
					t.Fatal(err)
				}
				if h != v.Expected || e.Hash != v.Expected {
					t.Errorf("hash: got %s (stored %s), want %s", h, e.Hash, v.Expected)
				}
			default:
				t.Fatalf("unknown vector kind %q", v.Kind)
			}
		})
	}
}

// validChain builds n sealed events of tenant with the head after them.
func validChain(t testing.TB, tenant string, n int) ([]envelope.Envelope, *chain.Head) {
	t.Helper()
	evs := make([]envelope.Envelope, n)
	prev := chain.Genesis(tenant)
	for i := range evs {
		p, err := envelope.NormalizePayload(map[string]any{"order_id": fmt.Sprintf("o-%d", i+1), "total_cents": 100 * (i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		e := envelope.Envelope{
			ID: fmt.Sprintf("0190c5a8-7d4e-7c3b-9d1a-%012d", i+1), Type: "order.placed", TenantID: tenant,
			OccurredAt: "2026-11-29T19:45:00Z", SchemaVersion: 1, Payload: p, Seq: int64(i + 1), PrevHash: prev,
		}
		if err := chain.Seal(&e); err != nil {
			t.Fatal(err)
		}
		prev = e.Hash
		evs[i] = e
	}
	return evs, &chain.Head{TenantID: tenant, LastSeq: int64(n), LastHash: prev}
}

// negCase is one entry of the negative corpus: a mutation of a valid chain and
// the first break Verify must name.
type negCase struct {
	Name   string
	Seq    int64
	Reason chain.Reason
	Mutate func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head)
}

func clone(evs []envelope.Envelope) []envelope.Envelope {
	out := make([]envelope.Envelope, len(evs))
	for i, e := range evs {
		p := map[string]any{}
		for k, v := range e.Payload {
			p[k] = v
		}
		e.Payload = p
		out[i] = e
	}
	return out
}

func reseal(t testing.TB, e *envelope.Envelope) {
	if err := chain.Seal(e); err != nil {
		t.Fatal(err)
	}
}

func negativeCorpus(t testing.TB) []negCase {
	return []negCase{
		{"tampered payload", 4, chain.ReasonHashMismatch, func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head) {
			evs[3].Payload["total_cents"] = json.Number("1")
			return evs, h
		}},
		{"tampered payload, rehashed", 5, chain.ReasonPrevMismatch, func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head) {
			evs[3].Payload["total_cents"] = json.Number("1")
			reseal(t, &evs[3])
			return evs, h
		}},
		{"edited type", 2, chain.ReasonHashMismatch, func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head) {
			evs[1].Type = "order.cancelled"
			return evs, h
		}},
		{"edited actor", 7, chain.ReasonHashMismatch, func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head) {
			evs[6].ActorID = "mallory"
			return evs, h
		}},
		{"reordered", 3, chain.ReasonMissingSeq, func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head) {
			evs[2], evs[3] = evs[3], evs[2]
			return evs, h
		}},
		{"deleted event", 6, chain.ReasonMissingSeq, func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head) {
			return append(evs[:5], evs[6:]...), h
		}},
		{"deleted event, renumbered", 6, chain.ReasonPrevMismatch, func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head) {
			evs = append(evs[:5], evs[6:]...)
			for i := 5; i < len(evs); i++ {
				evs[i].Seq--
			}
			return evs, h
		}},
		{"duplicated event", 5, chain.ReasonDuplicateSeq, func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head) {
			out := append([]envelope.Envelope{}, evs[:5]...)
			out = append(out, evs[4])
			return append(out, evs[5:]...), h
		}},
		{"forged head hash", 10, chain.ReasonHeadMismatch, func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head) {
			h.LastHash = evs[8].Hash
			return evs, h
		}},
		{"forged head seq", 10, chain.ReasonHeadMismatch, func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head) {
			h.LastSeq = 9
			return evs, h
		}},
		{"missing head", 10, chain.ReasonHeadMismatch, func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head) {
			return evs, nil
		}},
		{"truncated tail", 9, chain.ReasonHeadMismatch, func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head) {
			return evs[:8], h
		}},
		{"event moved to another tenant", 3, chain.ReasonWrongTenant, func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head) {
			other, _ := validChain(t, "globex", 3)
			evs[2] = other[2]
			return evs, h
		}},
		{"event relabelled with this tenant", 3, chain.ReasonHashMismatch, func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head) {
			other, _ := validChain(t, "globex", 3)
			other[2].TenantID = "acme"
			other[2].PrevHash = evs[1].Hash
			evs[2] = other[2]
			return evs, h
		}},
		{"whole chain replayed from another tenant", 1, chain.ReasonWrongTenant, func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head) {
			other, oh := validChain(t, "globex", 10)
			return other, oh
		}},
		{"genesis replaced", 1, chain.ReasonPrevMismatch, func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head) {
			evs[0].PrevHash = chain.Genesis("globex")
			reseal(t, &evs[0])
			return evs, h
		}},
		{"malformed hash", 8, chain.ReasonMalformed, func(evs []envelope.Envelope, h *chain.Head) ([]envelope.Envelope, *chain.Head) {
			evs[7].Hash = "XYZ"
			return evs, h
		}},
	}
}

func TestNegativeCorpus(t *testing.T) {
	evs, head := validChain(t, "acme", 10)
	if err := chain.Verify("acme", evs, head); err != nil {
		t.Fatalf("valid chain: %v", err)
	}
	for _, c := range negativeCorpus(t) {
		t.Run(c.Name, func(t *testing.T) {
			h := *head
			bad, bh := c.Mutate(clone(evs), &h)
			err := chain.Verify("acme", bad, bh)
			checkBreak(t, err, c.Seq, c.Reason)
			if *update {
				writeNegative(t, c, bad, bh)
			}
		})
	}
}

func checkBreak(t *testing.T, err error, seq int64, reason chain.Reason) {
	t.Helper()
	var be *chain.BreakError
	if !errors.As(err, &be) {
		t.Fatalf("got %v, want a *BreakError", err)
	}
	if be.Seq != seq || be.Reason != reason {
		t.Errorf("got break at seq %d (%s), want seq %d (%s): %v", be.Seq, be.Reason, seq, reason, err)
	}
	if !errors.Is(err, chain.ErrBroken) {
		t.Errorf("errors.Is(err, ErrBroken) is false")
	}
}

func slug(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	return string(bytes.ReplaceAll(b, []byte("--"), []byte("-")))
}

func writeNegative(t *testing.T, c negCase, evs []envelope.Envelope, h *chain.Head) {
	dir := filepath.Join("testdata", "negative")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := chain.WriteExport(&buf, chain.Export{Events: evs, Head: h}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, slug(c.Name)+".jsonl"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestVerifierResume(t *testing.T) {
	evs, head := validChain(t, "acme", 10)
	v := chain.Resume("acme", evs[5].Seq, evs[5].Hash)
	for i := 6; i < 10; i++ {
		if err := v.Next(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Head(head); err != nil {
		t.Fatal(err)
	}
	if v.Verified() != 4 {
		t.Errorf("verified: got %d, want 4", v.Verified())
	}
	// A resumed verifier trusts the checkpoint; a full walk does not.
	bad := clone(evs)
	bad[2].Payload["total_cents"] = json.Number("1")
	v = chain.Resume("acme", evs[5].Seq, evs[5].Hash)
	for i := 6; i < 10; i++ {
		if err := v.Next(&bad[i]); err != nil {
			t.Fatal(err)
		}
	}
	checkBreak(t, chain.Verify("acme", bad, head), 3, chain.ReasonHashMismatch)
}

func TestExportRoundTrip(t *testing.T) {
	evs, head := validChain(t, "acme", 5)
	var buf bytes.Buffer
	if err := chain.WriteExport(&buf, chain.Export{Events: evs, Head: head}); err != nil {
		t.Fatal(err)
	}
	sum, err := chain.VerifyExport(&buf, "")
	if err != nil {
		t.Fatal(err)
	}
	if sum.Tenant != "acme" || sum.Events != 5 || sum.Head == nil {
		t.Fatalf("got tenant %q, %d events, head %v", sum.Tenant, sum.Events, sum.Head)
	}
}

// TestResumeFromABadCheckpoint: a checkpoint hash that is not a digest links
// to nothing; the first event breaks with prev_hash mismatch and the
// verifier reports the checkpoint as it was given.
func TestResumeFromABadCheckpoint(t *testing.T) {
	evs, _ := validChain(t, "acme", 3)
	for _, bad := range []string{"", "not-a-hash", strings.ToUpper(evs[0].Hash)} {
		v := chain.Resume("acme", 1, bad)
		if v.LastHash() != bad {
			t.Errorf("LastHash() = %q, want %q", v.LastHash(), bad)
		}
		checkBreak(t, v.Next(&evs[1]), 2, chain.ReasonPrevMismatch)
	}
	// A good checkpoint links.
	if err := chain.Resume("acme", 1, evs[0].Hash).Next(&evs[1]); err != nil {
		t.Fatal(err)
	}
}
