package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// moduleRoot is the repository root (pkg/cli's tests run in pkg/cli).
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestGateCommand: `fourlanes gate` passes an application that keeps its
// declarations (the library example), names every violation of one that
// does not (a fixture) with exit 3, and writes and checks the catalog.
func TestGateCommand(t *testing.T) {
	root := moduleRoot(t)
	code, out, stderr := runCLI(t, "gate", "-C", root, "./examples/library/...")
	if code != ExitOK || out != "" || !strings.Contains(stderr, "0 violations") || strings.Contains(stderr, " 0 modules") {
		t.Fatalf("gate ./examples/library/...: exit %d, stdout %q, stderr %q; want exit 0, its modules read, no violation", code, out, stderr)
	}

	code, out, stderr = runCLI(t, "gate", "-C", root, "./pkg/catalog/gate/testdata/undeclared/...")
	if code != ExitFinding || !strings.Contains(out, "pkg/catalog/gate/testdata/undeclared/") || !strings.Contains(out, "widget.exploded") {
		t.Fatalf("gate on a fixture that emits an undeclared type: exit %d, stdout %q, stderr %q; want exit %d and the violation with its file", code, out, stderr, ExitFinding)
	}

	code, out, _ = runCLI(t, "gate", "-json", "-C", root, "./pkg/catalog/gate/testdata/undeclared/...")
	var rep gateReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != ExitFinding || strings.Count(out, "\n") != 1 || len(rep.Violations) == 0 || rep.Catalog != nil {
		t.Fatalf("gate -json: exit %d, %q (%v); want exit %d and one line with the violations", code, out, err, ExitFinding)
	}
	if v := rep.Violations[0]; !strings.Contains(v.File, "pkg/catalog/gate/testdata/undeclared/") || v.Line == 0 || v.Column == 0 || !strings.Contains(out, "widget.exploded") {
		t.Errorf("gate -json violation %+v: want its file, line, column and message", v)
	}

	md := filepath.Join(t.TempDir(), "CATALOG.md")
	if code, out, stderr := runCLI(t, "gate", "-C", root, "-catalog", md, "./examples/library/..."); code != ExitOK {
		t.Fatalf("gate -catalog: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	b, err := os.ReadFile(md)
	if err != nil || !strings.Contains(string(b), "loan.") {
		t.Fatalf("gate -catalog wrote %q (err %v); want the library's catalog", b, err)
	}
	if code, out, _ := runCLI(t, "gate", "-C", root, "-check-catalog", md, "./examples/library/..."); code != ExitOK {
		t.Errorf("gate -check-catalog on the catalog it just wrote: exit %d, stdout %q", code, out)
	}
	// The catalog recorded reminders.member as starting from all history:
	// its Start was changed since, which a stale file alone does not say.
	if err := os.WriteFile(md, []byte(strings.Replace(string(b), "| `live` |", "| `all` |", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runCLI(t, "gate", "-C", root, "-check-catalog", md, "./examples/library/..."); code != ExitFinding ||
		!strings.Contains(out, "examples/library/") || !strings.Contains(out, "(6) subscription reminders.member: Start changed from all") ||
		!strings.Contains(out, "fourlanes backfill -subscription reminders.member") {
		t.Errorf("gate -check-catalog on a catalog that records another start: exit %d, stdout %q; want exit %d, check 6 at the declaration, naming the backfill", code, out, ExitFinding)
	}
	if err := os.WriteFile(md, append(b, "stale\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runCLI(t, "gate", "-C", root, "-check-catalog", md, "./examples/library/..."); code != ExitFinding || !strings.Contains(out, "not what the declarations generate") {
		t.Errorf("gate -check-catalog on a stale catalog: exit %d, stdout %q; want exit %d naming the file", code, out, ExitFinding)
	}
	code, out, _ = runCLI(t, "gate", "-json", "-C", root, "-check-catalog", md, "./examples/library/...")
	rep = gateReport{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != ExitFinding || rep.Catalog == nil || *rep.Catalog != (gateCatalog{File: md}) || len(rep.Violations) != 0 || rep.Modules == 0 {
		t.Errorf("gate -json -check-catalog on a stale catalog: exit %d, %q (%v); want exit %d, catalog {file, fresh false}, modules read", code, out, err, ExitFinding)
	}
	if code, _, stderr := runCLI(t, "gate", "-allow", "no-reason"); code != ExitUsage || !strings.Contains(stderr, "want TYPE=REASON") {
		t.Errorf("gate -allow without a reason: exit %d, stderr %q; want a usage error", code, stderr)
	}
}
