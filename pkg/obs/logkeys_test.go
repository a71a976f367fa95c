package obs_test

import (
	"fmt"
	"go/ast"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// obsPath is the package whose constants are the only log keys.
const obsPath = "github.com/fourlanes/fourlanes/pkg/obs"

// logKeyPatterns are the packages whose non-test code logs: the runtime
// module, the twin, the CLI, the construct, the examples, the benchmarks and
// the end-to-end suite. Test files are left out: their log lines are the
// tests' own and never reach an operator.
var logKeyPatterns = []string{
	"github.com/fourlanes/fourlanes/...",
	"github.com/fourlanes/fourlanes/twin/...",
	"github.com/fourlanes/fourlanes/cmd/fourlanes/...",
	"github.com/fourlanes/fourlanes/examples/orders/...",
	"github.com/fourlanes/fourlanes/examples/library/...",
	"github.com/fourlanes/fourlanes/bench/...",
	"github.com/fourlanes/fourlanes/test/...",
}

// TestLogKeysAreObsConstants fails when a log key is not one of pkg/obs's
// constants (a literal, or a constant of another package; an example
// application may also use constants of its own module) or when an error
// is logged any other way than obs.Err / obs.ErrAt: slog.Any with an error,
// an error as a key-value pair's value, or err.Error() in a log call. It
// names each offender by file:line.
func TestLogKeysAreObsConstants(t *testing.T) {
	root := workspaceRoot(t)
	// infra is left out: the construct does not log (its tests only), and
	// type-checking the CDK bindings would cost more than the rest together.
	pkgs, err := packages.Load(&packages.Config{
		Dir:  root,
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
	}, logKeyPatterns...)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	var problems []string
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Errorf("%s: %v", p.PkgPath, e)
		}
		problems = append(problems, checkLogCalls(root, p)...)
	}
	sort.Strings(problems)
	for _, pr := range problems {
		t.Error(pr)
	}
	if len(problems) > 0 {
		t.Logf("%d offenders: a log key is a constant in pkg/obs (add one there), and an error is logged with obs.Err(err) (obs.ErrAt for a second error)", len(problems))
	}
}

// workspaceRoot is the directory of go.work; the test needs the workspace to
// reach the other modules.
func workspaceRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil {
		t.Fatalf("go env GOWORK: %v", err)
	}
	w := strings.TrimSpace(string(out))
	if w == "" || w == "off" {
		if os.Getenv("CI") == "true" {
			t.Fatal("the log-key check needs the workspace (go.work); GOWORK is off")
		}
		t.Skip("no go.work: the log-key check spans the workspace's modules")
	}
	return filepath.Dir(w)
}

// attrFuncs are log/slog's Attr constructors: their first argument is a key.
var attrFuncs = map[string]bool{
	"String": true, "Int": true, "Int64": true, "Uint64": true, "Float64": true,
	"Bool": true, "Time": true, "Duration": true, "Any": true, "Group": true,
}

// logFuncs are log/slog's functions and *slog.Logger's methods that take
// key-value pairs (or Attrs) after a message, mapped to the index of the
// first such argument; -1 marks the message-less With.
var logFuncs = map[string]int{
	"Debug": 1, "Info": 1, "Warn": 1, "Error": 1,
	"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2,
	"Log": 3, "LogAttrs": 3, "With": 0,
}

// logMessage is the index of a log function's message argument.
var logMessage = map[string]int{
	"Debug": 0, "Info": 0, "Warn": 0, "Error": 0,
	"DebugContext": 1, "InfoContext": 1, "WarnContext": 1, "ErrorContext": 1,
	"Log": 2, "LogAttrs": 2, "With": -1,
}

// examplesPath holds the example applications, each a module of its own.
const examplesPath = "github.com/fourlanes/fourlanes/examples/"

