// Package tamper inspects stream records for changes no honest write makes.
//
// The log is insert-only: an event row, once written, is never changed or
// removed, and a tenant's head row only ever advances. IAM cannot make that
// true for PutItem (it cannot require a condition expression), so a role
// allowed to append can also overwrite. Inspect says which records of the
// events table's stream are such changes; a deployed stack does not run it
// on that stream, though: DynamoDB serves at most two readers per stream
// shard, and they are the Pipe and the notary (pkg/notary), which reports
// every one of these changes as a finding. Inspect stays for reading a
// range of the stream by hand.
//
// tamper-watch, the Lambda function, reads the state table's stream
// (InspectState): deletes of dead letters, claims and watermarks.
//
// It promises:
//   - every MODIFY or REMOVE of an event row (seq ≥ 1), or of any other row
//     of the log (a negative seq, such as an idempotency-key row), is a
//     Finding;
//   - every REMOVE of a head row (seq 0) is a Finding, and so is every MODIFY
//     of a head row that is not exactly an honest advance (see Inspect);
//   - a record it cannot read is a Finding too: silence is never the answer
//     to something it does not understand;
//   - INSERTs are not findings (the mapping's filter should never pass one);
//   - on the state table's stream (InspectState), the REMOVE of a claim item
//     or a delivery watermark not made by TTL is a Finding, and so is the
//     REMOVE of a dead letter whose claim entry does not say completed (the
//     one honest delete of a dead letter resolves it in the same
//     transaction), or cannot be read to tell.
//
// What it cannot see: an overwrite that writes back identical bytes changes
// nothing and is not a change; a forged head advance that has the honest
// shape (last_seq + k, a new hash and event id) is caught by reconcile, which
// re-walks the chain and compares the head with it.
package tamper
