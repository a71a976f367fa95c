// Package noproducer is a fixture that declares a type nothing emits (check 2).
package noproducer

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
	Name: "widgets",
	Emits: []catalog.EventType{
		{Name: "widget.made", Versions: []catalog.Version{catalog.V[Made](1)}},
		{Name: "widget.melted", Versions: []catalog.Version{catalog.V[Made](1)}}, // want (2) "widget.melted but nothing emits it"
	},
}

// Make emits widget.made.
func (s *Service) Make(ctx context.Context) error {
	_, err := s.Store.Emit(ctx, "widget.made", Made{ID: "w"})
	return err
}
