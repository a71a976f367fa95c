// Package beta is the other half: module beta emits alpha's type (check 1).
package beta

import (
	"context"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/catalog/gate/testdata/foreign/alpha"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
)

// Module is beta's declaration.
var Module = catalog.Module[catalog.NoHandlers]{Name: "beta"}

// Meddle emits another module's event.
func Meddle(ctx context.Context, s *eventstore.Store) error {
	_, err := s.Emit(ctx, alpha.TypeDone, alpha.Done{ID: "b"}) // want (1) "module beta emits \"alpha.done\", which module alpha declares"
	return err
}
