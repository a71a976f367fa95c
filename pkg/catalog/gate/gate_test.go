package gate_test

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/catalog/gate"
)

var update = flag.Bool("update", false, "rewrite CATALOG.md at the repository root")

// repoRoot finds the module root above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = parent
	}
}

// touchTree lists every source directory, so `go test`'s cache notices a new
// file or package anywhere in the repository (the gate reads the whole tree
// through go list, which the test cache cannot see).
func touchTree(t *testing.T, root string) {
	t.Helper()
	skip := map[string]bool{".git": true, ".cache": true, "node_modules": true, "cdk.out": true, "build": true, "testdata": false}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skip[d.Name()] && p != root {
				return filepath.SkipDir
			}
			_, err := os.ReadDir(p)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

var repoReport *gate.Report

func runRepo(t *testing.T) *gate.Report {
	t.Helper()
	if repoReport != nil {
		return repoReport
	}
	root := repoRoot(t)
	touchTree(t, root)
	r, err := gate.Run(gate.Config{Dir: root, Patterns: []string{"./..."}, Allow: gate.Allowlist})
	if err != nil {
		t.Fatal(err)
	}
	repoReport = r
	return r
}

// TestRepositoryPassesTheGate runs the four checks over this repository.
func TestRepositoryPassesTheGate(t *testing.T) {
	r := runRepo(t)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if len(r.Modules) == 0 || len(r.Emits) == 0 {
		t.Fatalf("read %d modules and %d emits from the repository; the gate is reading nothing", len(r.Modules), len(r.Emits))
	}
}

// TestSourceMatchesTheApplicationCatalog: every module declared in the
// example's source is in its runtime catalog, declared identically. A module
// written but left out of example.Specs (never registered) fails here.
func TestSourceMatchesTheApplicationCatalog(t *testing.T) {
	r := runRepo(t)
	for _, p := range r.Unregistered("github.com/fourlanes/fourlanes/examples/orders/", example.Specs()) {
		t.Error(p)
	}
}

// TestUnregisteredNamesEachProblem: a declared module the application does
// not register, one it registers differently, and one it registers that no
// source declares each give a problem naming it.
func TestUnregisteredNamesEachProblem(t *testing.T) {
	r := runRepo(t)
	specs := example.Specs()
	dropped := specs[0].Name
	changed := specs[1]
	changed.Tracks = append(slices.Clone(changed.Tracks), catalog.Entity{Name: "GHOST", TableEnv: "GHOST_TABLE"})
	ghost := catalog.Spec{Name: "ghost"}
	got := r.Unregistered("github.com/fourlanes/fourlanes/examples/orders/", append([]catalog.Spec{changed, ghost}, specs[2:]...))
	want := []string{
		"module " + dropped + " is declared but not registered",
		"module " + changed.Name + ": the source declares",
		"module ghost is registered but declared nowhere",
	}
	if len(got) != len(want) {
		t.Fatalf("problems: got %d, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, w) }) {
			t.Errorf("no problem says %q:\n%s", w, strings.Join(got, "\n"))
		}
	}
}

// TestCatalogUpToDate is the drift check of CATALOG.md; -update rewrites it.
func TestCatalogUpToDate(t *testing.T) {
	r := runRepo(t)
	path := filepath.Join(repoRoot(t), "CATALOG.md")
	got := withoutLibrary(r).Markdown()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read CATALOG.md: %v; generate it with `%s`", err, gate.UpdateCommand)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("CATALOG.md is stale; regenerate it with `%s` (make catalog).\nfirst difference:\n%s", gate.UpdateCommand, firstDiff(string(want), string(got)))
	}
}

// withoutLibrary is r without the library application (examples/library):
// CATALOG.md is the orders example's catalog, and the library runs the gate
// on its own packages (examples/library/gate_test.go).
func withoutLibrary(r *gate.Report) *gate.Report {
	const library = "github.com/fourlanes/fourlanes/examples/library"
	out := *r
	out.Modules, out.Emits = nil, nil
	for _, m := range r.Modules {
		if !strings.HasPrefix(m.Pkg, library) {
			out.Modules = append(out.Modules, m)
		}
	}
	for _, e := range r.Emits {
		if !strings.HasPrefix(e.Pkg, library) {
			out.Emits = append(out.Emits, e)
		}
	}
	return &out
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d\n  checked in: %s\n  generated:  %s", i+1, x, y)
		}
	}
	return "(none)"
}

