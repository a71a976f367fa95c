// Package delivery is the DURABLE lane's dispatcher: at-least-once delivery
// made idempotent per (event, subscription) by claims, with per-subscription
// dead letters and replay.
//
// Deliver(ctx, envelope) binds the envelope's tenant, selects the DURABLE
// subscriptions whose glob matches, and takes their claims {event_id}:
// {subscription} together, in one conditional write of the event's claim
// item (one item per event, an entry per subscription; pkg/keys/claims.go).
// Each subscription's entry is judged on its own:
//
//   - completed: skip (a redelivery never runs a handler twice);
//   - dead: skip (parked until Replay; never blocks the tenant's later events);
//   - pending under another delivery's unexpired lease: leave it, and report
//     RetryLater so the consumer fails the message and SQS brings it back;
//     its siblings are still taken and run;
//   - absent, or pending with an expired lease: take it (a crashed or timed-out
//     delivery is taken over).
//
// The write is conditioned per subscription on the state the claim saw (a
// prefetch, or its own read); when another delivery got there first,
// DynamoDB refuses it and returns the item as it is now, and the claim is
// planned again from that, a few times at most.
//
// The handlers then run one after another, each retried a few times with
// short backoff unless it marks its error Permanent; each subscription's
// entry becomes completed (its own conditional write, on the delivery's
// token), or dead with the error text plus a tenant-scoped dead-letter row
// (one transaction). One failing subscription never stops its siblings.
// The common path costs 1 + N writes for an event with N subscriptions (one
// claim, N completions; it was two per (event, subscription)), and a
// prefetched redelivery of a settled event none. Completions are not
// batched: the window in which a handler's effect is done and its
// completion not yet written stays one write wide. Siblings completing
// while another delivery dead-letters one of them meet transaction
// conflicts on the shared item (TransactionConflictException); the store
// retries them, so none is lost.
//
// Upgrade: claims written before the claim item, one item per pair
// (claim#{event_id}:{subscription}), are read with the claim item and never
// written: completed or dead there is final, pending there is held until
// its lease ends. Replaying a legacy dead letter moves its claim into the
// claim item.
//
// Lease: the remaining time of the invocation (the context's deadline) plus
// a grace period, so a delivery cut off by the Lambda timeout is taken over
// by the next delivery of the message, which SQS makes visible again only
// after the visibility timeout (≥ 6 × the function timeout), by then expired.
//
// Only events in the log are delivered: with Config.Log, Deliver refuses an
// envelope that is not the log's event at its (tenant, seq)
// (NotInLogError), checked in the same BatchGetItem that prefetches the
// batch's claims (batch.go).
//
// Delivery watermarks (watermark.go): per (tenant, DURABLE subscription),
// the seq through which every event is settled. Delivery writes none: a
// watermark is its stored checkpoint carried forward over the settled
// claims after it (WatermarkReader), which reconcile and dlq-repair derive
// and write back as the checkpoint; reconcile reports the watermarks
// against the head, and dlq-repair redelivers what stays above them.
//
// Retention: an event's claim item expires by TTL after Config.Retention
// (default 30 days), longer than any redelivery: the FIFO queue retains a
// message at most 14 days, and a FIFO DLQ restarts that clock when the
// message moves, so a message can come back for up to 28 days; dlq-repair
// redelivers within that window. While any of its entries is dead the item
// carries no TTL (dead claims and dead-letter rows never expire: they are
// parked, never dropped, until Replay resolves them); the replay that
// resolves the last one gives it back.
package delivery
