package ddb

import (
	"net/http"
)

// dbExtensions is the DB-wide state of the data-plane operations (idempotency tokens,
// injected faults, write budgets). Owned by the data-plane files.
type dbExtensions struct{}

func (e *dbExtensions) init(db *DB) {}

// tableExtState is per-table state of the data-plane operations (in-flight
// transaction marks, partition budgets).
type tableExtState struct{}

// adminPrefix is the path of the test-only admin API (fault injection).
const adminPrefix = "/_fourlanes/"

func (db *DB) serveAdmin(w http.ResponseWriter, r *http.Request) {
	http.NotFound(w, r)
}

// changed is called after every change of state (persistence hooks in here).
func (e *dbExtensions) changed() {}

// close flushes what must survive a restart (persistence hooks in here).
func (e *dbExtensions) close() error { return nil }
