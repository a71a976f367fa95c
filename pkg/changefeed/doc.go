// Package changefeed turns the stream records of tracked entity tables into
// change events, records them in the change-feed table, and dispatches them
// on the BEST_EFFORT lane. functions/changefeed runs it on a Lambda event
// source mapping; dlq-repair runs it on records it re-reads from the stream.
//
// # The change event
//
// A change event is an envelope (pkg/envelope), so subscribers see one shape
// on every lane, but it is not an event of the log and cannot pass for one:
//
//	id              a name-based UUID (SHA-1, RFC 9562 version 5) of the table and
//	                the stream record's eventID: the same record always makes
//	                the same change event, so a retried record overwrites its
//	                row instead of adding one, and subscribers can dedupe by id
//	type            record.written.<ENTITY> (INSERT, MODIFY) or
//	                record.deleted.<ENTITY> (REMOVE, TTL deletes included)
//	tenant_id       the item's tenant attribute (catalog.Entity.TenantAttr)
//	occurred_at     the record's ApproximateCreationDateTime, UTC
//	schema_version  catalog.ChangeSchemaVersion
//	payload         catalog.ChangeV1: entity, id, version, and on a write the new
//	                image un-typed (numbers canonical, B and BS as base64
//	                strings, SS/NS/BS as arrays); a delete carries the version
//	                of the deleted item (old image) and no item: a tombstone
//	seq 0, prev_hash "", hash ""
//	                no chain. envelope.ValidateStored refuses seq 0 and empty
//	                hashes, so a change event can never be appended to or
//	                verified as part of a tenant's hash chain; correlation,
//	                causation and actor are absent (the stream does not say).
//
// Deletion is decided by the images, not the event name: no NewImage is a
// delete. AWS sends a TTL delete as REMOVE with userIdentity
// Service/dynamodb.amazonaws.com; a delete under an event name the package
// does not know is a delete too, with a warning; it counts as TTL only with
// that service identity.
//
// # The change-feed table
//
// One row per change event (layout in pkg/keys), written with an
// unconditional PutItem keyed by tenant, entity, id, version and stream
// eventID: idempotent, one write. Rows expire Config.Retention after the
// change (default 7 days); the table is never the log.
//
// # Failures
//
// A record that cannot become a change event (no tenant, id or version, a
// version below 1, a number outside I-JSON, an image missing because the
// stream is not NEW_AND_OLD_IMAGES) is a *RejectError: logged as an error,
// counted (keys.MetricChangeRejected) and skipped; retrying cannot fix it and
// one bad record must not hold the shard. Everything else (the change-feed
// table or a subscriber failing after a short in-process retry, a record of a
// table this function does not track) fails the record: Handler reports its
// sequence number, the lowest failed one only, so the mapping checkpoints
// before it and retries from it, bisecting, up to its retry limit and record
// age, then sends the batch's metadata to the on-failure queue, which
// dlq-repair drains by re-reading the stream. BEST_EFFORT promises writers no
// back-pressure, and they get none: the feed is downstream of the commit. It
// does retry its own failures, because a projection that applies by version
// parks every later version behind a lost one.
package changefeed
