package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fourlanes/fourlanes/pkg/chain"
)

func runVerify(_ context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flags("verify [-tenant T] FILE", "verify", stderr)
	tenant := fs.String("tenant", "", "the tenant the chain must belong to (default: the first event's, or the head line's in an export without events)")
	if err := parse(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() != 1 {
		return 0, fmt.Errorf("%w: want one FILE (an exported chain, JSON Lines; - reads stdin)", errUsage)
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
	head := "no head line: the last event is not checked against a head"
	if sum.Head != nil {
		head = fmt.Sprintf("head last_seq %d matches", sum.Head.LastSeq)
	}
	fmt.Fprintf(stdout, "OK tenant %s: %d events verified from genesis; %s\n", sum.Tenant, sum.Events, head)
	return exitOK, nil
}
