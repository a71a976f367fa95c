package relay

import (
	"testing"

	"github.com/fourlanes/fourlanes/pkg/catalog/gate"
)

// TestFollowOnIsAProducer: the catalog gate reads a DURABLE handler's
// follow-on emit (Emitter.Emit) as the producer of its type, as it reads a
// service's Emit, and the relay passes the gate.
func TestFollowOnIsAProducer(t *testing.T) {
	r, err := gate.Run(gate.Config{Dir: ".", Patterns: []string{"."}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	producers := map[string]string{}
	for _, e := range r.Emits {
		producers[e.Type] = e.Func
	}
	if got := producers[TypeTriaged]; got != "relay.(*Triager).OnOpened" {
		t.Errorf("producer of %s: %q, want triage's handler OnOpened (emits read: %+v)", TypeTriaged, got, r.Emits)
	}
	if got := producers[TypeOpened]; got != "relay.(*Desk).Open" {
		t.Errorf("producer of %s: %q, want desk's Open", TypeOpened, got)
	}
}
