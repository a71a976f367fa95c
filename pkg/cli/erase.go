package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/erasure"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

const eraseSynopsis = "[-table NAME | -stack NAME [-backbone ID] | -local] -tenant T -subject S (-by WHO -reason WHY | -status) [-json]"

// runErase erases a data subject (pkg/erasure: its data key is replaced by
// a tombstone, so every personal field sealed under it reads as erased), or
// prints a subject's state with -status.
func runErase(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("erase", eraseSynopsis, stderr)
	table := fs.String("table", os.Getenv(keys.EnvSubjectKeysTable), "the subject-keys table (default $"+keys.EnvSubjectKeysTable+"; the stack output "+keys.OutputSubjectKeysTable+")")
	local := fs.Bool("local", false, "the subject-keys table of the twin 'fourlanes dev' is running")
	stack := fs.String("stack", "", stackHelp+" ("+keys.OutputSubjectKeysTable+")")
	fs.String(backboneFlag, "", backboneHelp)
	tenant := fs.String("tenant", "", "the subject's tenant (required)")
	subject := fs.String("subject", "", "the data subject: the value of the payload field tagged fourlanes:\"subject\" (required)")
	by := fs.String("by", "", "who erases (your name or IAM principal): recorded in the tombstone")
	reason := fs.String("reason", "", "why (a request reference, say): recorded in the tombstone")
	status := fs.Bool("status", false, "print the subject's state (unknown, has a key, erased: when, by whom, why) and erase nothing")
	asJSON := fs.Bool("json", false, "print the subject's state as one JSON object")
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
	if err := tenancy.CheckTenant(*tenant); err != nil {
		return 0, fmt.Errorf("%w: -tenant: %v", ErrUsage, err)
	}
	if *subject == "" {
		return 0, fmt.Errorf("%w: -subject is required: the value of the payload field marked `fourlanes:\"subject\"`", ErrUsage)
	}
	if !*status && (*by == "" || *reason == "") {
		return 0, fmt.Errorf("%w: erasing needs -by (who) and -reason (why), which the tombstone records; -status only reads", ErrUsage)
	}
	if *status && (*by != "" || *reason != "") {
		return 0, fmt.Errorf("%w: -status erases nothing: drop -by and -reason, or drop -status to erase", ErrUsage)
	}
	endpoint, err := resolveTables(ctx, fs, *stack, *local, tableFlag{"table", table, keys.OutputSubjectKeysTable})
	if err != nil {
		return 0, err
	}
	if *local && *table == "" {
		return 0, fmt.Errorf("-local: the running twin's stack has no subject-keys table: its catalog declares no personal fields (`fourlanes:\"personal\"`)")
	}
	if *table == "" {
		return 0, fmt.Errorf("%w: pass -table (the stack output %s), -stack NAME, set $%s, or -local", ErrUsage, keys.OutputSubjectKeysTable, keys.EnvSubjectKeysTable)
	}
	db, err := dynamoDB(ctx, fs, endpoint)
	if err != nil {
		return 0, err
	}
	subjects, err := erasure.NewSubjects(db, *table)
	if err != nil {
		return 0, err
	}
	if !*status {
		if err := subjects.Erase(ctx, *tenant, *subject, erasure.Erasure{By: *by, Reason: *reason}); err != nil {
			return 0, err
		}
	}
	st, err := subjects.Status(ctx, *tenant, *subject)
	if err != nil {
		return 0, err
	}
	if *asJSON {
		return 0, json.NewEncoder(stdout).Encode(struct {
			Tenant  string `json:"tenant"`
			Subject string `json:"subject"`
			erasure.Status
		}{*tenant, *subject, st})
	}
	switch {
	case !st.Known:
		fmt.Fprintf(stdout, "subject %q of tenant %s: unknown (no personal data sealed for it)\n", *subject, *tenant)
	case st.Erased:
		fmt.Fprintf(stdout, "subject %q of tenant %s: erased at %s by %s (%s); its personal fields read as %q, its events still verify\n",
			*subject, *tenant, st.ErasedAt, st.ErasedBy, st.Reason, catalog.Erased)
	default:
		fmt.Fprintf(stdout, "subject %q of tenant %s: has a data key (not erased)\n", *subject, *tenant)
	}
	return 0, nil
}
