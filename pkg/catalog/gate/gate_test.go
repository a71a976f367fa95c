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

// TestStartChanges: the generated catalog records each DURABLE
// subscription's start; checked against a file that records another start,
// the gate names the subscription at its declaration and tells the author
// to keep the start and backfill. The file the gate wrote, or one written
// before starts were recorded, has no change to report.
func TestStartChanges(t *testing.T) {
	r, err := gate.Run(gate.Config{Dir: repoRoot(t), Patterns: []string{"./pkg/catalog/gate/testdata/starts/..."}})
	if err != nil {
		t.Fatal(err)
	}
	md := string(r.Markdown())
	for _, row := range []string{"| `widgets.seq` | widgets | `widget.made` | 1 | `H.On` | `seq:5` |", "| `widgets.live` | widgets | `widget.made` | 1 | `H.On` | `live` |",
		"| `widgets.time` | widgets | `widget.made` | 1 | `H.On` | `time:2026-03-01T00:00:00Z` |", "| `widgets.all` | widgets | `widget.made` | 1 | `H.On` | `all` |"} {
		if !strings.Contains(md, row) {
			t.Errorf("catalog lacks the row %q:\n%s", row, md)
		}
	}
	if vs := r.StartChanges([]byte(md), "CATALOG.md"); len(vs) != 0 {
		t.Errorf("against the catalog it wrote: %v; want no change", vs)
	}
	// What the file recorded before the change: widgets.seq was live, and
	// widgets.live started from all history.
	old := strings.Replace(md, "| `H.On` | `seq:5` |", "| `H.On` | `live` |", 1)
	old = strings.Replace(old, "| `widgets.live` | widgets | `widget.made` | 1 | `H.On` | `live` |", "| `widgets.live` | widgets | `widget.made` | 1 | `H.On` | `all` |", 1)
	vs := r.StartChanges([]byte(old), "CATALOG.md")
	if len(vs) != 2 {
		t.Fatalf("start changes: %v; want widgets.live and widgets.seq", vs)
	}
	for i, want := range []struct{ sub, from, to string }{{"widgets.live", "all", "live"}, {"widgets.seq", "live", "seq:5"}} {
		v := vs[i]
		if v.Check != 6 || !strings.HasSuffix(v.Pos.Filename, "testdata/starts/module.go") || v.Pos.Line == 0 ||
			!strings.Contains(v.Msg, "subscription "+want.sub+": Start changed from "+want.from+" (as CATALOG.md records it) to "+want.to) ||
			!strings.Contains(v.Msg, "fourlanes backfill -subscription "+want.sub) {
			t.Errorf("violation %d: %v; want check 6 at %s's declaration, from %s to %s, telling the author to backfill", i, v, want.sub, want.from, want.to)
		}
	}
	// A catalog written before starts were recorded: nothing to compare.
	noStarts := strings.ReplaceAll(old, " start |", " |")
	if vs := r.StartChanges([]byte(noStarts), "CATALOG.md"); len(vs) != 0 {
		t.Errorf("against a catalog without starts: %v; want none", vs)
	}
}

// TestStartsRecorded: with a schemas folder, the gate records each DURABLE
// subscription's start in starts.json (written with WriteSchemas, a
// violation while missing or stale), and a start that differs from the
// recorded one is a violation at the subscription's declaration telling the
// author to backfill, which WriteSchemas never rewrites.
func TestStartsRecorded(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	file := filepath.Join(dir, gate.StartsFile)
	run := func(write bool) []gate.Violation {
		t.Helper()
		r, err := gate.Run(gate.Config{Dir: root, Patterns: []string{"./pkg/catalog/gate/testdata/starts/..."}, Schemas: dir, WriteSchemas: write})
		if err != nil {
			t.Fatal(err)
		}
		var out []gate.Violation
		for _, v := range r.Violations {
			if v.Check == 6 {
				out = append(out, v)
			}
		}
		return out
	}
	if vs := run(false); len(vs) != 1 || !strings.Contains(vs[0].Msg, "no recorded starts") || !strings.Contains(vs[0].Msg, "-write-schemas") {
		t.Fatalf("without starts.json: %v; want one violation asking to write it", vs)
	}
	if vs := run(true); len(vs) != 0 {
		t.Fatalf("writing starts.json: %v", vs)
	}
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), `"widgets.seq": "seq:5"`) || !strings.Contains(string(b), `"widgets.time": "time:2026-03-01T00:00:00Z"`) ||
		strings.Contains(string(b), "widgets.local") {
		t.Fatalf("starts.json: %s (%v); want the DURABLE subscriptions' starts only", b, err)
	}
	if vs := run(false); len(vs) != 0 {
		t.Fatalf("against the starts it wrote: %v; want none", vs)
	}

	// The file recorded widgets.seq as live: its Start was edited since.
	edited := strings.Replace(string(b), `"widgets.seq": "seq:5"`, `"widgets.seq": "live"`, 1)
	if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, write := range []bool{false, true} {
		vs := run(write)
		if len(vs) != 1 || !strings.HasSuffix(vs[0].Pos.Filename, "testdata/starts/module.go") || vs[0].Pos.Line == 0 ||
			!strings.Contains(vs[0].Msg, "subscription widgets.seq: Start changed from live") || !strings.Contains(vs[0].Msg, "to seq:5") ||
			!strings.Contains(vs[0].Msg, "fourlanes backfill -subscription widgets.seq") {
			t.Errorf("a changed start (write %v): %v; want one violation at widgets.seq's declaration telling the author to backfill", write, vs)
		}
		if got, _ := os.ReadFile(file); string(got) != edited {
			t.Errorf("a changed start (write %v) rewrote starts.json:\n%s", write, got)
		}
	}

	// A subscription added since the file was written: stale until written.
	if err := os.WriteFile(file, []byte(strings.Replace(string(b), `    "widgets.all": "all",`+"\n", "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if vs := run(false); len(vs) != 1 || !strings.Contains(vs[0].Msg, "is stale (declared since: widgets.all)") {
		t.Errorf("a subscription added: %v; want starts.json stale naming widgets.all", vs)
	}
	if vs := run(true); len(vs) != 0 {
		t.Errorf("recording the added subscription: %v", vs)
	}
	if got, _ := os.ReadFile(file); string(got) != string(b) {
		t.Errorf("after recording the added subscription: %s; want %s", got, b)
	}
}

// TestOwnersInCatalog: the generated catalog lists who is paged for what,
// read from the declarations: a module's Owner covers its subscriptions, a
// subscription's own Owner is listed beside it.
func TestOwnersInCatalog(t *testing.T) {
	r, err := gate.Run(gate.Config{Dir: repoRoot(t), Patterns: []string{"./pkg/catalog/gate/testdata/starts/..."}})
	if err != nil {
		t.Fatal(err)
	}
	md := string(r.Markdown())
	for _, want := range []string{"## Owners", "| team-audit | `widgets.all` DURABLE |", "| team-widgets | module widgets |"} {
		if !strings.Contains(md, want) {
			t.Errorf("catalog lacks %q:\n%s", want, md)
		}
	}
	for _, m := range r.Modules {
		for _, s := range m.Spec.Subscribes {
			want := "team-widgets"
			if s.Name == "widgets.all" {
				want = "team-audit"
			}
			if s.Owner != want {
				t.Errorf("subscription %s read from source with owner %q, want %q", s.Name, s.Owner, want)
			}
		}
	}
}
