package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/checkpoint"
	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// verifyJSON runs `fourlanes verify -json args…` and decodes its stdout,
// which must be exactly one JSON object, into a generic map so the test
// sees the members as a reader of the output would.
func verifyJSON(t *testing.T, args ...string) (int, map[string]any) {
	t.Helper()
	code, out, errOut := runCLI(t, append([]string{"verify", "-json"}, args...)...)
	dec := json.NewDecoder(strings.NewReader(out))
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("verify -json %v: stdout %q is not a JSON object: %v (stderr %q)", args, out, err, errOut)
	}
	if dec.More() {
		t.Fatalf("verify -json %v: more than one JSON value on stdout: %q", args, out)
	}
	return code, v
}

// TestVerifyJSON: -json prints one verdict object with the documented
// members, for an intact chain, a broken one (from pkg/chain's negative
// corpus, and a tampered export) and a checked checkpoint, with the exit
// status of the text output.
func TestVerifyJSON(t *testing.T) {
	x := chainOf(t, "t1", 3)
	intact := writeExport(t, x)
	noHead := x
	noHead.Head = nil
	tampered := chainOf(t, "t1", 3)
	tampered.Events[1].Payload["order_id"] = "forged"

	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	signer := checkpoint.LocalSigner{Key: key}
	pemFile := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(pemFile, signer.Public().PEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	signAt := func(seq int64, hash string) string {
		note, err := checkpoint.Sign(context.Background(), checkpoint.Checkpoint{Log: "fourlanes/test", Tenant: "t1", Seq: seq, Hash: hash,
			Time: time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)}, signer.Public(), signer)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "cp.note")
		if err := os.WriteFile(f, note, 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	cp2 := signAt(2, x.Events[1].Hash)
	cpForged := signAt(2, strings.Repeat("ab", 32))
	garbage := filepath.Join(t.TempDir(), "garbage.note")
	if err := os.WriteFile(garbage, []byte("not a signed note\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		args []string
		code int
		want map[string]any
	}{
		{"intact", []string{intact}, ExitOK, map[string]any{"verdict": "OK", "tenant": "t1", "events": 3.0,
			"last_seq": 3.0, "last_hash": x.Head.LastHash}},
		{"no head line", []string{writeExport(t, noHead)}, ExitFinding, map[string]any{"verdict": "BROKEN", "tenant": "t1", "events": 3.0,
			"last_seq": 3.0, "break": map[string]any{"seq": 3.0, "reason": "head mismatch", "expected": "head at seq 3", "got": "no head row"}}},
		{"no events", []string{"-tenant", "t9", writeExport(t, chain.Export{})}, ExitOK, map[string]any{"verdict": "OK", "tenant": "t9", "events": 0.0,
			"last_seq": 0.0, "last_hash": chain.Genesis("t9")}},
		{"tampered", []string{writeExport(t, tampered)}, ExitFinding, map[string]any{"verdict": "BROKEN", "tenant": "t1", "events": 1.0,
			"last_seq": 1.0, "break": map[string]any{"seq": 2.0, "reason": "hash mismatch",
				"expected": rehash(t, tampered.Events[1]), "got": x.Events[1].Hash}}},
		// Corpus: the second event's type edited; a later line not an object.
		{"corpus edited-type", []string{filepath.Join("..", "..", "pkg", "chain", "testdata", "negative", "edited-type.jsonl")}, ExitFinding,
			map[string]any{"verdict": "BROKEN", "tenant": "acme", "events": 1.0, "last_seq": 1.0,
				"break": map[string]any{"seq": 2.0, "reason": "hash mismatch",
					"expected": "23eaf92f6d3165eadf88a9f7135c121590abb9802401a3183bb3d8a4e028d5e1",
					"got":      "5d86539d15dda5eac80424c071169623c76d61ecbcd7a2e52ff326778dcfe750"}}},
		{"corpus line-not-an-object", []string{filepath.Join("..", "..", "pkg", "chain", "testdata", "negative", "line-not-an-object.jsonl")}, ExitFinding,
			map[string]any{"verdict": "BROKEN", "tenant": "acme", "events": 3.0, "last_seq": 3.0,
				"break": map[string]any{"seq": 0.0, "line": 4.0, "reason": "malformed event",
					"expected": "an event line with a readable seq, or the head line last",
					"got":      "not a JSON object: byte 0: the line is not a JSON object"}}},
		{"checkpoint extended", []string{"-checkpoint", cp2, "-origin", "fourlanes/test", "-key", pemFile, intact}, ExitOK, map[string]any{"verdict": "OK", "tenant": "t1",
			"events": 3.0, "last_seq": 3.0, "last_hash": x.Head.LastHash,
			"checkpoint": map[string]any{"file": cp2, "log": "fourlanes/test", "tenant": "t1", "seq": 2.0, "hash": x.Events[1].Hash,
				"time": "2026-11-30T23:00:00Z", "verdict": "OK"}}},
		{"checkpoint not extended", []string{"-checkpoint", cpForged, "-origin", "fourlanes/test", "-key", pemFile, intact}, ExitFinding, map[string]any{"verdict": "BROKEN",
			"tenant": "t1", "events": 3.0, "last_seq": 3.0,
			"break": map[string]any{"seq": 2.0, "reason": "checkpoint mismatch",
				"expected": "hash " + strings.Repeat("ab", 32) + " (signed at 2026-11-30T23:00:00Z)", "got": "hash " + x.Events[1].Hash},
			"checkpoint": map[string]any{"file": cpForged, "log": "fourlanes/test", "tenant": "t1", "seq": 2.0, "hash": strings.Repeat("ab", 32),
				"time": "2026-11-30T23:00:00Z", "verdict": "BROKEN"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, got := verifyJSON(t, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("verdict (-want +got):\n%s", d)
			}
		})
	}

	// A checkpoint that cannot be opened is a BROKEN verdict naming why.
	code, got := verifyJSON(t, "-checkpoint", garbage, "-origin", "fourlanes/test", "-key", pemFile, intact)
	cpv, _ := got["checkpoint"].(map[string]any)
	if code != ExitFinding || got["verdict"] != "BROKEN" || cpv["verdict"] != "BROKEN" || cpv["file"] != garbage || cpv["error"] == "" || cpv["error"] == nil {
		t.Errorf("unopenable checkpoint: exit %d, %v; want exit %d, BROKEN with the checkpoint's error", code, got, ExitFinding)
	}

	// An error is not a verdict: exit 1, nothing on stdout.
	if code, out, errOut := runCLI(t, "verify", "-json", filepath.Join(t.TempDir(), "absent.jsonl")); code != ExitError || out != "" {
		t.Errorf("absent file: exit %d, stdout %q, stderr %q; want exit %d and no stdout", code, out, errOut, ExitError)
	}
}

// TestVerifyTextUnchanged: without -json, verify prints the text lines it
// always has (the exact bytes, for scripts that read them).
func TestVerifyTextUnchanged(t *testing.T) {
	x := chainOf(t, "t1", 2)
	tampered := chainOf(t, "t1", 2)
	tampered.Events[1].Payload["order_id"] = "forged"
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"intact", []string{writeExport(t, x)}, ExitOK, "OK tenant t1: 2 events verified from genesis; head last_seq 2 matches\n"},
		{"no events, no head line", []string{"-tenant", "t9", writeExport(t, chain.Export{})}, ExitOK,
			"OK tenant t9: 0 events verified from genesis; no head line: the last event is not checked against a head\n"},
		{"tampered", []string{writeExport(t, tampered)}, ExitFinding,
			"BROKEN tenant t1 at seq 2: hash mismatch\n  expected " + rehash(t, tampered.Events[1]) + "\n  got      " + x.Events[1].Hash + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append([]string{"verify"}, c.args...)...)
			if code != c.code || out != c.want {
				t.Errorf("exit %d, stdout %q (stderr %q); want exit %d, %q", code, out, errOut, c.code, c.want)
			}
		})
	}
}

// rehash is e's hash recomputed from its (tampered) content: what the chain
// expects where the stored hash no longer matches.
func rehash(t *testing.T, e envelope.Envelope) string {
	t.Helper()
	h, err := chain.Hash(&e)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
