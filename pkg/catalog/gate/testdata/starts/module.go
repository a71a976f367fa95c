// Package starts is a fixture of subscription starts: the forms the gate
// reads, a start on a lane without one, a seq below 1, and a start it
// cannot read.
package starts

import (
	"context"
	"time"

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

var since = catalog.FromSeq(3)

// Module is the fixture's declaration.
var Module = catalog.Module[H]{
	Name:  "widgets",
	Owner: "team-widgets",
	Emits: []catalog.EventType{{Name: "widget.made", Versions: []catalog.Version{catalog.V[Made](1)}}},
	Subscribes: []catalog.Subscription[H]{
		{Name: "widgets.live", Types: "widget.made", Lane: catalog.Durable, Reads: []int{1}, Handler: H.On, Start: catalog.Start{}},
		{Name: "widgets.seq", Types: "widget.made", Lane: catalog.Durable, Reads: []int{1}, Handler: H.On, Start: catalog.FromSeq(5)},
		{Name: "widgets.time", Types: "widget.made", Lane: catalog.Durable, Reads: []int{1}, Handler: H.On,
			Start: catalog.FromTime(time.Date(2026, time.March, 1, 0, 0, 0, 0, time.UTC))},
		{Name: "widgets.all", Types: "widget.made", Lane: catalog.Durable, Reads: []int{1}, Handler: H.On, Start: catalog.FromAll(), Owner: "team-audit"},
		{Name: "widgets.local", Types: "widget.made", Lane: catalog.Local, Reads: []int{1}, Handler: H.On, Start: catalog.FromAll()},   // want (0) "only DURABLE subscriptions have a start"
		{Name: "widgets.zero", Types: "widget.made", Lane: catalog.Durable, Reads: []int{1}, Handler: H.On, Start: catalog.FromSeq(0)}, // want (0) "seqs begin at 1"
		{Name: "widgets.var", Types: "widget.made", Lane: catalog.Durable, Reads: []int{1}, Handler: H.On, Start: since},               // want (0) "Subscription.Start since is not a form the gate can read"
	},
}

// Make emits widget.made.
func (s *Service) Make(ctx context.Context) error {
	_, err := s.Store.Emit(ctx, "widget.made", Made{ID: "w"})
	return err
}
