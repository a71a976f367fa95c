package devcli

import (
	"maps"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestLocalOutputs: -local reads the one backbone's outputs by their names
// in pkg/keys, whatever its prefix; the stack's other outputs stay as they
// are.
func TestLocalOutputs(t *testing.T) {
	for _, tt := range []struct {
		name    string
		outputs map[string]string
		want    map[string]string
	}{
		{"unprefixed", map[string]string{keys.OutputStateTable: "s", keys.OutputEventsTable: "e"},
			map[string]string{keys.OutputStateTable: "s", keys.OutputEventsTable: "e"}},
		{"prefixed", map[string]string{"Backbone" + keys.OutputStateTable: "s", "Backbone" + keys.OutputEventsTable: "e", "ShelfTableName": "shelf"},
			map[string]string{"Backbone" + keys.OutputStateTable: "s", "Backbone" + keys.OutputEventsTable: "e", "ShelfTableName": "shelf",
				keys.OutputStateTable: "s", keys.OutputEventsTable: "e"}},
		{"none", nil, map[string]string{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := localOutputs(tt.outputs); !maps.Equal(got, tt.want) {
				t.Errorf("localOutputs = %v, want %v", got, tt.want)
			}
		})
	}
}
