// Package emitwith is a fixture that emits with EmitWith (a shard key, an
// idempotency key): the gate reads the literal's Type as it reads Emit's
// type, and refuses what it cannot read (check 1).
package emitwith

import (
	"context"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
)

// Made is the payload of widget.made.
type Made struct {
	ID string `json:"id"`
}

// Service emits.
type Service struct{ Store *eventstore.Store }

// Module is the fixture's declaration: widget.made is emitted only through
// EmitWith, so the gate must see that emit (else check 2 would fire).
var Module = catalog.Module[catalog.NoHandlers]{
	Name:  "widgets",
	Emits: []catalog.EventType{{Name: "widget.made", Versions: []catalog.Version{catalog.V[Made](1)}}},
}

// Make emits widget.made on the widget's chain shard.
func (s *Service) Make(ctx context.Context, id string) error {
	_, err := s.Store.EmitWith(ctx, eventstore.EmitInput{Type: "widget.made", Payload: Made{ID: id}, ShardKey: id})
	return err
}

// Explode emits a type nobody declared.
func (s *Service) Explode(ctx context.Context, id string) error {
	_, err := s.Store.EmitWith(ctx, eventstore.EmitInput{Type: "widget.exploded", Payload: Made{ID: id}, ShardKey: id}) // want (1) "widget.exploded"
	return err
}

// Any emits whatever type it is told.
func (s *Service) Any(ctx context.Context, t string) error {
	_, err := s.Store.EmitWith(ctx, eventstore.EmitInput{Type: t, Payload: Made{ID: "w"}}) // want (1) "not a constant"
	return err
}

// Built emits an input built elsewhere.
func (s *Service) Built(ctx context.Context, in eventstore.EmitInput) error {
	_, err := s.Store.EmitWith(ctx, in) // want (1) "not an eventstore.EmitInput literal"
	return err
}

// Untyped forgets the type.
func (s *Service) Untyped(ctx context.Context) error {
	_, err := s.Store.EmitWith(ctx, eventstore.EmitInput{Payload: Made{ID: "w"}}) // want (1) "has no Type"
	return err
}
