// Package delivery is the DURABLE lane's dispatcher: at-least-once delivery
// made idempotent per (event, subscription) by claims, with per-subscription
// dead letters and replay.
//
// Deliver(ctx, envelope) binds the envelope's tenant, selects the DURABLE
// subscriptions whose glob matches, and for each one takes the claim
// {event_id}:{subscription} with one conditional write:
//
//   - completed: skip (a redelivery never runs a handler twice);
//   - dead: skip (parked until Replay; never blocks the tenant's later events);
//   - pending under another delivery's unexpired lease: leave it, and report
//     RetryLater so the consumer fails the message and SQS brings it back;
//   - absent, or pending with an expired lease: take it (a crashed or timed-out
//     delivery is taken over).
//
// The handler then runs, retried a few times with short backoff unless it
// marks its error Permanent; the claim becomes completed (second write), or
// dead with the error text plus a tenant-scoped dead-letter row (one
// transaction). One failing subscription never stops its siblings. The
// common path is two writes per (event, subscription): claim and complete.
//
// Lease: the remaining time of the invocation (the context's deadline) plus
// a grace period, so a delivery cut off by the Lambda timeout is taken over
// by the next delivery of the message, which SQS makes visible again only
// after the visibility timeout (≥ 6 × the function timeout), by then expired.
//
// Only events in the log are delivered: with Config.Log, Deliver refuses an
// envelope that is not the log's event at its (tenant, seq)
// (NotInLogError), checked in the same BatchGetItem that prefetches the
// batch's claims (inlog.go).
//
// Delivery watermarks (watermark.go): per (tenant, DURABLE subscription),
// the seq through which every event is settled. The consumer reports each
// batch's settled events to Settled, one conditional write per
// subscription and tenant; reconcile reports the watermarks against the
// head, and dlq-repair redelivers what stays above them.
//
// Retention: completed claims expire by TTL after Config.Retention (default
// 30 days), longer than any redelivery: the FIFO queue retains a message at
// most 14 days, and a FIFO DLQ restarts that clock when the message moves,
// so a message can come back for up to 28 days; dlq-repair redelivers within
// that window. Dead claims and dead-letter rows never expire: they are parked,
// never dropped, until Replay resolves them.
package delivery
