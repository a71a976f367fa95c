package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flags("export -tenant T [-o FILE] [-table NAME | -local]", "export", stderr)
	tenant := fs.String("tenant", "", "the tenant whose chain to export (required)")
	out := fs.String("o", "-", "the file to write (JSON Lines); - writes stdout")
	table := fs.String("table", os.Getenv(keys.EnvEventsTable), "the events table (default $"+keys.EnvEventsTable+"; the stack output EventsTableName)")
	local := fs.Bool("local", false, "export from the twin `fourlanes dev` is running")
	if err := parse(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *tenant == "" {
		return 0, fmt.Errorf("%w: -tenant is required", errUsage)
	}
	store, err := openStore(ctx, *table, *local)
	if err != nil {
		return 0, err
	}

	// Write to a temporary file beside the target and rename it into place
	// only when the export is whole, so a failed export never leaves a
	// truncated file that verifies as "head mismatch".
	w, commit, abort, err := output(*out, stdout)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	res, err := store.Export(ctx, *tenant, bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		abort()
		return 0, err
	}
	if res.Head == nil {
		abort()
		fmt.Fprintf(stderr, "tenant %s has no events (no head row): nothing exported\n", *tenant)
		return exitOK, nil
	}
	if err := commit(); err != nil {
		return 0, err
	}
	fmt.Fprintf(stderr, "exported tenant %s: %d events, head last_seq %d, to %s\n", *tenant, res.Events, res.Head.LastSeq, *out)
	return exitOK, nil
}

// output opens where an export goes: stdout for "-", else a temporary file
// that commit renames to name.
func output(name string, stdout io.Writer) (w io.Writer, commit func() error, abort func(), err error) {
	if name == "-" {
		return stdout, func() error { return nil }, func() {}, nil
	}
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return nil, nil, nil, err
	}
	commit = func() error {
		if err := f.Close(); err != nil {
			os.Remove(f.Name())
			return err
		}
		return os.Rename(f.Name(), name)
	}
	abort = func() {
		f.Close()
		os.Remove(f.Name())
	}
	return f, commit, abort, nil
}
