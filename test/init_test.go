package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/twin/localaws"
)

// TestInitFromOutside is issue 20's "must show", as a newcomer would do it:
// from an empty folder outside the repository, `fourlanes init` writes a new
// application (here with -fourlanes, until the modules are published), and
// in it `go vet ./...` and `CI=true go test ./...` pass, its end-to-end test
// (the whole stack on the twin) included.
func TestInitFromOutside(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	root, err := localaws.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "taskboard") // outside the repository and its go.work
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = filepath.Dir(dir)
		if _, err := os.Stat(dir); err == nil {
			cmd.Dir = dir
		}
		cmd.Env = append(os.Environ(), "GOWORK=off", "CI=true")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	cli := filepath.Join(t.TempDir(), "fourlanes")
	build := exec.Command("go", "build", "-o", cli, "./cmd/fourlanes")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the CLI: %v\n%s", err, out)
	}
	run(cli, "init", dir, "-module", "example.com/team/taskboard", "-fourlanes", root)
	run("go", "vet", "./...")
	out := run("go", "test", "-count=1", "-v", "./...")
	for _, want := range []string{"--- PASS: TestEndToEnd", "--- PASS: TestPassesTheGate", "--- PASS: TestAppIsValid"} {
		if !strings.Contains(out, want) {
			t.Errorf("the new application's tests did not report %q:\n%s", want, out)
		}
	}
}
