package cli

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
)

const initSynopsis = "DIR -module PATH [-name NAME] [-fourlanes CHECKOUT] [-no-tidy]"

// template holds the application `fourlanes init` writes: files named as
// they are written, with .tmpl appended (so that none is Go source here),
// cmd/main.go.tmpl going to cmd/<name>/main.go and gitignore.tmpl to
// .gitignore.
//
//go:embed template
var appTemplate embed.FS

// initVersion is the version of the fourlanes modules a new application
// requires.
const initVersion = "v0.1.0"

// initData is what the templates are given.
type initData struct {
	Module   string // the application's module path
	Name     string // the application's name (app.Application.Name)
	Pkg      string // its root package's name
	Stack    string // its CloudFormation stack's default name
	Version  string // of the fourlanes modules
	Checkout string // a local checkout to replace them with, if any
}

var (
	modulePathRe = regexp.MustCompile(`^[a-z0-9][-a-z0-9._~]*(/[-A-Za-z0-9._~]+)*$`)
	appNameRe    = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
)

// runInit writes a new application into DIR: one module that writes its own
// tracked table and emits in the same transaction, a DURABLE and a
// BEST_EFFORT subscription, the application value, the function mains, the
// CDK app and its cdk.json, a gate test and an end-to-end test on the twin;
// then go mod tidy.
func runInit(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("init", initSynopsis, stderr)
	module := fs.String("module", "", "the new application's Go module path, e.g. example.com/team/tasks (required)")
	name := fs.String("name", "", "the application's name: lower-case letters, digits and hyphens, at most 32 (default: DIR's last element)")
	checkout := fs.String("fourlanes", "", "a local checkout of fourlanes to use instead of the published modules (go.mod gets replace directives)")
	noTidy := fs.Bool("no-tidy", false, "write the files only; do not run go mod tidy")
	// DIR comes first (init DIR -module PATH); the flag package stops at the
	// first argument that is not a flag, so it goes last for parsing.
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		args = append(args[1:], args[0])
	}
	if err := Parse(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() != 1 {
		return 0, fmt.Errorf("%w: give the folder to write the application into (init DIR -module PATH)", ErrUsage)
	}
	dir := fs.Arg(0)
	d, err := newInitData(dir, *module, *name, *checkout)
	if err != nil {
		return 0, err
	}
	if err := emptyDir(dir); err != nil {
		return 0, err
	}
	files, err := renderApp(d)
	if err != nil {
		return 0, err
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return 0, err
		}
		if err := os.WriteFile(p, f.body, 0o644); err != nil {
			return 0, err
		}
	}
	fmt.Fprintf(stdout, "init: wrote %d files of %s (module %s) into %s\n", len(files), d.Name, d.Module, dir)
	if !*noTidy {
		fmt.Fprintf(stdout, "init: go mod tidy (fetches the modules the application needs) ...\n")
		tidy := exec.CommandContext(ctx, "go", "mod", "tidy")
		tidy.Dir = dir
		// The new module is its own: a go.work above DIR must not claim it.
		tidy.Env = append(os.Environ(), "GOWORK=off")
		if out, err := tidy.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("go mod tidy in %s: %v\n%s", dir, err, out)
		}
	}
	fmt.Fprintf(stdout, `init: done. Next, in %s:
  go vet ./... && go test ./...   every test; TestEndToEnd runs the whole stack on this machine
  go run ./cmd/%s dev             the stack on this machine
Make it your own domain in tasks/tasks.go, tasks/notify.go and tasks/board.go.
`, dir, d.Name)
	return ExitOK, nil
}

func newInitData(dir, module, name, checkout string) (initData, error) {
	d := initData{Module: module, Version: initVersion}
	if module == "" {
		return d, fmt.Errorf("%w: -module is required: the new application's Go module path, e.g. example.com/team/%s", ErrUsage, filepath.Base(dir))
	}
	if !modulePathRe.MatchString(module) || strings.Contains(module, "..") {
		return d, fmt.Errorf("%w: -module %q is not a Go module path: want lower-case host-like path elements, e.g. example.com/team/tasks", ErrUsage, module)
	}
	if name == "" {
		name = strings.ToLower(strings.ReplaceAll(filepath.Base(filepath.Clean(dir)), "_", "-"))
	}
	if !appNameRe.MatchString(name) {
		return d, fmt.Errorf("%w: application name %q: want 1 to 32 lower-case letters, digits and hyphens, starting with a letter; pass -name", ErrUsage, name)
	}
	d.Name, d.Pkg = name, strings.ReplaceAll(name, "-", "")
	d.Stack = stackName(name)
	if checkout != "" {
		abs, err := filepath.Abs(checkout)
		if err != nil {
			return d, err
		}
		for _, m := range []string{"go.mod", "infra/go.mod", "twin/go.mod"} {
			b, err := os.ReadFile(filepath.Join(abs, m))
			if err != nil || !bytes.Contains(b, []byte("module github.com/fourlanes/fourlanes")) {
				return d, fmt.Errorf("%w: -fourlanes %s: no fourlanes checkout there (%s is missing or another module's)", ErrUsage, checkout, m)
			}
		}
		d.Checkout = filepath.ToSlash(abs)
	}
	return d, nil
}

// stackName is the default stack name of an application: its name in
// CamelCase ("task-board" → "TaskBoard").
func stackName(name string) string {
	var b strings.Builder
	for _, part := range strings.Split(name, "-") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

// emptyDir refuses a folder that exists and holds anything: init never
// writes over a team's files.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%w: %s is not empty: init writes a new application into a new or empty folder", ErrUsage, dir)
	}
	return nil
}

type initFile struct {
	path string
	body []byte
}

// renderApp renders every template for d, Go files formatted.
func renderApp(d initData) ([]initFile, error) {
	var files []initFile
	err := fs.WalkDir(appTemplate, "template", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		src, err := appTemplate.ReadFile(p)
		if err != nil {
			return err
		}
		t, err := template.New(p).Option("missingkey=error").Parse(string(src))
		if err != nil {
			return fmt.Errorf("init template %s: %w", p, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, d); err != nil {
			return fmt.Errorf("init template %s: %w", p, err)
		}
		out := strings.TrimSuffix(strings.TrimPrefix(p, "template/"), ".tmpl")
		switch out {
		case "cmd/main.go":
			out = path.Join("cmd", d.Name, "main.go")
		case "gitignore":
			out = ".gitignore"
		}
		body := b.Bytes()
		if strings.HasSuffix(out, ".go") {
			if body, err = format.Source(body); err != nil {
				return fmt.Errorf("init template %s: the Go it renders does not parse: %w", p, err)
			}
		}
		files = append(files, initFile{path: out, body: body})
		return nil
	})
	return files, err
}
