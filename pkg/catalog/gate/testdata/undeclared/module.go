// Package undeclared is a fixture that emits a type no module declares (check 1).
package undeclared

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

// Make emits widget.made, and a type nobody declared.
func (s *Service) Make(ctx context.Context) error {
	if _, err := s.Store.Emit(ctx, "widget.made", Made{ID: "w"}); err != nil {
		return err
	}
	_, err := s.Store.Emit(ctx, "widget.exploded", Made{ID: "w"}) // want (1) "widget.exploded"
	return err
}
