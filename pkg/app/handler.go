package app

import (
	"context"
	"errors"

	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// What a module's own code needs beside its declaration (pkg/catalog), in
// the one package a team writes against: the names below are the
// framework's own (pkg/envelope, pkg/tenancy, pkg/delivery, pkg/effect,
// pkg/eventstore), so code written with either reads the same.

// Envelope is one event as a handler receives it (envelope.Envelope).
type Envelope = envelope.Envelope

// Tenant returns the tenant the context carries (tenancy.Tenant): a
// service's calls and a handler's deliveries each carry one.
func Tenant(ctx context.Context) (string, error) { return tenancy.Tenant(ctx) }

// Permanent marks a handler's error as one that retrying cannot fix (a
// payload it cannot read): the event is dead-lettered at once instead of
// redelivered (delivery.Permanent).
func Permanent(err error) error { return delivery.Permanent(err) }

// ConditionFailed reports whether err says that the condition expression of
// a write the caller added to Emit (the module's own table, written in the
// event's transaction) failed: nothing was written and nothing emitted, as
// when the item changed since it was read (eventstore.CallerWriteError).
func ConditionFailed(err error) bool {
	var cw *eventstore.CallerWriteError
	return errors.As(err, &cw) && cw.ConditionFailed()
}

// What Effect does when an earlier delivery started the effect and nobody
// knows whether it happened (effect.Mode).
var (
	// AtLeastOnce does it again (the default): never zero times, possibly
	// twice; give the key to a provider that deduplicates by it.
	AtLeastOnce = effect.WithMode(effect.AtLeastOnce)
	// AtMostOnce does not: the effect is marked unknown and the subscription
	// dead-lettered, loudly, until an operator decides (`fourlanes effects`).
	// DURABLE subscriptions only.
	AtMostOnce = effect.WithMode(effect.AtMostOnce)
)

// Effect does a handler's side effect name (an email, a payment) once per
// event and subscription, recorded in the state table: fn gets the
// effect's idempotency key, "<event id>:<subscription>:<name>". A
// redelivered event whose effect is done does nothing (effect.Do; its
// options, AtMostOnce or AtLeastOnce among them).
func Effect(ctx context.Context, name string, fn func(ctx context.Context, key string) error, opts ...effect.Option) error {
	return effect.Do(ctx, name, fn, opts...)
}
