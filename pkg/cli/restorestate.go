package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/restore"
)

const restoreStateSynopsis = "-from RESTORED_TABLE [-state-table NAME | -stack NAME [-backbone ID] | -local] [-yes] [-json]"

// runRestoreState merges a restored copy of the state table into the live
// one (pkg/restore): rows the live table lacks are copied, and the
// subscription entries a live claim item lacks merged into it; no row or
// entry is overwritten. Without -yes it only counts.
func runRestoreState(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("restore-state", restoreStateSynopsis, stderr)
	from := fs.String("from", "", "the table restored from a backup or to a point in time (RestoreTableToPointInTime), read only")
	stateTable := fs.String("state-table", os.Getenv(keys.EnvStateTable), "the live state table (default $"+keys.EnvStateTable+"; the stack output "+keys.OutputStateTable+")")
	local := fs.Bool("local", false, "the state table of the twin 'fourlanes dev' is running")
	stack := fs.String("stack", "", stackHelp+" (StateTableName)")
	fs.String(backboneFlag, "", backboneHelp)
	yes := fs.Bool("yes", false, "copy the rows (without -yes: count what would be copied, write nothing)")
	asJSON := fs.Bool("json", false, "one JSON object: the report (from, to, applied, copied, merged, kinds, not_copied)")
	addAWSFlags(fs)
	if err := Parse(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	if err := checkLocal(fs, *local); err != nil {
		return 0, err
	}
	if *from == "" {
		return 0, fmt.Errorf("%w: pass -from, the table restored to an earlier time (docs/operations.md, 'Runbook: restoring the state table to a point in time')", ErrUsage)
	}
	endpoint, err := resolveTables(ctx, fs, *stack, *local, tableFlag{"state-table", stateTable, keys.OutputStateTable})
	if err != nil {
		return 0, err
	}
	if *stateTable == "" {
		return 0, fmt.Errorf("%w: pass -state-table (the stack output %s), -stack NAME, set $%s, or -local", ErrUsage, keys.OutputStateTable, keys.EnvStateTable)
	}
	if *from == *stateTable {
		return 0, fmt.Errorf("%w: -from names the live state table %s: restore it to a new table and pass that", ErrUsage, *stateTable)
	}
	db, err := dynamoDB(ctx, fs, endpoint)
	if err != nil {
		return 0, err
	}
	r, runErr := restore.Run(ctx, restore.Config{DB: db, From: *from, To: *stateTable, Apply: *yes})
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(r); err != nil {
			return 0, err
		}
	} else {
		printRestore(stdout, r)
	}
	if runErr != nil {
		return 0, runErr
	}
	if !*yes {
		fmt.Fprintf(stderr, "fourlanes restore-state: nothing written; %d rows would be copied into %s and %d claim items merged: run again with -yes to write them\n", r.Copied, r.To, r.Merged)
	}
	if n := r.NotCopied[restore.Unknown]; n > 0 {
		fmt.Fprintf(stderr, "fourlanes restore-state: %d rows of no kind fourlanes knows were not copied (partition keys such as %s)\n", n, strings.Join(r.UnknownKeys, ", "))
	}
	return ExitOK, nil
}

func printRestore(w io.Writer, r restore.Report) {
	verb := "would copy"
	if r.Applied {
		verb = "copied"
	}
	mergeVerb := "would merge"
	if r.Applied {
		mergeVerb = "merged"
	}
	fmt.Fprintf(w, "from %s into %s: %s %d rows the live table lacks; %s missing subscription entries into %d live claim items\n",
		r.From, r.To, verb, r.Copied, mergeVerb, r.Merged)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tRESTORED\tPRESENT\tCOPIED\tMERGED\tENTRIES\tEXPIRED\tRESOLVED\tFAILED")
	for _, k := range restore.Copied {
		c := r.Kinds[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", k, c.Restored, c.Present, c.Copied, c.Merged, c.Entries, c.Expired, c.Resolved, c.Failed)
	}
	tw.Flush()
	var left []string
	for _, k := range restore.NotCopied {
		if n := r.NotCopied[k]; n > 0 {
			left = append(left, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(left) > 0 {
		fmt.Fprintf(w, "not copied (rebuilt by their owners): %s\n", strings.Join(left, ", "))
	}
}
