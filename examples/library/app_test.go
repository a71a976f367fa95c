package library

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/examples/library/loans"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestApp: the library's application value is valid, tracks LOAN from the
// loans table, and binds reminders (DURABLE) and shelf (BEST_EFFORT) with
// the shelf table as shelf's only environment.
func TestApp(t *testing.T) {
	if err := App.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	cat, err := App.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	e, ok := cat.Entity(loans.Entity)
	if !ok || e.TableEnv != loans.EnvTable {
		t.Errorf("entity %s: %+v (found %v), want TableEnv %s", loans.Entity, e, ok, loans.EnvTable)
	}
	for _, tt := range []struct {
		lane catalog.Lane
		want []string
	}{{catalog.Durable, []string{"reminders", keys.HeartbeatModule}}, {catalog.BestEffort, []string{"shelf"}}} {
		var got []string
		for _, m := range App.Runs(tt.lane) {
			got = append(got, m.Spec.Name)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("modules on %s: got %v, want %v", tt.lane, got, tt.want)
		}
	}
	if got, want := App.Env(catalog.Durable, catalog.BestEffort), []string{"LIBRARY_SHELF_TABLE"}; !slices.Equal(got, want) {
		t.Errorf("Env: got %v, want %v", got, want)
	}
}

// TestImportsOnlyTheFramework: nothing the library's modules and function
// mains are built from is of the orders example (examples/orders, or another
// application under examples/), and no library package imports it.
func TestImportsOnlyTheFramework(t *testing.T) {
	list := func(args ...string) []string {
		t.Helper()
		out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
		if err != nil {
			t.Fatalf("go list %v: %v", args, err)
		}
		return strings.Fields(string(out))
	}
	pkgs := list("./...")
	if len(pkgs) < 10 {
		t.Fatalf("go list ./...: %d packages, want the library's 10 or more", len(pkgs))
	}
	deps := list(append([]string{"-deps", "-test"}, pkgs...)...)
	imports := list(append([]string{"-f", `{{join .Imports " "}} {{join .TestImports " "}}`}, pkgs...)...)
	for _, p := range slices.Concat(deps, imports) {
		if strings.HasPrefix(p, "github.com/fourlanes/fourlanes/examples/orders") {
			t.Errorf("the library depends on %s", p)
		}
	}
}
