package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
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

const exportSynopsis = "-tenant T [-o FILE] [-parallel N] [-table NAME | -stack NAME [-backbone ID] | -local] [-checkpoint-bucket B] [-checkpoint-out FILE.checkpoint] [-json]"

// exportSummary is what export reports with -json: its members are the
// documented output (docs/cli.md).
type exportSummary struct {
	Tenant string `json:"tenant"`
	// Exported is false when the tenant has no events (no head row):
	// nothing was written.
	Exported bool   `json:"exported"`
	File     string `json:"file"` // "-": stdout
	Events   int64  `json:"events"`
	LastSeq  int64  `json:"last_seq"`
	LastHash string `json:"last_hash,omitempty"`
	// OtherChains are the tenant's chain shards, each exported on its own;
	// OtherChainsError says why they could not be looked up.
	OtherChains      []string `json:"other_chains"`
	OtherChainsError string   `json:"other_chains_error,omitempty"`
	// Checkpoint is the signed checkpoint written beside the export; nil
	// when none was (no bucket, stdout, or none at or below the head).
	Checkpoint *exportedCheckpoint `json:"checkpoint"`
}

type exportedCheckpoint struct {
	File   string `json:"file"`
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	Seq    int64  `json:"seq"`
	// AboveHead: the newest checkpoint object is past the log's head, a
	// rollback unless it does not verify; export exits 3.
	AboveHead bool `json:"above_head,omitempty"`
}

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("export", exportSynopsis, stderr)
	tenant := fs.String("tenant", "", "the tenant whose chain to export, or one chain shard's (<tenant>~<k>) (required)")
	out := fs.String("o", "-", "the file to write (JSON Lines); - writes stdout")
	parallel := fs.Int("parallel", 4, "how many seq ranges to read at once, each by its own Query (1-MB pages); the lines are in seq order whatever it is")
	table := fs.String("table", os.Getenv(keys.EnvEventsTable), "the events table (default $"+keys.EnvEventsTable+"; the stack output EventsTableName)")
	local := fs.Bool("local", false, "export from the twin 'fourlanes dev' is running")
	stack := fs.String("stack", "", stackHelp+" (EventsTableName, and CheckpointBucketName if it has one)")
	fs.String(backboneFlag, "", backboneHelp)
	cpBucket := fs.String("checkpoint-bucket", os.Getenv(keys.EnvCheckpointBucket), "the bucket of signed checkpoints (default $"+keys.EnvCheckpointBucket+"; the stack output CheckpointBucketName; -local: the twin's)")
	cpOut := fs.String("checkpoint-out", "", "where to write the tenant's newest checkpoint object (default FILE.checkpoint; none for stdout); above the head, export says ROLLBACK and exits 3")
	asJSON := fs.Bool("json", false, "print a summary of the export as one JSON object on stdout (needs -o FILE: the export is not on stdout then); the messages stay on stderr")
	addAWSFlags(fs)
	if err := Parse(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	if *tenant == "" {
		return 0, fmt.Errorf("%w: -tenant is required", ErrUsage)
	}
	if *parallel < 1 || *parallel > 64 {
		return 0, fmt.Errorf("%w: -parallel %d: want 1 to 64", ErrUsage, *parallel)
	}
	if err := tenancy.CheckChain(*tenant); err != nil {
		return 0, fmt.Errorf("%w: -tenant: %v", ErrUsage, err)
	}
	if *asJSON && *out == "-" {
		return 0, fmt.Errorf("%w: -json prints the summary on stdout, where -o - writes the export: pass -o FILE", ErrUsage)
	}
	if err := checkLocal(fs, *local); err != nil {
		return 0, err
	}
	so, err := openStack(ctx, fs, *stack, *local)
	if err != nil {
		return 0, err
	}
	if err := so.fill("table", table, keys.OutputEventsTable); err != nil {
		return 0, err
	}
	so.fillOptional("checkpoint-bucket", cpBucket, keys.OutputCheckpointBucket)
	store, err := openStore(ctx, fs, eventstore.Config{}, *table, *local) // reading needs no catalog
	if err != nil {
		return 0, err
	}
	sum := exportSummary{Tenant: *tenant, File: *out, OtherChains: []string{}}
	report := func() (int, error) {
		if *asJSON {
			if err := json.NewEncoder(stdout).Encode(sum); err != nil {
				return 0, err
			}
		}
		return ExitOK, nil
	}

	// An export is one chain (fourlanes verify checks one chain); a tenant
	// with chain shards has more, each exported on its own. Finding them
	// needs dynamodb:BatchGetItem, which a role granted before chain shards
	// may lack: then the export still runs, and says what it could not check.
	chains, lookupErr := store.ChainsOf(ctx, *tenant)
	if lookupErr == nil {
		sum.OtherChains = chains[1:]
	} else {
		sum.OtherChainsError = lookupErr.Error()
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
		if len(sum.OtherChains) > 0 {
			fmt.Fprintf(stderr, "WARNING: tenant %s has %d more chains (chain shards): %s; export each with -tenant <chain>\n",
				*tenant, len(sum.OtherChains), strings.Join(sum.OtherChains, " "))
		}
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	res, err := store.ExportWith(ctx, *tenant, bw, eventstore.ExportOptions{Parallel: *parallel})
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
		sum.File = ""
		return report()
	}
	if err := commit(); err != nil {
		return 0, err
	}
	sum.Exported, sum.Events, sum.LastSeq, sum.LastHash = true, res.Events, res.Head.LastSeq, res.Head.LastHash
	fmt.Fprintf(stderr, "exported tenant %s: %d events, head last_seq %d last_hash %s, to %s\n", *tenant, res.Events, res.Head.LastSeq, res.Head.LastHash, *out)
	warnShards()
	if sum.Checkpoint, err = exportCheckpoint(ctx, fs, *tenant, res.Head.LastSeq, *out, *cpOut, *cpBucket, *local, stderr); err != nil {
		return 0, err
	}
	code, err := report()
	if err == nil && sum.Checkpoint != nil && sum.Checkpoint.AboveHead {
		return ExitFinding, nil
	}
	return code, err
}

