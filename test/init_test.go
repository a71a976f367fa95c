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

	// The team's first edit of a published event: renaming task.created
	// v1's title field in place fails the new application's own gate test,
	// naming the version and the field, and writes no schema.
	tasksGo := filepath.Join(dir, "tasks", "tasks.go")
	src, err := os.ReadFile(tasksGo)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(src), "`json:\"title\"`", "`json:\"name\"`", 1)
	if edited == string(src) {
		t.Fatal("tasks.go has no title field to rename: keep this test in step with the template")
	}
	if err := os.WriteFile(tasksGo, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	schema := filepath.Join(dir, "schemas", "task.created", "v1.json")
	before, err := os.ReadFile(schema)
	if err != nil {
		t.Fatal(err)
	}
	gateCmd := exec.Command("go", "test", "-count=1", "-run", "TestPassesTheGate", "-update", ".")
	gateCmd.Dir = dir
	gateCmd.Env = append(os.Environ(), "GOWORK=off", "CI=true")
	gout, err := gateCmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the gate passed a field renamed in place in task.created v1:\n%s", gout)
	}
	for _, want := range []string{"task.created", "v1", "title"} {
		if !strings.Contains(string(gout), want) {
			t.Errorf("the gate's failure does not name %q:\n%s", want, gout)
		}
	}
	if after, _ := os.ReadFile(schema); string(after) != string(before) {
		t.Errorf("-update rewrote a published schema incompatibly:\n%s", after)
	}
}
