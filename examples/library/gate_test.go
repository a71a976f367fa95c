package library

import (
	"flag"
	"slices"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/catalog/gate"
)

var update = flag.Bool("update", false, "write the schemas that are missing or changed compatibly (make catalog)")

// TestLibraryPassesTheGate runs the catalog gate on the library's packages
// alone: its declarations match its code, every declared type has a
// producer, each version's payload still fits its published schema in
// schemas/, and the modules the gate reads in the source are those of
// library.App, declared identically.
func TestLibraryPassesTheGate(t *testing.T) {
	r, err := gate.Run(gate.Config{Dir: ".", Patterns: []string{"./..."}, Schemas: "schemas", WriteSchemas: *update})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("%v\n(make catalog writes the library's schemas/; it never rewrites a schema incompatibly)", err)
	}
	var emitted []string
	for _, e := range r.Emits {
		emitted = append(emitted, e.Type)
	}
	slices.Sort(emitted)
	if want := []string{"loan.opened", "loan.returned"}; !slices.Equal(emitted, want) {
		t.Errorf("emits read: got %v, want %v", emitted, want)
	}
	specs := make([]catalog.Spec, len(App.Modules))
	for i, m := range App.Modules {
		specs[i] = m.Spec
	}
	for _, p := range r.Unregistered("", specs) { // the gate ran on the library's folder alone
		t.Error(p)
	}
}
