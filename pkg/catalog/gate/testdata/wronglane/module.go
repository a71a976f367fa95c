// Package wronglane is a fixture with a change-feed subscriber on LOCAL (check 4).
package wronglane

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
		{Name: "widgets.feed", Types: "record.*.WIDGET", Lane: catalog.Local, Reads: []int{1}, Handler: H.On}, // want (4) "on LOCAL it would never receive them"
	},
}

// Make emits widget.made.
func (s *Service) Make(ctx context.Context) error {
	_, err := s.Store.Emit(ctx, "widget.made", Made{ID: "w"})
	return err
}
