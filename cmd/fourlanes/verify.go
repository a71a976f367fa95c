package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fourlanes/fourlanes/pkg/chain"
)

func runVerify(_ context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flags("verify [-tenant T] FILE", "verify", stderr)
	tenant := fs.String("tenant", "", "the tenant the chain must belong to (default: the export's own, from its head line or first event)")
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
	x, err := chain.ReadExport(r)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	t := *tenant
	if t == "" {
		t = x.Tenant
	}
	if t == "" {
		return 0, fmt.Errorf("%s: empty export and no -tenant", name)
	}
	if err := chain.Verify(t, x.Events, x.Head); err != nil {
		var be *chain.BreakError
		if errors.As(err, &be) {
			fmt.Fprintf(stdout, "BROKEN tenant %s at seq %d: %s\n", be.Tenant, be.Seq, be.Reason)
			if be.Expected != "" || be.Got != "" {
				fmt.Fprintf(stdout, "  expected %s\n  got      %s\n", be.Expected, be.Got)
			}
			return exitFinding, nil
		}
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	head := "no head line: the last event is not checked against a head"
	if x.Head != nil {
		head = fmt.Sprintf("head last_seq %d matches", x.Head.LastSeq)
	}
	fmt.Fprintf(stdout, "OK tenant %s: %d events verified from genesis; %s\n", t, len(x.Events), head)
	return exitOK, nil
}
