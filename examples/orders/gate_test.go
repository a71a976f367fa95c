package example_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	example "github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/catalog/gate"
)

var update = flag.Bool("update", false, "rewrite CATALOG.md and the schemas that changed compatibly (make catalog)")

var ordersGate *gate.Report

// runGate runs the catalog gate on the example's own packages, once.
func runGate(t *testing.T) *gate.Report {
	t.Helper()
	if ordersGate != nil {
		return ordersGate
	}
	r, err := gate.Run(gate.Config{Dir: ".", Patterns: []string{"./..."}, Allow: gate.Allowlist, Schemas: "schemas", WriteSchemas: *update})
	if err != nil {
		t.Fatal(err)
	}
	ordersGate = r
	return r
}

// TestOrdersPassesTheGate runs the gate's checks over the example's
// packages, the published schemas in schemas/ included.
func TestOrdersPassesTheGate(t *testing.T) {
	r := runGate(t)
	if err := r.Err(); err != nil {
		t.Fatalf("%v\n(make catalog regenerates the example's CATALOG.md and schemas/; it never rewrites a schema incompatibly)", err)
	}
	if len(r.Modules) == 0 || len(r.Emits) == 0 {
		t.Fatalf("read %d modules and %d emits; the gate is reading nothing", len(r.Modules), len(r.Emits))
	}
}

// TestSourceMatchesTheApplicationCatalog: every module declared in the
// example's source is in its runtime catalog, declared identically. A module
// written but left out of example.Specs (never registered) fails here.
func TestSourceMatchesTheApplicationCatalog(t *testing.T) {
	for _, p := range runGate(t).Unregistered("", example.Specs()) {
		t.Error(p)
	}
}

// TestUnregisteredNamesEachProblem: a declared module the application does
// not register, one it registers differently, and one it registers that no
// source declares each give a problem naming it.
func TestUnregisteredNamesEachProblem(t *testing.T) {
	r := runGate(t)
	specs := example.Specs()
	dropped := specs[0].Name
	changed := specs[1]
	changed.Tracks = append(slices.Clone(changed.Tracks), catalog.Entity{Name: "GHOST", TableEnv: "GHOST_TABLE"})
	ghost := catalog.Spec{Name: "ghost"}
	got := r.Unregistered("", append([]catalog.Spec{changed, ghost}, specs[2:]...))
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

// TestCatalogUpToDate is the drift check of CATALOG.md; -update rewrites it
// (make catalog).
func TestCatalogUpToDate(t *testing.T) {
	got := runGate(t).Markdown()
	if *update {
		if err := os.WriteFile("CATALOG.md", got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("CATALOG.md")
	if err != nil {
		t.Fatalf("read CATALOG.md: %v; generate it with make catalog", err)
	}
	for _, v := range runGate(t).StartChanges(want, "CATALOG.md") {
		t.Error(v)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("CATALOG.md is stale; regenerate it with make catalog.\nfirst difference:\n%s", firstDiff(string(want), string(got)))
	}
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