// wantRe reads `// want (N) "substring"` markers in fixtures.
var wantRe = regexp.MustCompile(`\((\d)\) "((?:[^"\\]|\\.)*)"`)

type want struct {
	file  string // relative to the repository root
	line  int
	check int
	text  string
}

func fixtureWants(t *testing.T, dir string) []want {
	t.Helper()
	var out []want
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".go") {
			files = append(files, p)
		}
		return err
	})
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			_, marker, ok := strings.Cut(line, "// want ")
			if !ok {
				continue
			}
			for _, m := range wantRe.FindAllStringSubmatch(marker, -1) {
				c, _ := strconv.Atoi(m[1])
				text, err := strconv.Unquote(`"` + m[2] + `"`)
				if err != nil {
					t.Fatalf("%s:%d: bad want marker: %v", f, i+1, err)
				}
				out = append(out, want{file: "pkg/catalog/gate/" + filepath.ToSlash(f), line: i + 1, check: c, text: text})
			}
		}
	}
	return out
}

// TestFixturesFailTheGate: each fixture under testdata violates one check;
// the gate reports exactly the marked violations, at the marked file:line.
func TestFixturesFailTheGate(t *testing.T) {
	root := repoRoot(t)
	dirs, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		t.Run(d.Name(), func(t *testing.T) {
			t.Parallel()
			rel := "./pkg/catalog/gate/testdata/" + d.Name() + "/..."
			r, err := gate.Run(gate.Config{Dir: root, Patterns: []string{rel}})
			if err != nil {
				t.Fatal(err)
			}
			wants := fixtureWants(t, filepath.Join("testdata", d.Name()))
			var got []string
			for _, v := range r.Violations {
				got = append(got, v.String())
			}
			for _, w := range wants {
				prefix := fmt.Sprintf("%s:%d:", w.file, w.line)
				found := slices.ContainsFunc(r.Violations, func(v gate.Violation) bool {
					return strings.HasPrefix(v.String(), prefix) && v.Check == w.check && strings.Contains(v.Msg, w.text)
				})
				if !found {
					t.Errorf("want (%d) %q at %s; got:\n%s", w.check, w.text, prefix, strings.Join(got, "\n"))
				}
			}
			if len(r.Violations) != len(wants) {
				t.Errorf("got %d violations, want %d:\n%s", len(r.Violations), len(wants), strings.Join(got, "\n"))
			}
			if d.Name() != "clean" && len(wants) == 0 {
				t.Error("fixture has no // want markers")
			}
			if err := r.Err(); (err != nil) != (len(wants) > 0) {
				t.Errorf("Err: %v", err)
			}
		})
	}
}

func TestAllowlist(t *testing.T) {
	root := repoRoot(t)
	rel := "./pkg/catalog/gate/testdata/noproducer"
	for _, tc := range []struct {
		name  string
		allow []gate.Allowed
		want  []string
	}{
		{"with a reason", []gate.Allowed{{Type: "widget.melted", Reason: "emitted by the v2 importer, not yet merged (#42)"}}, nil},
		{"without a reason", []gate.Allowed{{Type: "widget.melted"}}, []string{"has no reason", "nothing emits it"}},
		{"stale entry", []gate.Allowed{{Type: "widget.melted", Reason: "r"}, {Type: "widget.made", Reason: "r"}}, []string{"widget.made now has a producer"}},
		{"undeclared entry", []gate.Allowed{{Type: "widget.melted", Reason: "r"}, {Type: "widget.gone", Reason: "r"}}, []string{"names no declared type"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := gate.Run(gate.Config{Dir: root, Patterns: []string{rel}, Allow: tc.allow})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range r.Violations {
				got = append(got, v.String())
			}
			sort.Strings(got)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d violations, want %d: %v", len(got), len(tc.want), got)
			}
			for _, w := range tc.want {
				if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, w) }) {
					t.Errorf("want a violation containing %q; got %v", w, got)
				}
			}
		})
	}
}
