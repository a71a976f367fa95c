package library

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/catalog/gate"
)

// TestLibraryPassesTheGate runs the catalog gate on the library's packages
// alone: its declarations match its code, every declared type has a
// producer, and the modules the gate reads in the source are those of
// library.App, declared identically.
func TestLibraryPassesTheGate(t *testing.T) {
	r, err := gate.Run(gate.Config{Dir: ".", Patterns: []string{"./..."}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	var emitted []string
	for _, e := range r.Emits {
		emitted = append(emitted, e.Type)
	}
	slices.Sort(emitted)
	if want := []string{"loan.opened", "loan.returned"}; !slices.Equal(emitted, want) {
		t.Errorf("emits read: got %v, want %v", emitted, want)
	}
	runtime := map[string]catalog.Spec{}
	for _, m := range App.Modules {
		runtime[m.Spec.Name] = m.Spec
	}
	if len(r.Modules) != len(runtime) {
		t.Errorf("the source declares %d modules, library.App has %d", len(r.Modules), len(runtime))
	}
	for _, m := range r.Modules {
		rt, ok := runtime[m.Spec.Name]
		if !ok {
			t.Errorf("%s:%d: module %s is declared but not in library.App", m.Pos.Filename, m.Pos.Line, m.Spec.Name)
			continue
		}
		if got, want := summary(m.Spec), summary(rt); got != want {
			t.Errorf("module %s: source says\n%s\nlibrary.App says\n%s", m.Spec.Name, got, want)
		}
	}
}

func summary(s catalog.Spec) string {
	var b strings.Builder
	for _, t := range s.Emits {
		var vs []int
		for _, v := range t.Versions {
			vs = append(vs, v.Schema)
		}
		fmt.Fprintf(&b, "emits %s %v\n", t.Name, vs)
	}
	for _, e := range s.Tracks {
		fmt.Fprintf(&b, "tracks %s %s/%s/%s/%s\n", e.Name, e.TableEnv, e.TenantAttr, e.IDAttr, e.VersionAttr)
	}
	for _, x := range s.Subscribes {
		fmt.Fprintf(&b, "sub %s %s %s %v\n", x.Name, x.Types, x.Lane, x.Reads)
	}
	return b.String()
}
