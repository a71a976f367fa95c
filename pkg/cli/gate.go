package cli

import (
	"bytes"
	"context"
	"encoding/json"
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
// generates, and names each DURABLE subscription whose Start differs from
// the one the file records (check 6: a backfill delivers history, not a
// changed start). -schemas checks each version's payload against its published
// JSON Schema in DIR (check 5); -write-schemas writes the missing and the
// compatibly changed ones first.
const gateSynopsis = "[-C DIR] [-allow TYPE=REASON]... [-catalog FILE | -check-catalog FILE] [-schemas DIR [-write-schemas]] [-json] [PACKAGES (default ./...)]"

// gateReport is what gate prints with -json: its members are the
// documented output (docs/cli.md).
type gateReport struct {
	Modules    int             `json:"modules"`
	Emits      int             `json:"emits"`
	Files      int             `json:"files"`
	Violations []gateViolation `json:"violations"`
	// Catalog is the -catalog or -check-catalog file; nil without either.
	Catalog *gateCatalog `json:"catalog"`
}

type gateViolation struct {
	File    string `json:"file"` // relative to -C
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Check   int    `json:"check"` // 1-5, or 0 for a malformed declaration
	Message string `json:"message"`
}

type gateCatalog struct {
	File    string `json:"file"`
	Written bool   `json:"written"` // -catalog
	Fresh   bool   `json:"fresh"`   // -check-catalog: the file is what the declarations generate (true after -catalog)
}

func runGate(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("gate", gateSynopsis, stderr)
	dir := fs.String("C", ".", "the module to check (a folder with go.mod or below one)")
	write := fs.String("catalog", "", "write the generated catalog (Markdown) to this file")
	check := fs.String("check-catalog", "", "fail (exit 3) when this file differs from the generated catalog")
	schemas := fs.String("schemas", "", "the published JSON Schemas, DIR/<type>/v<N>.json: fail (exit 3) when a payload no longer fits its own")
	writeSchemas := fs.Bool("write-schemas", false, "with -schemas: first write the schemas that are missing or changed compatibly (never an incompatible one)")
	var allow allowFlag
	fs.Var(&allow, "allow", "a declared type that may have no producer, as TYPE=REASON (repeatable)")
	asJSON := fs.Bool("json", false, "print one JSON object (counts, violations, the catalog file's state) instead of a line per violation")
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
	rep := gateReport{Modules: len(r.Modules), Emits: len(r.Emits), Files: len(r.Files), Violations: []gateViolation{}}
	for _, v := range r.Violations {
		rep.Violations = append(rep.Violations, gateViolation{File: v.Pos.Filename, Line: v.Pos.Line, Column: v.Pos.Column, Check: v.Check, Message: v.Msg})
		if !*asJSON {
			fmt.Fprintln(stdout, v.String())
		}
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
		rep.Catalog = &gateCatalog{File: *write, Written: true, Fresh: true}
	case *check != "":
		got, err := os.ReadFile(*check)
		if err != nil {
			return 0, fmt.Errorf("-check-catalog: %w", err)
		}
		for _, v := range r.StartChanges(got, filepath.ToSlash(*check)) {
			rep.Violations = append(rep.Violations, gateViolation{File: v.Pos.Filename, Line: v.Pos.Line, Column: v.Pos.Column, Check: v.Check, Message: v.Msg})
			if !*asJSON {
				fmt.Fprintln(stdout, v.String())
			}
			code = ExitFinding
		}
		rep.Catalog = &gateCatalog{File: *check, Fresh: bytes.Equal(got, md)}
		if !rep.Catalog.Fresh {
			if !*asJSON {
				fmt.Fprintf(stdout, "%s: not what the declarations generate: regenerate it with `gate -catalog %s`\n", *check, filepath.ToSlash(*check))
			}
			code = ExitFinding
		}
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			return 0, err
		}
	}
	fmt.Fprintf(stderr, "catalog gate: %d modules, %d emits, %d files read, %d violations\n", len(r.Modules), len(r.Emits), len(r.Files), len(r.Violations))
	return code, nil
}
