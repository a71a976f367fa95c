package cli

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitWrites: init writes the application's files (Go that parses, the
// go.mod with replace directives to a checkout, the CLI under cmd/<name>),
// and writes nothing over an existing folder's files or for bad flags.
func TestInitWrites(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "task-board")
	checkout, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "init", dir, "-module", "example.com/team/taskboard", "-fourlanes", checkout, "-no-tidy")
	if code != ExitOK || !strings.Contains(out, "wrote") {
		t.Fatalf("init: exit %d, %q %q", code, out, stderr)
	}
	for _, f := range []string{"go.mod", "cdk.json", "app.go", "app_test.go", "e2e_test.go", "Makefile", "README.md", ".gitignore",
		"tasks/tasks.go", "tasks/notify.go", "tasks/board.go", "infra/main.go", "cmd/task-board/main.go",
		"functions/stream-filter/main.go", "functions/durable-consumer/main.go", "functions/changefeed/main.go",
		"functions/reconcile/main.go", "functions/dlq-repair/main.go", "functions/tamper-watch/main.go", "functions/notary/main.go", "functions/heartbeat/main.go",
		"schemas/task.created/v1.json", "schemas/task.done/v1.json", "schemas/starts.json"} {
		p := filepath.Join(dir, f)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%s not written: %v", f, err)
			continue
		}
		if strings.HasSuffix(f, ".go") {
			if _, err := parser.ParseFile(token.NewFileSet(), p, b, 0); err != nil {
				t.Errorf("%s does not parse: %v", f, err)
			}
		}
	}
	mod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	for _, want := range []string{"module example.com/team/taskboard", "github.com/fourlanes/fourlanes/infra " + initVersion,
		"github.com/fourlanes/fourlanes => " + filepath.ToSlash(checkout), "github.com/fourlanes/fourlanes/twin => " + filepath.ToSlash(checkout) + "/twin"} {
		if !strings.Contains(string(mod), want) {
			t.Errorf("go.mod lacks %q:\n%s", want, mod)
		}
	}
	if app, _ := os.ReadFile(filepath.Join(dir, "app.go")); !strings.Contains(string(app), "package taskboard") || !strings.Contains(string(app), `Name: "task-board"`) {
		t.Errorf("app.go: want package taskboard and the application named task-board:\n%s", app)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"init", dir, "-module", "example.com/x"}, "is not empty"},
		{[]string{"init", filepath.Join(t.TempDir(), "x"), "-no-tidy"}, "-module is required"},
		{[]string{"init", filepath.Join(t.TempDir(), "x"), "-module", "Example.com/X Y"}, "is not a Go module path"},
		{[]string{"init", filepath.Join(t.TempDir(), "Bad_Name!"), "-module", "example.com/x"}, "pass -name"},
		{[]string{"init", filepath.Join(t.TempDir(), "x"), "-module", "example.com/x", "-fourlanes", t.TempDir()}, "no fourlanes checkout there"},
		{[]string{"init", "-module", "example.com/x"}, "give the folder"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want exit %d and %q", c.args, code, stderr, ExitUsage, c.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) == 0 {
		t.Error("the refused init removed the first application")
	}
}
