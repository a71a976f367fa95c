package ddb

import (
	"sync"
)

// dbExtensions is the DB-wide state of the data-plane operations: idempotency tokens
// (txn.go), injected faults (faults.go) and persistence (persist.go).
type dbExtensions struct {
	db *DB

	mu     sync.Mutex
	tokens tokenTable   // guarded by mu
	faults []*faultRule // guarded by mu

	persist persister
}

func (e *dbExtensions) init(db *DB) {
	e.db = db
	e.tokens.init()
	e.persist.init(db)
}

// tableExtState is per-table state of the data-plane operations, guarded by the
// table's mutex: the items marked by in-flight transactions (Options.Conflicts) and
// the per-partition write budgets (Options.PartitionWCU).
type tableExtState struct {
	inflight map[string]*txnRun // keyString of an item → the transaction holding it
	budgets  partitionBudgets
}

// adminPrefix is the path of the test-only admin API (fault injection, faults.go).
const adminPrefix = "/_fourlanes/"

// close writes the state a last time (with a DataDir).
func (e *dbExtensions) close() error { return e.persist.close() }

// load reads the DataDir's state (persist.go); New calls it once the streams exist.
func (e *dbExtensions) load() { e.persist.load() }
