// Package reminders is the library's DURABLE subscriber: for every loan event
// it sends the member one reminder (a due date on loan.opened, a thank-you on
// loan.returned), through the framework's effect helper (app.Effect).
// "Sending" is a log line: the example has no mail service.
//
// The library chose at most once (app.AtMostOnce): a member who gets the
// same reminder twice calls the desk about a second loan, so a reminder whose
// outcome is unknown (its process died between recording and sending it) is
// not sent again. It is never silently skipped: the subscription is
// dead-lettered naming the reminder, reconcile counts it (effects_unknown),
// an alarm fires, and an operator decides with `fourlanes effects`.
package reminders

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/fourlanes/fourlanes/examples/library/loans"
	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
)

// Subscription is the name of reminders' one subscription.
const Subscription = "reminders.member"

// EffectReminder names the reminder effect of each loan event; its key is
// "<event id>:reminders.member:reminder".
const EffectReminder = "reminder"

// Module declares reminders' one subscription. DURABLE, because a reminder
// must not be lost; its send is an effect, at most once.
var Module = catalog.Module[*Reminder]{
	Name: "reminders",
	Doc:  "Member reminders.",
	Subscribes: []catalog.Subscription[*Reminder]{
		{Name: Subscription, Types: "loan.*", Lane: catalog.Durable, Reads: []int{1},
			Doc: "One reminder per loan event, at most once; one of unknown outcome is dead-lettered for a decision.", Handler: (*Reminder).OnLoanEvent},
	},
}

// Sent is the line logged once per reminder sent.
const Sent = "reminder sent"

// The reminder line's own keys. The framework's logger adds the tenant,
// the event id, the lane and the request id from the context, so a handler
// logs only what its domain knows.
const (
	KeyMember  = "member"
	KeyTo      = "to"
	KeySubject = "subject"
)

// Reminder is reminders' handler receiver.
type Reminder struct {
	Logger *slog.Logger
}

// OnLoanEvent sends one reminder for the loan event e, at most once
// (app.Effect with app.AtMostOnce): a redelivered event whose reminder
// went out sends nothing.
func (r *Reminder) OnLoanEvent(ctx context.Context, e app.Envelope) error {
	subject, p, err := compose(e)
	if err != nil {
		return app.Permanent(err) // retrying cannot fix a payload
	}
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	return app.Effect(ctx, EffectReminder, func(ctx context.Context, key string) error {
		// The subject names the book; the event, its loan.
		log.InfoContext(ctx, Sent, slog.String(KeyMember, p.Member), slog.String(KeyTo, p.Email), slog.String(KeySubject, subject))
		return nil
	}, app.AtMostOnce)
}

// compose decodes e into the reminder's subject and the loan it is about.
func compose(e app.Envelope) (string, loans.OpenedV1, error) {
	var p loans.OpenedV1 // loan.returned v1 has the same fields
	if e.SchemaVersion != 1 {
		return "", p, fmt.Errorf("no reminder for %s schema version %d", e.Type, e.SchemaVersion)
	}
	if err := e.DecodePayload(&p); err != nil {
		return "", p, err
	}
	switch e.Type {
	case loans.TypeOpened:
		return "Your copy of " + p.Book + " is due in three weeks", p, nil
	case loans.TypeReturned:
		return "Thank you for returning " + p.Book, p, nil
	}
	return "", p, fmt.Errorf("no reminder for %s", e.Type)
}
