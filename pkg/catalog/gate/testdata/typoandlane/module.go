// Package typoandlane is the field bug: a change-feed subscription with a typo
// in the entity and on the wrong lane. It bound, appeared in the catalog and
// never ran. Both checks 3 and 4 catch it.
package typoandlane

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
	Name:   "widgets",
	Emits:  []catalog.EventType{{Name: "widget.made", Versions: []catalog.Version{catalog.V[Made](1)}}},
	Tracks: []catalog.Entity{{Name: "WIDGET", TableEnv: "WIDGETS_TABLE", TenantAttr: "tenant_id", IDAttr: "id", VersionAttr: "version"}},
	Subscribes: []catalog.Subscription[H]{
		{Name: "widgets.feed", Types: "record.written.WIDGTE", Lane: catalog.Local, Reads: []int{1}, Handler: H.On}, // want (3) "did you mean record.written.WIDGET" (4) "LOCAL"
	},
}

// Make emits widget.made.
func (s *Service) Make(ctx context.Context) error {
	_, err := s.Store.Emit(ctx, "widget.made", Made{ID: "w"})
	return err
}
