package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/fourlanes/fourlanes/pkg/catalog/gate"
)

// allowFlag collects -allow TYPE=REASON.
type allowFlag []gate.Allowed

func (a *allowFlag) String() string { return fmt.Sprint(*a) }

func (a *allowFlag) Set(v string) error {
	typ, reason, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(typ) == "" || strings.TrimSpace(reason) == "" {
		return fmt.Errorf("want TYPE=REASON (a declared type that may have no producer, and why), got %q", v)
	}
	*a = append(*a, gate.Allowed{Type: strings.TrimSpace(typ), Reason: strings.TrimSpace(reason)})
	return nil
}

// runGate runs the catalog gate (pkg/catalog/gate) over an application's
// packages, as CI does: every violation is a line file:line:col, and the
// exit status is 3 when there is one. -catalog writes the generated catalog
// (Markdown); -check-catalog fails when that file is not what the source
// generates. -schemas checks each version's payload against its published
// JSON Schema in DIR (check 5); -write-schemas writes the missing and the
// compatibly changed ones first.
func runGate(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("gate", "gate [-C DIR] [-allow TYPE=REASON]... [-catalog FILE | -check-catalog FILE] [-schemas DIR [-write-schemas]] [PACKAGES]", stderr)
	dir := fs.String("C", ".", "the module to check (a folder with go.mod or below one)")
	write := fs.String("catalog", "", "write the generated catalog (Markdown) to this file")
	check := fs.String("check-catalog", "", "fail (exit 3) when this file differs from the generated catalog")
	schemas := fs.String("schemas", "", "the published JSON Schemas, DIR/<type>/v<N>.json: fail (exit 3) when a payload no longer fits its own")
	writeSchemas := fs.Bool("write-schemas", false, "with -schemas: first write the schemas that are missing or changed compatibly (never an incompatible one)")
	var allow allowFlag
	fs.Var(&allow, "allow", "a declared type that may have no producer, as TYPE=REASON (repeatable)")
	if err := Parse(fs, args); err != nil {
		return 0, err
	}
	if *write != "" && *check != "" {
		return 0, fmt.Errorf("%w: -catalog and -check-catalog: pick one", ErrUsage)
	}
	if *writeSchemas && *schemas == "" {
		return 0, fmt.Errorf("%w: -write-schemas needs -schemas DIR, the folder to write into", ErrUsage)
	}
	if *schemas != "" {
		abs, err := filepath.Abs(*schemas) // relative to where the command runs, as -catalog is
		if err != nil {
			return 0, err
		}
		*schemas = abs
	}
	patterns := fs.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	r, err := gate.Run(gate.Config{Dir: *dir, Patterns: patterns, Allow: allow, Schemas: *schemas, WriteSchemas: *writeSchemas})
	if err != nil {
		return 0, err
	}
	for _, v := range r.Violations {
		fmt.Fprintln(stdout, v.String())
	}
	code := ExitOK
	if len(r.Violations) > 0 {
		code = ExitFinding
	}
	md := r.Markdown()
	switch {
	case *write != "":
		if err := os.WriteFile(*write, md, 0o644); err != nil {
			return 0, err
		}
	case *check != "":
		got, err := os.ReadFile(*check)
		if err != nil {
			return 0, fmt.Errorf("-check-catalog: %w", err)
		}
		if !bytes.Equal(got, md) {
			fmt.Fprintf(stdout, "%s: not what the declarations generate: regenerate it with `gate -catalog %s`\n", *check, filepath.ToSlash(*check))
			code = ExitFinding
		}
	}
	fmt.Fprintf(stderr, "catalog gate: %d modules, %d emits, %d files read, %d violations\n", len(r.Modules), len(r.Emits), len(r.Files), len(r.Violations))
	return code, nil
}
