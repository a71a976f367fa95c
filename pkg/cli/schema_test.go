package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSchemaCommand: `fourlanes schema` exports what the library checks in
// (one bundle on stdout, or the same files under -o), refuses a glob that
// matches nothing, and names a payload with no JSON Schema with exit 3.
func TestSchemaCommand(t *testing.T) {
	root := moduleRoot(t)
	published := filepath.Join(root, "examples", "library", "schemas")
	code, out, stderr := runCLI(t, "schema", "-C", root, "./examples/library/...")
	if code != ExitOK {
		t.Fatalf("schema: exit %d, stderr %q", code, stderr)
	}
	var doc struct {
		Dialect string                     `json:"$schema"`
		Defs    map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Dialect != "https://json-schema.org/draft/2020-12/schema" || len(doc.Defs) != 2 {
		t.Fatalf("schema: got %.300s (%v); want a 2020-12 bundle of the library's two versions", out, err)
	}
	for _, key := range []string{"loan.opened.v1", "loan.returned.v1"} {
		var def map[string]any
		if err := json.Unmarshal(doc.Defs[key], &def); err != nil || def["$schema"] != nil || def["type"] != "object" {
			t.Errorf("$defs[%s]: %s, %v; want an object schema without $schema of its own", key, doc.Defs[key], err)
		}
	}

	dir := t.TempDir()
	if code, _, stderr := runCLI(t, "schema", "-C", root, "-type", "loan.*", "-o", dir, "./examples/library/..."); code != ExitOK || !strings.Contains(stderr, "wrote 2 schemas") {
		t.Fatalf("schema -o: exit %d, stderr %q", code, stderr)
	}
	for _, f := range []string{"loan.opened/v1.json", "loan.returned/v1.json"} {
		got, err1 := os.ReadFile(filepath.Join(dir, f))
		want, err2 := os.ReadFile(filepath.Join(published, f))
		if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: exported %d bytes (%v), checked in %d (%v); want the same file", f, len(got), err1, len(want), err2)
		}
	}

	if code, _, stderr := runCLI(t, "schema", "-C", root, "-type", "order.*", "./examples/library/..."); code != ExitError || !strings.Contains(stderr, `no declared event type matches "order.*"`) {
		t.Errorf("schema -type order.* on the library: exit %d, stderr %q; want an error saying nothing matches", code, stderr)
	}
	code, out, _ = runCLI(t, "schema", "-C", root, "./pkg/catalog/gate/testdata/payloads")
	if code != ExitFinding || !strings.Contains(out, "widget.broken v1: payload payloads.Chan has no JSON Schema") {
		t.Errorf("schema of a payload JSON cannot carry: exit %d, stdout %q; want exit %d naming it", code, out, ExitFinding)
	}
}

// TestGateSchemas: `fourlanes gate -schemas` passes the library against its
// checked-in schemas, fails (exit 3) naming the version and the field when
// a published one no longer fits, and -write-schemas needs -schemas.
func TestGateSchemas(t *testing.T) {
	root := moduleRoot(t)
	published := filepath.Join(root, "examples", "library", "schemas")
	if code, out, stderr := runCLI(t, "gate", "-C", root, "-schemas", published, "./examples/library/..."); code != ExitOK {
		t.Fatalf("gate -schemas on the library: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(published, "loan.opened", "v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	// As if loan.opened v1 had a required "due" field that its Go type lost.
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	s["properties"].(map[string]any)["due"] = map[string]any{"type": "string"}
	s["required"] = append(s["required"].([]any), "due")
	b, _ = json.Marshal(s)
	for _, f := range []string{"loan.opened/v1.json", "loan.returned/v1.json"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "loan.opened", "v1.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, "gate", "-C", root, "-schemas", dir, "-write-schemas", "./examples/library/...")
	if code != ExitFinding || !strings.Contains(out, "loan.opened v1: field due removed (or renamed); published versions never change incompatibly: declare v2") {
		t.Errorf("gate -schemas with a field gone: exit %d, stdout %q; want exit %d naming loan.opened v1 and the field", code, out, ExitFinding)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "loan.returned", "v1.json")); len(got) == 0 {
		t.Error("-write-schemas did not write the missing loan.returned v1")
	}
	if code, _, stderr := runCLI(t, "gate", "-write-schemas"); code != ExitUsage || !strings.Contains(stderr, "-write-schemas needs -schemas DIR") {
		t.Errorf("gate -write-schemas alone: exit %d, stderr %q; want a usage error", code, stderr)
	}
}
