package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("export", "export -tenant T [-o FILE] [-table NAME | -stack NAME | -local] [-checkpoint-bucket B] [-checkpoint-out FILE.checkpoint]", stderr)
	tenant := fs.String("tenant", "", "the tenant whose chain to export, or one chain shard's (<tenant>~<k>) (required)")
	out := fs.String("o", "-", "the file to write (JSON Lines); - writes stdout")
	table := fs.String("table", os.Getenv(keys.EnvEventsTable), "the events table (default $"+keys.EnvEventsTable+"; the stack output EventsTableName)")
	local := fs.Bool("local", false, "export from the twin `fourlanes dev` is running")
	stack := fs.String("stack", "", stackHelp+" (EventsTableName, and CheckpointBucketName if it has one)")
	cpBucket := fs.String("checkpoint-bucket", os.Getenv(keys.EnvCheckpointBucket), "the bucket of signed checkpoints (default $"+keys.EnvCheckpointBucket+"; the stack output CheckpointBucketName; -local: the twin's)")
	cpOut := fs.String("checkpoint-out", "", "where to write the newest signed checkpoint the export reaches (default FILE.checkpoint; none for stdout)")
	if err := Parse(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	if *tenant == "" {
		return 0, fmt.Errorf("%w: -tenant is required", ErrUsage)
	}
	if err := tenancy.CheckChain(*tenant); err != nil {
		return 0, fmt.Errorf("%w: -tenant: %v", ErrUsage, err)
	}
	so, err := openStack(ctx, fs, *stack, *local)
	if err != nil {
		return 0, err
	}
	if err := so.fill("table", table, keys.OutputEventsTable); err != nil {
		return 0, err
	}
	so.fillOptional("checkpoint-bucket", cpBucket, keys.OutputCheckpointBucket)
	store, err := openStore(ctx, eventstore.Config{}, *table, *local) // reading needs no catalog
	if err != nil {
		return 0, err
	}

	// An export is one chain (fourlanes verify checks one chain); a tenant
	// with chain shards has more, each exported on its own. Finding them
	// needs dynamodb:BatchGetItem, which a role granted before chain shards
	// may lack: then the export still runs, and says what it could not check.
	var others []string
	chains, lookupErr := store.ChainsOf(ctx, *tenant)
	if lookupErr == nil {
		others = chains[1:]
	}

	// Write to a temporary file beside the target and rename it into place
	// only when the export is whole, so a failed export never leaves a
	// truncated file that verifies as "head mismatch".
	w, commit, abort, err := output(*out, stdout)
	if err != nil {
		return 0, err
	}
	warnShards := func() {
		if lookupErr != nil {
			fmt.Fprintf(stderr, "WARNING: could not look for tenant %s's other chains (chain shards): %v; "+
				"if it has any, export each with -tenant <tenant>~<k>\n", *tenant, lookupErr)
		}
		if len(others) > 0 {
			fmt.Fprintf(stderr, "WARNING: tenant %s has %d more chains (chain shards): %s; export each with -tenant <chain>\n",
				*tenant, len(others), strings.Join(others, " "))
		}
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
		warnShards()
		return ExitOK, nil
	}
	if err := commit(); err != nil {
		return 0, err
	}
	fmt.Fprintf(stderr, "exported tenant %s: %d events, head last_seq %d last_hash %s, to %s\n", *tenant, res.Events, res.Head.LastSeq, res.Head.LastHash, *out)
	warnShards()
	if err := exportCheckpoint(ctx, *tenant, res.Head.LastSeq, *out, *cpOut, *cpBucket, *local, stderr); err != nil {
		return 0, err
	}
	return ExitOK, nil
}

// exportCheckpoint writes, beside the export, the newest signed checkpoint
// at or below its head, for `fourlanes verify -checkpoint`.
func exportCheckpoint(ctx context.Context, tenant string, headSeq int64, out, cpOut, bucket string, local bool, stderr io.Writer) error {
	src := checkpointSource{bucket: bucket}
	if local {
		var err error
		if src, err = localCheckpointSource(); err != nil {
			return err
		}
	}
	if cpOut == "" && out != "-" {
		cpOut = out + ".checkpoint"
	}
	if src.bucket == "" || cpOut == "" {
		fmt.Fprintf(stderr, "no signed checkpoint written (no -checkpoint-bucket, or stdout without -checkpoint-out)\n")
		return nil
	}
	note, key, err := latestCheckpoint(ctx, src, tenant, headSeq)
	if err != nil {
		return err
	}
	if note == nil {
		fmt.Fprintf(stderr, "tenant %s has no signed checkpoint at or below seq %d in %s: run reconcile\n", tenant, headSeq, src.bucket)
		return nil
	}
	if err := os.WriteFile(cpOut, note, 0o644); err != nil {
		return err
	}
	seq, _ := reconcile.CheckpointSeqOfKey(key)
	fmt.Fprintf(stderr, "signed checkpoint at seq %d (s3://%s/%s) to %s: check with fourlanes verify -checkpoint %s -key PUBLIC_KEY.pem %s\n",
		seq, src.bucket, key, cpOut, cpOut, out)
	return nil
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
