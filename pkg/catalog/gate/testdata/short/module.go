// Package short is a fixture of the short forms: an event type as
// catalog.Event[T](name, doc), which the gate reads as version 1 of T, and
// a change-feed subscription without a Lane, which is BEST_EFFORT; and of
// what the gate refuses in them.
package short

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

// Chan has a field JSON cannot carry.
type Chan struct {
	C chan int `json:"c"`
}

// H handles subscriptions.
type H struct{}

// On handles an event.
func (H) On(context.Context, envelope.Envelope) error { return nil }

// Service emits.
type Service struct{ Store *eventstore.Store }

var name = "widget.lost"

// event is not catalog.Event.
func event(name string) catalog.EventType { return catalog.EventType{Name: name} }

// Module is the fixture's declaration.
var Module = catalog.Module[H]{
	Name: "widgets",
	Emits: []catalog.EventType{
		catalog.Event[Made]("widget.made", "A widget was made."),
		catalog.Event[Chan]("widget.broken", "A widget broke."), // want (5) "widget.broken v1: payload short.Chan has no JSON Schema: field c: has Go type chan int"
		catalog.Event[Made](name, "Lost."),                      // want (0) "Event.Name must be a constant"
		event("widget.other"),                                   // want (0) "catalog.Event[Payload](name, doc)"
	},
	Tracks: []catalog.Entity{{Name: "WIDGET", TableEnv: "WIDGETS_TABLE", TenantAttr: "tenant_id", IDAttr: "id", VersionAttr: "version"}},
	Subscribes: []catalog.Subscription[H]{
		{Name: "widgets.react", Types: "widget.made", Lane: catalog.Durable, Reads: []int{1}, Handler: H.On},
		{Name: "widgets.feed", Types: "record.*.WIDGET", Reads: []int{1}, Handler: H.On},                    // BEST_EFFORT without saying
		{Name: "widgets.unsaid", Types: "widget.made", Reads: []int{1}, Handler: H.On},                      // want (0) "has no lane; set Lane: catalog.Durable"
		{Name: "widgets.v2", Types: "widget.broken", Lane: catalog.Durable, Reads: []int{2}, Handler: H.On}, // want (0) "reads schema versions [2], which none of the types it matches (widget.broken) declares"
	},
}

// Make emits both types.
func (s *Service) Make(ctx context.Context) error {
	if _, err := s.Store.Emit(ctx, "widget.made", Made{ID: "w"}); err != nil {
		return err
	}
	_, err := s.Store.Emit(ctx, "widget.broken", Chan{})
	return err
}
