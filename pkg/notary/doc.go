// Package notary is the one signer of checkpoints: it signs only what it saw
// appended.
//
// The events table can be rewritten by whoever holds a writer's role (IAM
// cannot force a PutItem to be conditional); its stream cannot. The notary
// reads the stream with its own event source mapping, every INSERT, MODIFY
// and REMOVE of the log, and keeps per chain (the table's partition key) the
// last (seq, hash) it saw appended, in the state table (pkg/keys,
// "notary chain"). An event counts as appended when
//
//   - its INSERT carries a valid stored event whose hash recomputes
//     (chain.CheckStored),
//   - a head record (INSERT or MODIFY of seq 0) covers it: the head's
//     last_seq reached it, the head moved forward from exactly the last_seq
//     the notary saw before (so no append happened out of its sight), and
//   - the events between the last appended one and the head's last_seq are
//     all seen, each prev_hash the hash before it, the last one's hash the
//     head's last_hash.
//
// At the end of each batch it signs a checkpoint (pkg/checkpoint) over each
// chain that advanced, and writes it to the Object Lock bucket.
//
// Everything else is a Finding (an ERROR line, an EMF NotaryFinding metric by
// kind, the chain row's findings count and last finding, which reconcile
// returns), and the chain is never signed again: a MODIFY of an event row
// (rewrite), a REMOVE of an event or head row (truncation), a head that moves
// back or is rewritten at its seq (rollback), a head that covers a seq never
// inserted (gap), a link that does not hold (link), an insert the head never
// covers, or of a seq already appended (planted), a head that moved while the
// notary did not see it move (unseen: it was stopped longer than the stream
// keeps records, 24 hours, or started after them), and a record it cannot
// read (unreadable). A finding never fails the batch: a retry cannot undo it.
//
// A retried batch is safe: each chain row remembers the stream sequence
// number of the last record applied, and records at or before it are
// skipped. Within one transaction DynamoDB Streams does not order the
// records of different items, and a batch may end inside a transaction, so
// what is seen but not yet covered is kept (pending) across batches; at the
// end of a batch an insert the table's head does not cover is planted, and a
// covered seq that is not in the table is a gap.
package notary