// appModule is the application module a package belongs to, or "" for the
// framework's own packages. An application logs its domain's keys (a
// member, a loan) as constants of its own module: pkg/obs holds the
// framework's keys and takes none of a team's.
func appModule(pkgPath string) string {
	rest, ok := strings.CutPrefix(pkgPath, examplesPath)
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return examplesPath + name
}

func checkLogCalls(root string, p *packages.Package) []string {
	var out []string
	errType := types.Universe.Lookup("error").Type().Underlying().(*types.Interface)
	isErr := func(e ast.Expr) bool {
		tv, ok := p.TypesInfo.Types[e]
		return ok && tv.Type != nil && types.Implements(tv.Type, errType)
	}
	for _, f := range p.Syntax {
		name := p.Fset.Position(f.Pos()).Filename
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		report := func(n ast.Node, format string, args ...any) {
			pos := p.Fset.Position(n.Pos())
			rel, err := filepath.Rel(root, pos.Filename)
			if err != nil {
				rel = pos.Filename
			}
			out = append(out, fmt.Sprintf("%s:%d:%d: %s", rel, pos.Line, pos.Column, fmt.Sprintf(format, args...)))
		}
		checkKey := func(k ast.Expr) {
			if lit, ok := k.(*ast.BasicLit); ok {
				report(k, "literal log key %s", lit.Value)
				return
			}
			var id *ast.Ident
			switch x := k.(type) {
			case *ast.Ident:
				id = x
			case *ast.SelectorExpr:
				id = x.Sel
			}
			c, ok := p.TypesInfo.Uses[id].(*types.Const)
			if id == nil || !ok {
				if p.PkgPath != obsPath {
					report(k, "log key %s is not a constant of pkg/obs", types.ExprString(k))
				}
				return
			}
			if c.Pkg().Path() != obsPath && (appModule(p.PkgPath) == "" || appModule(c.Pkg().Path()) != appModule(p.PkgPath)) {
				report(k, "log key %s is a constant of %s, not of pkg/obs", types.ExprString(k), c.Pkg().Path())
			}
		}
		// errorText reports err.Error() on an error anywhere under n.
		errorText := func(n ast.Node) {
			ast.Inspect(n, func(m ast.Node) bool {
				c, ok := m.(*ast.CallExpr)
				if !ok || len(c.Args) != 0 {
					return true
				}
				if s, ok := c.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Error" && isErr(s.X) {
					report(c, "%s logged as text; use obs.Err", types.ExprString(c))
				}
				return true
			})
		}
		inObs := p.PkgPath == obsPath
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if tv, ok := p.TypesInfo.Types[n]; ok && isSlogAttr(tv.Type) {
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if id, ok := kv.Key.(*ast.Ident); ok && id.Name == "Key" {
								checkKey(kv.Value)
							}
						}
					}
				}
			case *ast.CallExpr:
				fn := callee(p.TypesInfo, n)
				if fn == nil || fn.Pkg() == nil {
					return true
				}
				sig := fn.Type().(*types.Signature)
				if fn.Pkg().Path() == obsPath && sig.Params().Len() > 0 && sig.Params().At(0).Name() == "key" && len(n.Args) > 0 {
					checkKey(n.Args[0]) // obs.ErrAt and its kind
					return true
				}
				if fn.Pkg().Path() != "log/slog" {
					return true
				}
				if sig.Recv() == nil && attrFuncs[fn.Name()] {
					if len(n.Args) > 0 {
						checkKey(n.Args[0])
					}
					if len(n.Args) > 1 && !inObs {
						if fn.Name() == "Any" && isErr(n.Args[1]) {
							report(n, "error logged with slog.Any; use obs.Err")
						}
						errorText(n.Args[1])
					}
					return true
				}
				first, ok := logFuncs[fn.Name()]
				if !ok || (sig.Recv() != nil && !isSlogLogger(sig.Recv().Type())) {
					return true
				}
				if m := logMessage[fn.Name()]; m >= 0 && m < len(n.Args) && !inObs {
					errorText(n.Args[m])
				}
				if n.Ellipsis.IsValid() {
					return true // a spread slice: its Attrs are checked where they are made
				}
				args := n.Args[min(first, len(n.Args)):]
				for j := 0; j < len(args); j++ {
					if tv, ok := p.TypesInfo.Types[args[j]]; ok && isSlogAttr(tv.Type) {
						continue
					}
					checkKey(args[j])
					if j+1 < len(args) && !inObs {
						if isErr(args[j+1]) {
							report(args[j+1], "error logged as a key-value pair; use obs.Err")
						}
						errorText(args[j+1])
					}
					j++
				}
			}
			return true
		})
	}
	return out
}

