// Package relay is the end-to-end suite's choreography: three modules, each
// reacting to the one before it, A → B → C.
//
//	desk    emits ticket.opened (the test is its service)
//	triage  DURABLE on ticket.opened: writes its own row (the state table,
//	        under triage#) and emits ticket.triaged in the same transaction,
//	        a follow-on event (eventstore.EmitterFrom); LOCAL on
//	        ticket.triaged: tallies it in the process that emitted it
//	pager   DURABLE on ticket.triaged: pages once per ticket (an effect),
//	        naming the event that caused it
//
// Each handler logs one line per run, so the suite counts what ran where.
package relay

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// Event types and subscriptions.
const (
	TypeOpened  = "ticket.opened"
	TypeTriaged = "ticket.triaged"
	SubTriage   = "triage.ticket"
	SubTally    = "triage.tally"
	SubPage     = "pager.page"
	EffectPage  = "page"
)

// Lines the handlers log, one per run.
const (
	LineTriaged = "ticket triaged"
	LineTallied = "triaged ticket tallied"
	LinePaged   = "page sent"
)

// OpenedV1 is ticket.opened schema version 1.
type OpenedV1 struct {
	Ticket string `json:"ticket"`
	Title  string `json:"title"`
}

// TriagedV1 is ticket.triaged schema version 1.
type TriagedV1 struct {
	Ticket   string `json:"ticket"`
	Priority string `json:"priority"`
}

// Desk is desk's service: it opens tickets.
type Desk struct{ Events *eventstore.Store }

// Open emits ticket.opened for the tenant bound to ctx.
func (d *Desk) Open(ctx context.Context, ticket, title string) (envelope.Envelope, error) {
	return d.Events.Emit(ctx, TypeOpened, OpenedV1{Ticket: ticket, Title: title})
}

// DeskModule declares desk.
var DeskModule = catalog.Module[catalog.NoHandlers]{
	Name:  "desk",
	Doc:   "Opens tickets.",
	Emits: []catalog.EventType{catalog.Event[OpenedV1](TypeOpened, "A ticket was opened.")},
}

// Triager is triage's handler receiver.
type Triager struct {
	StateTable string
	Logger     *slog.Logger
}

// TriageModule declares triage.
var TriageModule = catalog.Module[*Triager]{
	Name:  "triage",
	Doc:   "Triages tickets.",
	Emits: []catalog.EventType{catalog.Event[TriagedV1](TypeTriaged, "A ticket was given a priority.")},
	Subscribes: []catalog.Subscription[*Triager]{
		{Name: SubTriage, Types: TypeOpened, Lane: catalog.Durable, Reads: []int{1},
			Doc: "Records the triage and announces it, in one transaction.", Handler: (*Triager).OnOpened},
		{Name: SubTally, Types: TypeTriaged, Lane: catalog.Local, Reads: []int{1},
			Doc: "Tallies each triaged ticket where it was emitted.", Handler: (*Triager).OnTriaged},
	},
}

// OnOpened writes the ticket's triage row and emits ticket.triaged with it.
// Everything it writes derives from e, so a run after a crash makes the
// same emit and the log keeps the first.
func (tr *Triager) OnOpened(ctx context.Context, e envelope.Envelope) error {
	var p OpenedV1
	if err := e.DecodePayload(&p); err != nil {
		return delivery.Permanent(err)
	}
	em, err := eventstore.EmitterFrom(ctx)
	if err != nil {
		return err
	}
	priority := "normal"
	if len(p.Title) > 0 && p.Title[0] == '!' {
		priority = "urgent"
	}
	row := types.TransactWriteItem{Put: &types.Put{TableName: aws.String(tr.StateTable), Item: map[string]types.AttributeValue{
		keys.AttrPK:    &types.AttributeValueMemberS{Value: "triage#" + em.Tenant()},
		keys.AttrSK:    &types.AttributeValueMemberS{Value: "ticket#" + p.Ticket},
		"priority":     &types.AttributeValueMemberS{Value: priority},
		"opened_event": &types.AttributeValueMemberS{Value: e.ID},
	}}}
	f, err := em.Emit(ctx, TypeTriaged, TriagedV1{Ticket: p.Ticket, Priority: priority}, row)
	if err != nil {
		return err
	}
	tr.Logger.InfoContext(ctx, LineTriaged, slog.String(obs.KeyTicket, p.Ticket), slog.String(obs.KeyFollowonID, f.ID), slog.Int64(obs.KeyFollowonSeq, f.Seq))
	return nil
}

// OnTriaged tallies a triaged ticket (LOCAL: in the process that emitted it).
func (tr *Triager) OnTriaged(ctx context.Context, e envelope.Envelope) error {
	tr.Logger.InfoContext(ctx, LineTallied, slog.String(obs.KeyTriagedID, e.ID), slog.String(obs.KeyCausedBy, e.CausationID))
	return nil
}

// Pager is pager's handler receiver.
type Pager struct{ Logger *slog.Logger }

// PagerModule declares pager.
var PagerModule = catalog.Module[*Pager]{
	Name: "pager",
	Doc:  "Pages whoever is on call.",
	Subscribes: []catalog.Subscription[*Pager]{
		{Name: SubPage, Types: TypeTriaged, Lane: catalog.Durable, Reads: []int{1},
			Doc: "One page per triaged ticket.", Handler: (*Pager).OnTriaged},
	},
}

// OnTriaged pages once per triaged ticket.
func (pg *Pager) OnTriaged(ctx context.Context, e envelope.Envelope) error {
	var p TriagedV1
	if err := e.DecodePayload(&p); err != nil {
		return delivery.Permanent(err)
	}
	return effect.Do(ctx, EffectPage, func(ctx context.Context, key string) error {
		pg.Logger.InfoContext(ctx, LinePaged, slog.String(obs.KeyTriagedID, e.ID), slog.String(obs.KeyCausedBy, e.CausationID),
			slog.String(obs.KeyTicket, p.Ticket), slog.String(obs.KeyPriority, p.Priority), slog.String(obs.KeyKey, key))
		return nil
	})
}

// App is the relay as fourlanes' functions and construct take it.
var App = app.Application{
	Name: "relay",
	Modules: []app.Module{
		app.Declare(DeskModule),
		app.Bind(TriageModule, func(rt app.Runtime) (*Triager, error) {
			if rt.StateTable == "" {
				return nil, fmt.Errorf("triage keeps its rows in the state table, and the runtime gives none")
			}
			return &Triager{StateTable: rt.StateTable, Logger: rt.Logger}, nil
		}),
		app.Bind(PagerModule, func(rt app.Runtime) (*Pager, error) { return &Pager{Logger: rt.Logger}, nil }),
	},
}
