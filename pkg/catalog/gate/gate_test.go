package gate_test

import (
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

	"github.com/fourlanes/fourlanes/pkg/catalog/gate"
)

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