func callee(info *types.Info, c *ast.CallExpr) *types.Func {
	var id *ast.Ident
	switch f := ast.Unparen(c.Fun).(type) {
	case *ast.Ident:
		id = f
	case *ast.SelectorExpr:
		id = f.Sel
	default:
		return nil
	}
	fn, _ := info.Uses[id].(*types.Func)
	return fn
}

func isNamed(t types.Type, pkg, name string) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == pkg && n.Obj().Name() == name
}

func isSlogAttr(t types.Type) bool   { return isNamed(t, "log/slog", "Attr") }
func isSlogLogger(t types.Type) bool { return isNamed(t, "log/slog", "Logger") }

// TestLogKeyCheckFindsEachForm runs the check over testdata/logkeys, which
// holds one call of each refused form marked "// want <what>", and wants
// exactly those reported.
func TestLogKeyCheckFindsEachForm(t *testing.T) {
	workspaceRoot(t)
	pkgs, err := packages.Load(&packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
	}, "./testdata/logkeys")
	if err != nil || len(pkgs) != 1 {
		t.Fatalf("load: %v (%d packages)", err, len(pkgs))
	}
	p := pkgs[0]
	for _, e := range p.Errors {
		t.Fatalf("testdata does not build: %v", e)
	}
	want := map[int]string{} // line → what the report says
	for _, f := range p.Syntax {
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if w, ok := strings.CutPrefix(c.Text, "// want "); ok {
					want[p.Fset.Position(c.Pos()).Line] = w
				}
			}
		}
	}
	got := map[int][]string{}
	for _, pr := range checkLogCalls(".", p) {
		// testdata/logkeys/bad.go:LINE:COL: message
		parts := strings.SplitN(pr, ":", 4)
		var line int
		if _, err := fmt.Sscan(parts[1], &line); err != nil {
			t.Fatalf("report %q: no line", pr)
		}
		got[line] = append(got[line], parts[3])
	}
	for line, w := range want {
		if len(got[line]) != 1 || !strings.Contains(got[line][0], w) {
			t.Errorf("line %d: got %q, want one report containing %q", line, got[line], w)
		}
	}
	for line, g := range got {
		if _, ok := want[line]; !ok {
			t.Errorf("line %d: got %q, want no report", line, g)
		}
	}
}

// TestAppModule: an application's own keys count only inside that
// application; the framework and the other applications still need
// pkg/obs's.
func TestAppModule(t *testing.T) {
	for path, want := range map[string]string{
		"github.com/fourlanes/fourlanes/examples/library/reminders": "github.com/fourlanes/fourlanes/examples/library",
		"github.com/fourlanes/fourlanes/examples/library":           "github.com/fourlanes/fourlanes/examples/library",
		"github.com/fourlanes/fourlanes/examples/orders/orders":     "github.com/fourlanes/fourlanes/examples/orders",
		"github.com/fourlanes/fourlanes/pkg/delivery":               "",
		"github.com/fourlanes/fourlanes/test/relay":                 "",
	} {
		if got := appModule(path); got != want {
			t.Errorf("appModule(%q) = %q, want %q", path, got, want)
		}
	}
}
