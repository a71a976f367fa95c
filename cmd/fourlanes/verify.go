package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/checkpoint"
)

func runVerify(_ context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flags("verify [-tenant T] [-checkpoint FILE.checkpoint -key PUBLIC_KEY.pem] FILE", "verify", stderr)
	tenant := fs.String("tenant", "", "the tenant the chain must belong to (default: the first event's, or the head line's in an export without events)")
	cpFile := fs.String("checkpoint", "", "a signed checkpoint (from fourlanes export) the chain must extend")
	keyFile := fs.String("key", "", "the checkpoint signing key's public key, PEM or DER (aws kms get-public-key)")
	if err := parse(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() != 1 {
		return 0, fmt.Errorf("%w: want one FILE (an exported chain, JSON Lines; - reads stdin)", errUsage)
	}
	if (*cpFile == "") != (*keyFile == "") {
		return 0, fmt.Errorf("%w: -checkpoint and -key go together", errUsage)
	}
	var cp *checkpoint.Checkpoint
	if *cpFile != "" {
		if fs.Arg(0) == "-" {
			return 0, fmt.Errorf("%w: -checkpoint reads FILE twice; pass a file, not -", errUsage)
		}
		c, err := openCheckpoint(*cpFile, *keyFile)
		if err != nil {
			fmt.Fprintf(stdout, "BROKEN checkpoint %s: %v\n", *cpFile, err)
			return exitFinding, nil
		}
		cp = &c
		if *tenant == "" {
			*tenant = c.Tenant
		}
	}
	var r io.Reader = os.Stdin
	name := fs.Arg(0)
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		r = f
	}
	sum, err := chain.VerifyExport(bufio.NewReaderSize(r, 1<<20), *tenant)
	if err != nil {
		var be *chain.BreakError
		if errors.As(err, &be) {
			fmt.Fprintf(stdout, "BROKEN tenant %s at %s: %s\n", be.Tenant, be.Where(), be.Reason)
			if be.Expected != "" || be.Got != "" {
				fmt.Fprintf(stdout, "  expected %s\n  got      %s\n", be.Expected, be.Got)
			}
			return exitFinding, nil
		}
		if errors.Is(err, chain.ErrEmptyExport) {
			return 0, fmt.Errorf("%s: empty export and no -tenant", name)
		}
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	if cp != nil {
		brk, err := checkCheckpoint(name, *cp, sum)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		if brk != nil {
			fmt.Fprintf(stdout, "BROKEN tenant %s at %s: %s\n  expected %s\n  got      %s\n", brk.Tenant, brk.Where(), brk.Reason, brk.Expected, brk.Got)
			return exitFinding, nil
		}
	}
	head := "no head line: the last event is not checked against a head"
	if sum.Head != nil {
		head = fmt.Sprintf("head last_seq %d matches", sum.Head.LastSeq)
	}
	fmt.Fprintf(stdout, "OK tenant %s: %d events verified from genesis; %s\n", sum.Tenant, sum.Events, head)
	if cp != nil {
		fmt.Fprintf(stdout, "OK extends the checkpoint signed by %s at %s: seq %d hash %s\n", cp.Log, cp.Time.Format("2006-01-02T15:04:05Z"), cp.Seq, cp.Hash)
	}
	return exitOK, nil
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
