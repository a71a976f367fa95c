// Package nonconst is a fixture that emits a type the gate cannot read (check 1).
package nonconst

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
var Module = catalog.Module[catalog.NoHandlers]{
	Name:  "widgets",
	Emits: []catalog.EventType{{Name: "widget.made", Versions: []catalog.Version{catalog.V[Made](1)}}},
}

// Make emits widget.made.
func (s *Service) Make(ctx context.Context) error {
	_, err := s.Store.Emit(ctx, "widget.made", Made{ID: "w"})
	return err
}

// Any emits whatever it is told.
func (s *Service) Any(ctx context.Context, t string) error {
	_, err := s.Store.Emit(ctx, t, Made{ID: "w"}) // want (1) "not a constant"
	return err
}
