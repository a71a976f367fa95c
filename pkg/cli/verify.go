package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/checkpoint"
)

const verifySynopsis = "[-tenant T] [-checkpoint FILE.checkpoint -key PUBLIC_KEY.pem] [-json] FILE"

func runVerify(_ context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("verify", verifySynopsis, stderr)
	tenant := fs.String("tenant", "", "the tenant the chain must belong to (default: the first event's, or the head line's in an export without events)")
	cpFile := fs.String("checkpoint", "", "a signed checkpoint (from fourlanes export) the chain must extend")
	keyFile := fs.String("key", "", "the checkpoint signing key's public key, PEM or DER (aws kms get-public-key)")
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
	if (*cpFile == "") != (*keyFile == "") {
		return 0, fmt.Errorf("%w: -checkpoint and -key go together", ErrUsage)
	}
	name := fs.Arg(0)
	if *cpFile != "" && name == "-" {
		return 0, fmt.Errorf("%w: -checkpoint reads FILE twice; pass a file, not -", ErrUsage)
	}
	v, err := verifyFile(name, *tenant, *cpFile, *keyFile)
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
// set, that it extends that checkpoint signed by keyFile's key. A broken
// chain or checkpoint is a verdict; the error is for anything else.
func verifyFile(name, tenant, cpFile, keyFile string) (*verdict, error) {
	v := &verdict{Verdict: verdictOK, Tenant: tenant}
	var cp *checkpoint.Checkpoint
	if cpFile != "" {
		v.Checkpoint = &verdictCheckpoint{File: cpFile, Verdict: verdictOK}
		c, err := openCheckpoint(cpFile, keyFile)
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

// openCheckpoint reads and verifies a signed checkpoint with the public key.
func openCheckpoint(cpFile, keyFile string) (checkpoint.Checkpoint, error) {
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	pub, err := checkpoint.ParsePublicKey(kb)
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	note, err := os.ReadFile(cpFile)
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	log, err := checkpoint.LogOf(note)
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	return checkpoint.Open(note, log, pub)
}
