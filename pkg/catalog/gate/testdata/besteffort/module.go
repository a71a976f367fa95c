// Package besteffort is a fixture with a domain-event subscriber on BEST_EFFORT (check 4).
package besteffort

import (
	"context"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
)

// Made is the payload of widget.made.
type Made struct {
	ID string `json:"id"`
}

// H handles subscriptions.
type H struct{}

// On handles an event.
func (H) On(context.Context, envelope.Envelope) error { return nil }

// Service emits.
type Service struct{ Store *eventstore.Store }

// Module is the fixture's declaration.
var Module = catalog.Module[H]{
	Name:  "widgets",
	Emits: []catalog.EventType{{Name: "widget.made", Versions: []catalog.Version{catalog.V[Made](1)}}},
	Subscribes: []catalog.Subscription[H]{
		{Name: "widgets.react", Types: "widget.*", Lane: catalog.BestEffort, Reads: []int{1}, Handler: H.On}, // want (4) "is on BEST_EFFORT"
	},
}

// Make emits widget.made.
func (s *Service) Make(ctx context.Context) error {
	_, err := s.Store.Emit(ctx, "widget.made", Made{ID: "w"})
	return err
}
