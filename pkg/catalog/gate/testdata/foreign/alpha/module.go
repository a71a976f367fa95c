// Package alpha is half of a fixture: it declares and emits alpha.done.
package alpha

import (
	"context"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
)

// Done is the payload of alpha.done.
type Done struct {
	ID string `json:"id"`
}

// TypeDone is alpha's event type.
const TypeDone = "alpha.done"

// Module is alpha's declaration.
var Module = catalog.Module[catalog.NoHandlers]{
	Name:  "alpha",
	Emits: []catalog.EventType{{Name: TypeDone, Versions: []catalog.Version{catalog.V[Done](1)}}},
}

// Finish emits alpha.done.
func Finish(ctx context.Context, s *eventstore.Store) error {
	_, err := s.Emit(ctx, TypeDone, Done{ID: "a"})
	return err
}
