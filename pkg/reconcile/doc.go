// Package reconcile proves each tenant's hash chain intact and counts what
// failed delivery: the logic behind functions/reconcile's Function URL.
//
// # Walks
//
// A walk re-reads a tenant's events in seq order, re-hashes each one and
// checks every link (chain.Verifier), then checks the head row. It answers
// with the first break, if any: its seq and why (hash mismatch, prev_hash
// mismatch, missing seq, head mismatch, …).
//
// Rows are verified in place: each row's canonical line is written straight
// from its attribute values (envelope.AppendItemLine) and hashed
// (chain.Verifier.NextItem), without decoding it into an Envelope. A row the
// in-place path is not certain of (an escape in an envelope field, a number
// not in canonical form, a wrong attribute type, a deep or wide map) is
// decoded (envelope.FromItem) and verified as before, which gives the same
// verdict with the decoder's error.
//
//   - full: from genesis. A checkpoint never shortens it. When it passes the
//     checkpoint's seq it also compares hashes, so a log rewritten
//     consistently (every hash after an edit recomputed, head included) still
//     breaks there ("checkpoint mismatch"): the checkpoint is a witness.
//   - incremental (the default): from the tenant's checkpoint, so a call
//     costs O(events since the checkpoint). It TRUSTS the events the
//     checkpoint covers; only a full walk re-proves them. It re-reads the
//     checkpointed event first and requires that its stored hash still equals
//     the checkpoint's and still matches its content, so rewriting that event
//     breaks at the checkpoint's seq.
//
// The walk stops at the head's last_seq as read when it started; events
// committed meanwhile are left for the next call. At the head it looks one row
// further: rows past a head that did not move are a break (the head does not
// cover them), rows past a head that moved are new commits and are walked too.
//
// # Checkpoints
//
// A checkpoint is a (seq, hash) a walk trusts. In the stack it is a signed
// checkpoint (SignedState, checkpoint.go; pkg/chain/SPEC.md §9): a note
// signed with a KMS key and written once to an Object Lock bucket, by the
// notary (pkg/notary) alone, of what it saw appended on the events stream.
// Reconcile trusts nothing else and never signs: a walk of the table, which a
// writer's role can rewrite consistently, cannot vouch for it. DynamoState's
// unsigned row (state table, pk checkpoint#<tenant>) remains for a
// deployment without the bucket and key; there an unbroken walk moves it
// forward (a conditional write).
//
// # The notary's view
//
// With Config.Notary, a walk that reaches the head (or breaks) compares the
// table with the notary's view of the chain (notary.go): a chain the notary
// marked broken (notary finding), a head below what it saw appended
// (rollback) or at its seq with another hash (notary mismatch) is a break,
// and "findings" says it in words; "notary" reports its seq, what it signed,
// how many events it has not vouched for yet (unsigned) and its last
// finding. A DURABLE subscription's delivery watermark above the head is a
// rollback too.
//
// # Bounded time
//
// A call stops verifying before the Lambda deadline (a reserve of 10 %, at
// least 2 s, is left to answer) or after max_events events, and answers
// complete=false with a cursor. The walk's progress is kept server-side in a
// walk row (pk checkpoint#<tenant>, sk walk#<id>, expiring after a day);
// the cursor only names that row, so a cursor cannot make a walk skip events.
// Resuming re-reads the event at the saved position and checks its hash, as
// for a checkpoint.
//
// # Reads
//
// Each report counts reads: items read from the events table (head rows,
// the re-read checkpoint or resume event, events), and state_reads: items
// read from the state table (checkpoint, walk row, dead letters listed). The
// Scan that lists tenants (eventstore.Store.Tenants) and the BatchGetItem
// that lists a tenant's chains (eventstore.Store.Chains: 32 head keys, 32
// read units, on every call with tenant=<tenant id>) are not counted.
//
// # Response (GET ?tenant=T)
//
//	{
//	  "tenant": "t1",
//	  "chain_intact": true,         // false on a break; null while a walk is incomplete and unbroken
//	  "complete": true,             // false: call again with cursor
//	  "mode": "incremental",        // or "full"
//	  "last_seq": 4211,             // the head's last_seq (0: no head)
//	  "verified": 11,               // events re-hashed by this walk (across its resumed calls)
//	  "verified_through": 4211,     // seq through which the chain is proven (trusted prefix included)
//	  "trusted_through": 4200,      // seq of the checkpoint the walk trusted (0: from genesis)
//	  "checkpoint_seq": 4211,       // the tenant's checkpoint after this call (0: none)
//	  "first_break": null,          // or {"seq","reason","expected","got"}
//	  "dead_letter_count": 0,
//	  "dead_letters": [],           // distinct subscriptions with open dead letters, sorted
//	  "reads": 13,
//	  "state_reads": 1,
//	  "findings": [],               // absent when none; e.g. {"kind":"CheckpointInvalid","key","reason"}
//	  "cursor": null                // or an opaque string to pass back
//	}
//
// A finding is wrong outside the chain and does not fail the call. A
// CheckpointInvalid finding names a checkpoint object that does not verify
// (unsigned, another key's, another tenant's or seq's): one newer than the
// checkpoint the walk trusted, which it passed over, or the object at the
// key this walk's checkpoint belongs at; Object Lock keeps it, so that seq
// stays unsigned (checkpoint_seq does not move) and the next seq is signed
// at its own key. Each is logged (ERROR) and counted (metric
// CheckpointInvalid, which alarms).
//
// Without tenant: {"mode","complete","cursor","reads","state_reads","tenants":[…]}
// with one report as above per tenant, minus cursor; pass cursor back for the
// next page (limit tenants per page). A tenant whose walk ran out of time ends
// its page with complete=false and is listed again on the next page, where
// its walk resumes.
//
// # Chain shards
//
// A tenant with chain shards (pkg/tenancy, shard.go) has chains T, T~1, …
// T~31, each an ordinary chain with its own head, checkpoint and walk rows.
// The sweep without tenant lists each chain as a tenant of its own. With
// tenant=T (a tenant id), the chains of T that have a head row
// (eventstore.Store.Chains) are walked together, in shard order, within the
// call's one budget:
//
//	{
//	  "tenant": "hot", …,             // the report of the first chain this call walked: T's own
//	  "shards": [{"tenant": "hot~3", …}, {"tenant": "hot~17", …}],
//	  "chains": 3,                    // T's chains: its own and each shard's with a head row
//	  "chains_intact": true,          // false: a chain broke; null: chains remain (cursor set)
//	  "broken_chains": [],            // the broken chains' names
//	  "cursor": null
//	}
//
// A call that runs out of budget answers with a cursor that names the chain
// in progress; the next call resumes that chain's walk and goes on with the
// chains after it. A resumed call reports only the chains it walked: the
// first of them at the top level (its "tenant" says which), the rest in
// shards. chains_intact and broken_chains cover every call of the walk (the
// cursor hands the earlier calls' broken chains back), so the last call
// answers for the tenant. The fields are absent for a tenant with one
// chain, and for tenant=T~k, which walks that chain alone.
//
// # Scheduled rounds (scheduled=true)
//
// EventBridge Scheduler invokes the function directly (infra/backbone
// schedule.go) with scheduled=true: every 15 minutes incremental, daily full,
// and hourly resume=true to continue a full round in progress (never to start
// one). A scheduled call does its share of the mode's round
// (Reconciler.Scheduled): it resumes from the cursor the state table keeps
// (pk round#<mode>), walks pages of tenants until its budget is spent, and
// saves the cursor; when the last page is done it clears it and the next call
// starts a new round. Every tenant is done once per round, however many
// there are. The save is conditional on the row's version, so of two
// overlapping calls only one moves the round. Only a direct invoke may pass
// scheduled=true: a request through the Function URL (it names the URL's
// domain and its SigV4-verified caller) is refused with 403. Each call logs
// the round's progress and emits ReconcileRoundAgeSeconds and
// ReconcileRoundTenants (and ReconcileRoundsCompleted), by Mode; the
// incremental round's age alarms after 2 hours, its silence after 30
// minutes; the full round's age after 12 hours.
package reconcile
