package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/checkpoint"
	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// exportOf writes events as an export file with its head line.
func exportOf(t *testing.T, evs []envelope.Envelope) string {
	t.Helper()
	var b bytes.Buffer
	w := chain.NewExportWriter(&b)
	for i := range evs {
		if err := w.Event(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if len(evs) > 0 {
		last := evs[len(evs)-1]
		if err := w.Head(&chain.Head{TenantID: last.TenantID, LastSeq: last.Seq, LastHash: last.Hash}); err != nil {
			t.Fatal(err)
		}
	}
	f := filepath.Join(t.TempDir(), "export.jsonl")
	if err := os.WriteFile(f, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// sealed returns n linked events of tenant acme; edit, if set, changes
// event 'at' before sealing, so every later hash is recomputed: a
// consistent rewrite.
func sealed(t *testing.T, n int, at int64, edit string) []envelope.Envelope {
	t.Helper()
	var evs []envelope.Envelope
	prev := chain.Genesis("acme")
	for i := int64(1); i <= int64(n); i++ {
		e := envelope.Envelope{ID: "0190a8e4-7c1d-7b3a-8f4e-00000000000" + string(rune('0'+i)), Type: "order.placed",
			TenantID: "acme", OccurredAt: "2026-11-30T12:00:00Z", SchemaVersion: 1,
			Payload: map[string]any{"order_id": "o-" + string(rune('0'+i))}, Seq: i, PrevHash: prev}
		if i == at {
			e.Payload["order_id"] = edit
		}
		if err := chain.Seal(&e); err != nil {
			t.Fatal(err)
		}
		prev = e.Hash
		evs = append(evs, e)
	}
	return evs
}

// TestVerifyCheckpoint: `fourlanes verify -checkpoint -key` accepts an export
// that extends the signed checkpoint and refuses, offline, a consistent
// rewrite before it, a truncation below it, another tenant's checkpoint and
// a checkpoint signed by another key.
func TestVerifyCheckpoint(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	signer := checkpoint.LocalSigner{Key: key}
	dir := t.TempDir()
	pemFile := filepath.Join(dir, "key.pem")
	os.WriteFile(pemFile, signer.Public().PEM(), 0o644)
	honest := sealed(t, 5, 0, "")
	sign := func(s checkpoint.DigestSigner, pub *checkpoint.PublicKey, tenant string, seq int64, hash string) string {
		note, err := checkpoint.Sign(context.Background(), checkpoint.Checkpoint{Log: "fourlanes/test", Tenant: tenant, Seq: seq, Hash: hash,
			Time: time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)}, pub, s)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "cp.note")
		os.WriteFile(f, note, 0o644)
		return f
	}
	cp3 := sign(signer, signer.Public(), "acme", 3, honest[2].Hash)

	if code, out, errOut := runCLI(t, "verify", "-checkpoint", cp3, "-origin", "fourlanes/test", "-key", pemFile, exportOf(t, honest)); code != ExitOK ||
		!strings.Contains(out, "OK extends the checkpoint signed by fourlanes/test") {
		t.Fatalf("honest export: exit %d\n%s%s", code, out, errOut)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	os2 := checkpoint.LocalSigner{Key: other}
	for _, c := range []struct {
		name, cp, file, want string
	}{
		{"consistent rewrite at 2", cp3, exportOf(t, sealed(t, 5, 2, "forged")), "BROKEN tenant acme at seq 3: checkpoint mismatch"},
		{"consistent rewrite at 3", cp3, exportOf(t, sealed(t, 5, 3, "forged")), "BROKEN tenant acme at seq 3: checkpoint mismatch"},
		{"truncated below", cp3, exportOf(t, honest[:2]), "BROKEN tenant acme at seq 3: truncated below checkpoint"},
		{"another tenant's checkpoint", sign(signer, signer.Public(), "globex", 3, honest[2].Hash), exportOf(t, honest), "BROKEN"},
		{"signed by another key", sign(os2, os2.Public(), "acme", 3, honest[2].Hash), exportOf(t, honest), "BROKEN checkpoint"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "verify", "-checkpoint", c.cp, "-origin", "fourlanes/test", "-key", pemFile, c.file)
			if code != ExitFinding || !strings.Contains(out, c.want) {
				t.Errorf("exit %d, want %d and %q\n%s%s", code, ExitFinding, c.want, out, errOut)
			}
		})
	}
	// The rewritten export is consistent: without the checkpoint it verifies.
	if code, out, _ := runCLI(t, "verify", exportOf(t, sealed(t, 5, 2, "forged"))); code != ExitOK {
		t.Errorf("rewritten export without -checkpoint: exit %d %s, want OK (why the checkpoint is needed)", code, out)
	}
	for _, args := range [][]string{
		{"-checkpoint", cp3, "-origin", "fourlanes/test"},                                    // no key
		{"-checkpoint", cp3, "-key", pemFile},                                                // no origin: the note's own name is not evidence
		{"-checkpoint", cp3, "-origin", "fourlanes/test", "-key", pemFile, "-keys", pemFile}, // both
		{"-key", pemFile},  // a key without a checkpoint
		{"-origin", "x/y"}, // an origin without one
	} {
		if code, _, errOut := runCLI(t, append(append([]string{"verify"}, args...), exportOf(t, honest))...); code != ExitUsage {
			t.Errorf("verify %v: exit %d %s, want usage", args, code, errOut)
		}
	}
}

// TestVerifyCheckpointPinsTrust: the note must be signed for the log -origin
// names, by a key the caller trusts (-key, or one of -keys): a note and key
// handed over together, or a genuine note of another stack, prove nothing.
func TestVerifyCheckpointPinsTrust(t *testing.T) {
	dir := t.TempDir()
	signer := func() checkpoint.LocalSigner {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		return checkpoint.LocalSigner{Key: k}
	}
	current, previous, mallory := signer(), signer(), signer()
	write := func(name string, b []byte) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	honest := sealed(t, 5, 0, "")
	export := exportOf(t, honest)
	n := 0
	sign := func(s checkpoint.LocalSigner, log string) string {
		note, err := checkpoint.Sign(context.Background(), checkpoint.Checkpoint{Log: log, Tenant: "acme", Seq: 3, Hash: honest[2].Hash,
			Time: time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)}, s.Public(), s)
		if err != nil {
			t.Fatal(err)
		}
		n++
		return write(fmt.Sprintf("cp-%d.note", n), note)
	}
	keys := write("trusted.pem", append(current.Public().PEM(), previous.Public().PEM()...))
	byPrevious := sign(previous, "fourlanes/prod")
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"signed by a trusted key of -keys", []string{"-checkpoint", byPrevious, "-origin", "fourlanes/prod", "-keys", keys}, ExitOK, "OK extends the checkpoint signed by fourlanes/prod"},
		{"another stack's genuine note", []string{"-checkpoint", sign(current, "fourlanes/staging"), "-origin", "fourlanes/prod", "-keys", keys}, ExitFinding,
			`BROKEN checkpoint`},
		{"a forged note with its own key", []string{"-checkpoint", sign(mallory, "fourlanes/prod"), "-origin", "fourlanes/prod", "-keys", keys}, ExitFinding,
			"not signed for fourlanes/prod by a trusted key (2 given"},
		{"the forger's key passed as -key", []string{"-checkpoint", sign(mallory, "fourlanes/prod"), "-origin", "fourlanes/prod", "-key", write("mallory.pem", mallory.Public().PEM())}, ExitOK,
			"OK"}, // what -key trusts is the caller's choice; the origin still binds the note
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append(append([]string{"verify"}, c.args...), export)...)
			if code != c.code || !strings.Contains(out, c.want) {
				t.Errorf("exit %d, want %d and %q\n%s%s", code, c.code, c.want, out, errOut)
			}
		})
	}
	code, out, _ := runCLI(t, "verify", "-checkpoint", sign(current, "fourlanes/staging"), "-origin", "fourlanes/prod", "-keys", keys, export)
	if code != ExitFinding || !strings.Contains(out, `signed for log "fourlanes/staging", not "fourlanes/prod" (-origin)`) {
		t.Errorf("another stack's note: exit %d %s, want both logs named", code, out)
	}
	for name, body := range map[string]string{"empty": "", "not PEM": "hello", "a private key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"} {
		if code, _, errOut := runCLI(t, "verify", "-checkpoint", byPrevious, "-origin", "fourlanes/prod", "-keys", write(strings.ReplaceAll(name, " ", "-")+".pem", []byte(body)), export); code == ExitOK || !strings.Contains(errOut, "-keys") {
			t.Errorf("-keys file %s: exit %d %s, want an error naming -keys", name, code, errOut)
		}
	}
}