// exportCheckpoint writes, beside the export, the newest signed checkpoint
// at or below its head, for 'fourlanes verify -checkpoint', and returns
// what it wrote (nil: none).
func exportCheckpoint(ctx context.Context, fs *flag.FlagSet, tenant string, headSeq int64, out, cpOut, bucket string, local bool, stderr io.Writer) (*exportedCheckpoint, error) {
	src := checkpointSource{bucket: bucket}
	if local {
		var err error
		if src, err = localCheckpointSource(); err != nil {
			return nil, err
		}
	}
	if cpOut == "" && out != "-" {
		cpOut = out + ".checkpoint"
	}
	if src.bucket == "" || cpOut == "" {
		fmt.Fprintf(stderr, "no signed checkpoint written (no -checkpoint-bucket, or stdout without -checkpoint-out)\n")
		return nil, nil
	}
	note, key, err := latestCheckpoint(ctx, fs, src, tenant)
	if err != nil {
		return nil, err
	}
	if note == nil {
		fmt.Fprintf(stderr, "tenant %s has no signed checkpoint in %s yet: the notary signs one as it reads the events stream (seconds after a commit); if none appears, see the NotaryStopped and NotaryFinding alarms\n", tenant, src.bucket)
		return nil, nil
	}
	if err := os.WriteFile(cpOut, note, 0o644); err != nil {
		return nil, err
	}
	seq, _ := reconcile.CheckpointSeqOfKey(key)
	cp := &exportedCheckpoint{File: cpOut, Bucket: src.bucket, Key: key, Seq: seq, AboveHead: seq > headSeq}
	check := fmt.Sprintf("fourlanes verify -checkpoint %s -origin fourlanes/<stack> -key PUBLIC_KEY.pem %s", cpOut, out)
	if cp.AboveHead {
		// The newest checkpoint is past the head: were an older one picked,
		// the export would verify and the rollback would go unseen. The
		// note is written beside the export, so that verify, with the
		// trusted key, says whether it is signed (then the log lost signed
		// events) or an object nobody signed.
		fmt.Fprintf(stderr, "ROLLBACK: tenant %s's head is at seq %d, behind the newest checkpoint object, at seq %d (s3://%s/%s): "+
			"the log lost events that were signed, unless that object does not verify; written to %s: check with %s "+
			"(BROKEN ... truncated below checkpoint: a rollback; BROKEN checkpoint: an object nobody signed, see CheckpointInvalid)\n",
			tenant, headSeq, seq, src.bucket, key, cpOut, check)
		return cp, nil
	}
	fmt.Fprintf(stderr, "signed checkpoint at seq %d (s3://%s/%s) to %s: check with %s\n", seq, src.bucket, key, cpOut, check)
	return cp, nil
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
