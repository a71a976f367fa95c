// Package chain is the per-tenant hash chain of the event log.
//
// The rule (pkg/chain/SPEC.md has it precisely enough to re-implement):
//
//	hash(e) = SHA-256( "fourlanes/chain" 0x00 | 0x01 | raw(prev_hash) | JCS(e without hash) )
//	prev_hash(seq 1) = Genesis(tenant)
//
// Verify walks a run of events and the head and returns a *BreakError naming
// the first break: its seq and a Reason. CheckStored checks one stored event
// on its own (valid, and its hash the one the rule gives), wherever it was
// read, and returns an *IntegrityError.
package chain
