package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/checkpoint"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

const verifySynopsis = "[-tenant T] [-checkpoint FILE.checkpoint -origin LOG (-key PUBLIC_KEY.pem | -keys KEYS.pem)] [-json] FILE"

func runVerify(_ context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("verify", verifySynopsis, stderr)
	tenant := fs.String("tenant", "", "the tenant the chain must belong to (default: the first event's, or the head line's in an export without events)")
	cpFile := fs.String("checkpoint", "", "a signed checkpoint (from fourlanes export) the chain must extend")
	origin := fs.String("origin", "", "the log the checkpoint must be signed for, fourlanes/<stack> (reconcile's "+keys.EnvCheckpointLog+"); required with -checkpoint: a note for another log is refused")
	keyFile := fs.String("key", "", "the trusted public key of the checkpoint signing key, PEM or DER (aws kms get-public-key); -checkpoint needs it or -keys")
	keysFile := fs.String("keys", "", "a PEM file of trusted public keys (one PUBLIC KEY block each, e.g. the current and the previous signing key); instead of -key")
	asJSON := fs.Bool("json", false, `print one JSON object instead of text (same exit status), with members
  verdict     "OK" or "BROKEN"
  tenant      the tenant verified
  events      events verified from genesis (before the break, when broken)
  last_seq    the last event verified
  last_hash   its hash (the genesis hash before any event); only when the chain holds
  break       when broken: {"seq", "line" (a line whose seq cannot be read), "reason", "expected", "got"}
  checkpoint  when -checkpoint was given: {"file", "log", "tenant", "seq", "hash", "time", "verdict", "error" (it could not be opened)}`)
	if err := Parse(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() != 1 {
		return 0, fmt.Errorf("%w: want one FILE (an exported chain, JSON Lines; - reads stdin)", ErrUsage)
	}
	switch {
	case *cpFile == "" && (*keyFile != "" || *keysFile != "" || *origin != ""):
		return 0, fmt.Errorf("%w: -origin, -key and -keys check a signed checkpoint: pass -checkpoint FILE.checkpoint", ErrUsage)
	case *cpFile != "" && *origin == "":
		return 0, fmt.Errorf("%w: -checkpoint needs -origin, the log it must be signed for (fourlanes/<stack>); the note's own name is not evidence", ErrUsage)
	case *cpFile != "" && (*keyFile == "") == (*keysFile == ""):
		return 0, fmt.Errorf("%w: -checkpoint needs the trusted key: -key PUBLIC_KEY.pem or -keys KEYS.pem (one of them)", ErrUsage)
	}
	name := fs.Arg(0)
	if *cpFile != "" && name == "-" {
		return 0, fmt.Errorf("%w: -checkpoint reads FILE twice; pass a file, not -", ErrUsage)
	}
	var trusted []*checkpoint.PublicKey
	if *cpFile != "" {
		var err error
		if trusted, err = readTrustedKeys(*keyFile, *keysFile); err != nil {
			return 0, err
		}
	}
	v, err := verifyFile(name, *tenant, *cpFile, *origin, trusted)
	if err != nil {
		return 0, err
	}
	if *asJSON {
		b, err := json.Marshal(v)
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		v.writeText(stdout)
	}
	if v.Verdict != verdictOK {
		return ExitFinding, nil
	}
	return ExitOK, nil
}

// Verdicts of verify.
const (
	verdictOK     = "OK"
	verdictBroken = "BROKEN"
)

// verdict is what verify found, printed as text or, with -json, as is:
// its JSON members are the -json flag's documented output.
type verdict struct {
	Verdict    string             `json:"verdict"`
	Tenant     string             `json:"tenant"`
	Events     int64              `json:"events"`
	LastSeq    int64              `json:"last_seq"`
	LastHash   string             `json:"last_hash,omitempty"`
	HeadLine   bool               `json:"-"` // the export ended with a head line, which matched
	Break      *verdictBreak      `json:"break,omitempty"`
	Checkpoint *verdictCheckpoint `json:"checkpoint,omitempty"`
}

// verdictBreak is a chain.BreakError in the verdict.
type verdictBreak struct {
	Seq      int64  `json:"seq"`
	Line     int    `json:"line,omitempty"`
	Reason   string `json:"reason"`
	Expected string `json:"expected,omitempty"`
	Got      string `json:"got,omitempty"`
}

// verdictCheckpoint is the signed checkpoint checked; Error says why it
// could not be opened (a bad signature, another key, an unreadable file).
type verdictCheckpoint struct {
	File    string `json:"file"`
	Log     string `json:"log,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
	Seq     int64  `json:"seq"`
	Hash    string `json:"hash,omitempty"`
	Time    string `json:"time,omitempty"`
	Verdict string `json:"verdict"`
	Error   string `json:"error,omitempty"`
}

// verifyFile verifies the export in name ("-": stdin) and, if cpFile is
// set, that it extends that checkpoint, signed for origin by one of the
// trusted keys. A broken chain or checkpoint is a verdict; the error is for
// anything else.
func verifyFile(name, tenant, cpFile, origin string, trusted []*checkpoint.PublicKey) (*verdict, error) {
	v := &verdict{Verdict: verdictOK, Tenant: tenant}
	var cp *checkpoint.Checkpoint
	if cpFile != "" {
		v.Checkpoint = &verdictCheckpoint{File: cpFile, Verdict: verdictOK}
		c, err := openCheckpoint(cpFile, origin, trusted)
		if err != nil {
			v.Verdict, v.Checkpoint.Verdict, v.Checkpoint.Error = verdictBroken, verdictBroken, err.Error()
			return v, nil
		}
		cp = &c
		v.Checkpoint.Log, v.Checkpoint.Tenant, v.Checkpoint.Seq, v.Checkpoint.Hash = c.Log, c.Tenant, c.Seq, c.Hash
		v.Checkpoint.Time = c.Time.Format("2006-01-02T15:04:05Z")
		if tenant == "" {
			tenant = c.Tenant
		}
	}
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	sum, err := chain.VerifyExport(bufio.NewReaderSize(r, 1<<20), tenant)
	v.Tenant, v.Events, v.LastSeq, v.HeadLine = sum.Tenant, sum.Events, sum.Events, sum.Head != nil
	if err != nil {
		var be *chain.BreakError
		if errors.As(err, &be) {
			v.Tenant = be.Tenant
			v.broken(be)
			return v, nil
		}
		if errors.Is(err, chain.ErrEmptyExport) {
			return nil, fmt.Errorf("%s: empty export and no -tenant", name)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// Verified from genesis, so seqs run 1..Events, and the head line,
	// which an export with events must have (SPEC.md §6), matched.
	v.LastHash = chain.Genesis(sum.Tenant)
	if sum.Head != nil {
		v.LastHash = sum.Head.LastHash
	}
	if cp != nil {
		brk, err := checkCheckpoint(name, *cp, sum)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if brk != nil {
			v.Checkpoint.Verdict = verdictBroken
			v.broken(brk)
		}
	}
	return v, nil
}

func (v *verdict) broken(be *chain.BreakError) {
	v.Verdict, v.LastHash = verdictBroken, ""
	v.Break = &verdictBreak{Seq: be.Seq, Line: be.Line, Reason: string(be.Reason), Expected: be.Expected, Got: be.Got}
}

// writeText prints v as verify always has, without -json.
func (v *verdict) writeText(w io.Writer) {
	if c := v.Checkpoint; c != nil && c.Error != "" {
		fmt.Fprintf(w, "BROKEN checkpoint %s: %s\n", c.File, c.Error)
		return
	}
	if b := v.Break; b != nil {
		be := chain.BreakError{Tenant: v.Tenant, Seq: b.Seq, Line: b.Line}
		fmt.Fprintf(w, "BROKEN tenant %s at %s: %s\n", v.Tenant, be.Where(), b.Reason)
		if b.Expected != "" || b.Got != "" {
			fmt.Fprintf(w, "  expected %s\n  got      %s\n", b.Expected, b.Got)
		}
		return
	}
	head := "no head line: the last event is not checked against a head"
	if v.HeadLine {
		head = fmt.Sprintf("head last_seq %d matches", v.LastSeq)
	}
	fmt.Fprintf(w, "OK tenant %s: %d events verified from genesis; %s\n", v.Tenant, v.Events, head)
	if c := v.Checkpoint; c != nil {
		fmt.Fprintf(w, "OK extends the checkpoint signed by %s at %s: seq %d hash %s\n", c.Log, c.Time, c.Seq, c.Hash)
	}
}

// readTrustedKeys reads the trusted public keys: keyFile (PEM or DER, one
// key) or keysFile (PEM, one PUBLIC KEY block per key).
func readTrustedKeys(keyFile, keysFile string) ([]*checkpoint.PublicKey, error) {
	if keyFile != "" {
		kb, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, fmt.Errorf("-key: %w", err)
		}
		pub, err := checkpoint.ParsePublicKey(kb)
		if err != nil {
			return nil, fmt.Errorf("-key %s: %w", keyFile, err)
		}
		return []*checkpoint.PublicKey{pub}, nil
	}
	b, err := os.ReadFile(keysFile)
	if err != nil {
		return nil, fmt.Errorf("-keys: %w", err)
	}
	var out []*checkpoint.PublicKey
	for n := 1; ; n++ {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			break
		}
		if blk.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("-keys %s: PEM block %d is %q, want PUBLIC KEY", keysFile, n, blk.Type)
		}
		pub, err := checkpoint.ParsePublicKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("-keys %s: key %d: %w", keysFile, n, err)
		}
		out = append(out, pub)
	}
	if len(bytes.TrimSpace(b)) > 0 {
		return nil, fmt.Errorf("-keys %s: text after the last PEM block; want PUBLIC KEY blocks only", keysFile)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-keys %s: no PUBLIC KEY block", keysFile)
	}
	return out, nil
}

// openCheckpoint reads a signed checkpoint and verifies that it is signed
// for origin by one of the trusted keys. The note names its own log; that
// name is read only to say why a note for another log is refused.
func openCheckpoint(cpFile, origin string, trusted []*checkpoint.PublicKey) (checkpoint.Checkpoint, error) {
	note, err := os.ReadFile(cpFile)
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	log, err := checkpoint.LogOf(note)
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	if log != origin {
		return checkpoint.Checkpoint{}, fmt.Errorf("%w: the note is signed for log %q, not %q (-origin): another stack's checkpoint, or a forgery", checkpoint.ErrInvalid, log, origin)
	}
	var errs []error
	for _, pub := range trusted {
		c, err := checkpoint.Open(note, origin, pub)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return checkpoint.Checkpoint{}, fmt.Errorf("%w: not signed for %s by a trusted key (%d given with -key/-keys): %v", checkpoint.ErrInvalid, origin, len(trusted), errors.Join(errs...))
}
