package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/catalog/gate"
)

// runSchema exports the JSON Schema (2020-12) of every declared (type,
// version) of an application, generated from its source as the catalog gate
// generates them (check 5 compares them with the published ones): one
// bundle on stdout, every schema under "$defs" as "<type>.v<N>", or with -o
// one file per version, DIR/<type>/v<N>.json. A payload type the gate cannot
// describe is printed as a violation, with exit 3, and nothing is written.
const schemaSynopsis = "[-C DIR] [-type GLOB] [-o DIR] [PACKAGES (default ./...)]"

func runSchema(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("schema", schemaSynopsis, stderr)
	dir := fs.String("C", ".", "the application's module (a folder with go.mod or below one)")
	glob := fs.String("type", "*", "export only the event types this glob matches (e.g. order.*)")
	out := fs.String("o", "", "write DIR/<type>/v<N>.json instead of one bundle on stdout")
	if err := Parse(fs, args); err != nil {
		return 0, err
	}
	if !catalog.ValidGlob(*glob) && *glob != "*" {
		return 0, fmt.Errorf("%w: -type %q is not a type glob (e.g. order.* or order.placed)", ErrUsage, *glob)
	}
	patterns := fs.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	r, err := gate.Run(gate.Config{Dir: *dir, Patterns: patterns})
	if err != nil {
		return 0, err
	}
	bad := 0
	for _, v := range r.Violations {
		if v.Check == 5 {
			fmt.Fprintln(stdout, v.String())
			bad++
		}
	}
	if bad > 0 {
		return ExitFinding, nil
	}
	var picked []*gate.PublishedSchema
	for _, s := range r.Schemas {
		if catalog.Match(*glob, s.Type) {
			picked = append(picked, s)
		}
	}
	if len(picked) == 0 {
		return 0, fmt.Errorf("no declared event type matches %q in %s (%d modules read)", *glob, *dir, len(r.Modules))
	}
	if *out != "" {
		for _, s := range picked {
			file := filepath.Join(*out, filepath.FromSlash(s.Path))
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				return 0, err
			}
			if err := os.WriteFile(file, s.JSON, 0o644); err != nil {
				return 0, err
			}
		}
		fmt.Fprintf(stderr, "schema: wrote %d schemas under %s\n", len(picked), *out)
		return ExitOK, nil
	}
	b, err := bundle(picked)
	if err != nil {
		return 0, err
	}
	_, err = stdout.Write(b)
	return ExitOK, err
}

// bundle is one JSON Schema document holding every schema under $defs,
// keyed "<type>.v<N>" (a subschema carries no $schema of its own).
func bundle(schemas []*gate.PublishedSchema) ([]byte, error) {
	defs := map[string]*gate.Schema{}
	for _, s := range schemas {
		c := *s.Schema
		c.Dialect = ""
		defs[fmt.Sprintf("%s.v%d", s.Type, s.Version)] = &c
	}
	doc := struct {
		Dialect string                  `json:"$schema"`
		Comment string                  `json:"$comment"`
		Defs    map[string]*gate.Schema `json:"$defs"`
	}{gate.JSONSchemaDialect, "The payload of each event type and schema version, as $defs[\"<type>.v<N>\"]; exported by fourlanes schema from the module declarations.", defs}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
