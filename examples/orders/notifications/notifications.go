// Package notifications emails customers about their orders (the example's
// DURABLE subscriber): one email per order event, through the framework's
// effect helper (pkg/effect), at least once: never lost, sent twice only
// when a process dies between sending and recording it (counted by
// EffectRedone), and never twice with a mail provider that deduplicates by
// the email's key.
package notifications

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// EffectEmail names the email effect of each order event; its key is
// "<event id>:notifications.order-email:email".
const EffectEmail = "email"

// Email is one message to a customer.
type Email struct {
	To, Subject, Body string
	// Key identifies the email (its effect's key): a mail provider that
	// supports idempotency keys should be given it.
	Key string
}

// Mailer sends email. Send must return an error only when the email was not
// accepted.
type Mailer interface {
	Send(ctx context.Context, m Email) error
}

// LogMailer "sends" by logging: the example has no mail service.
type LogMailer struct{ Logger *slog.Logger }

// Send logs m.
func (l LogMailer) Send(ctx context.Context, m Email) error {
	log := l.Logger
	if log == nil {
		log = slog.Default()
	}
	log.InfoContext(ctx, "email sent", slog.String(obs.KeyTo, m.To), slog.String(obs.KeySubject, m.Subject), slog.String(obs.KeyKey, m.Key))
	return nil
}

// Notifier is notifications' handler receiver.
type Notifier struct {
	Mailer Mailer
}

// OnOrderEvent sends the customer one email for the order event e, as an
// effect of the delivery (effect.Do): a redelivery of an event whose email
// went out sends nothing; a failed send is retried.
func (n *Notifier) OnOrderEvent(ctx context.Context, e envelope.Envelope) error {
	m, err := compose(e)
	if err != nil {
		return delivery.Permanent(err) // retrying cannot fix a payload
	}
	return effect.Do(ctx, EffectEmail, func(ctx context.Context, key string) error {
		m.Key = key
		return n.Mailer.Send(ctx, m)
	})
}

func compose(e envelope.Envelope) (Email, error) {
	switch {
	case e.Type == orders.TypePlaced && e.SchemaVersion == 1:
		var p orders.PlacedV1
		if err := e.DecodePayload(&p); err != nil {
			return Email{}, err
		}
		return Email{To: p.CustomerEmail, Subject: "We received your order " + p.OrderID,
			Body: fmt.Sprintf("%d lines, total %d cents.", len(p.Items), p.TotalCents)}, nil
	case e.Type == orders.TypePlaced && e.SchemaVersion == 2:
		var p orders.PlacedV2
		if err := e.DecodePayload(&p); err != nil {
			return Email{}, err
		}
		return Email{To: p.CustomerEmail, Subject: "We received your order " + p.OrderID,
			Body: fmt.Sprintf("%d lines, total %d.%02d %s.", len(p.Items), p.TotalCents/100, p.TotalCents%100, p.Currency)}, nil
	case e.Type == orders.TypePaid && e.SchemaVersion == 1:
		var p orders.PaidV1
		if err := e.DecodePayload(&p); err != nil {
			return Email{}, err
		}
		return Email{To: p.CustomerEmail, Subject: "Payment received for order " + p.OrderID, Body: "Reference " + p.PaymentRef + "."}, nil
	case e.Type == orders.TypeShipped && e.SchemaVersion == 1:
		var p orders.ShippedV1
		if err := e.DecodePayload(&p); err != nil {
			return Email{}, err
		}
		return Email{To: p.CustomerEmail, Subject: "Order " + p.OrderID + " shipped", Body: "Carrier " + p.Carrier + " " + p.TrackingNumber}, nil
	case e.Type == orders.TypeCancelled && e.SchemaVersion == 1:
		var p orders.CancelledV1
		if err := e.DecodePayload(&p); err != nil {
			return Email{}, err
		}
		return Email{To: p.CustomerEmail, Subject: "Order " + p.OrderID + " cancelled", Body: "Reason: " + p.Reason}, nil
	}
	return Email{}, fmt.Errorf("no email for %s schema version %d", e.Type, e.SchemaVersion)
}
