// Package effect makes a handler's side effect (an email, a charge, a call to
// another service) safe under the at-least-once delivery of the DURABLE and
// BEST_EFFORT lanes: never lost, done twice only in a window that a
// provider's idempotency key closes, and never silently skipped.
//
// A handler calls Do for each effect, with a name unique within its
// subscription:
//
//	func (n *Notifier) OnOrderEvent(ctx context.Context, e envelope.Envelope) error {
//		m, err := compose(e)
//		if err != nil {
//			return delivery.Permanent(err)
//		}
//		return effect.Do(ctx, "email", func(ctx context.Context, key string) error {
//			m.IdempotencyKey = key // a provider that takes one never sends twice
//			return n.Mailer.Send(ctx, m)
//		})
//	}
//
// The effect's key is (event id, subscription, name), the same on every
// delivery of the event. Do keeps one record per key in the backbone's state
// table (pkg/keys, "effect records"), written with the delivery's own token:
//
//  1. start: one conditional write records that this delivery starts the
//     effect. An effect already done is skipped (a redelivery after a crash
//     that followed the effect never does it again). The record of this
//     very delivery is its own: when the answer to the write is lost after
//     it committed and the SDK resends it, or the handler is run again in
//     the same delivery, the record is recognised by its token, never taken
//     for someone else's.
//  2. the effect: fn(ctx, key). The key is for the provider: one that
//     deduplicates by it makes the effect exactly once at the provider.
//  3. done: one conditional write on the token. If fn fails, the record is
//     released instead, so that a retry does the effect.
//
// After a crash between start and done nobody knows whether the effect
// happened. The default, AtLeastOnce, does it again: never zero times,
// possibly twice. A redo is logged (WARN) and counted (keys.MetricEffectRedone)
// unless the effect is declared Idempotent (its provider deduplicates by key,
// so the redo is harmless). AtMostOnce is an explicit choice for an effect
// that must never be repeated: the unknown effect is then not done, its
// record is marked unknown, the subscription is dead-lettered with an
// *UnknownError naming the effect (keys.MetricEffectUnknown, ERROR, an
// alarm), reconcile reports it (effects_unknown) and `fourlanes effects`
// lists it. An operator decides (`fourlanes effects -redo` or `-done`), and
// the next replay of the dead letter (dlq-repair) acts on the decision.
//
// fn must return an error only when the effect did not happen. An error after
// which the effect may have happened (a timeout talking to the provider)
// should be wrapped with MaybeDone: under AtMostOnce it makes the effect
// unknown instead of released; under AtLeastOnce the effect is released and
// done again by the retry.
//
// Costs: two writes per effect (start and done) on its first delivery; a
// redelivery of a done effect costs one refused write. The records expire
// with the claims (Retention, 30 days by default); an unknown one never
// expires until an operator decides.
package effect
