// Package next is the relay's next release, built beside it to test deploy
// order: desk's ticket.opened gains schema version 2 (a reporter), and
// triage reads both versions. A producer built from it may be deployed
// before the backbone is; the suite's TestDeployInAnyOrder runs the relay's
// backbone (package relay's functions) with this build's producer, then
// redeploys the backbone with this build's functions (next/functions).
package next

import (
	"context"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/test/relay"
)

// OpenedV2 is ticket.opened schema version 2: who reported it.
type OpenedV2 struct {
	Ticket   string `json:"ticket"`
	Title    string `json:"title"`
	Reporter string `json:"reporter"`
}

// Desk is desk's service in this release: it names the reporter.
type Desk struct{ Events *eventstore.Store }

// Open emits ticket.opened v2 for the tenant bound to ctx.
func (d *Desk) Open(ctx context.Context, ticket, title, reporter string) (envelope.Envelope, error) {
	return d.Events.Emit(ctx, relay.TypeOpened, OpenedV2{Ticket: ticket, Title: title, Reporter: reporter})
}

// DeskModule declares desk with ticket.opened v2 (what it now emits).
var DeskModule = catalog.Module[catalog.NoHandlers]{
	Name: "desk",
	Doc:  "Opens tickets, naming who reported them.",
	Emits: []catalog.EventType{{Name: relay.TypeOpened, Doc: "A ticket was opened.",
		Versions: []catalog.Version{catalog.V[relay.OpenedV1](1), catalog.V[OpenedV2](2)}}},
}

// TriageModule declares triage reading ticket.opened v1 and v2 (its
// handler decodes both into relay.OpenedV1: v2 only adds a member).
var TriageModule = catalog.Module[*relay.Triager]{
	Name:  "triage",
	Doc:   "Triages tickets.",
	Emits: relay.TriageModule.Emits,
	Subscribes: []catalog.Subscription[*relay.Triager]{
		{Name: relay.SubTriage, Types: relay.TypeOpened, Lane: catalog.Durable, Reads: []int{1, 2},
			Doc: "Records the triage and announces it, in one transaction.", Handler: (*relay.Triager).OnOpened},
		{Name: relay.SubTally, Types: relay.TypeTriaged, Lane: catalog.Local, Reads: []int{1},
			Doc: "Tallies each triaged ticket where it was emitted.", Handler: (*relay.Triager).OnTriaged},
	},
}

// App is the relay's next release.
var App = app.Application{
	Name: "relay",
	Modules: []app.Module{
		app.Declare(DeskModule),
		app.Bind(TriageModule, func(rt app.Runtime) (*relay.Triager, error) {
			return &relay.Triager{StateTable: rt.StateTable, Logger: rt.Logger}, nil
		}),
		relay.App.Modules[2], // pager, unchanged
	},
}
