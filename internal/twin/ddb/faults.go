package ddb

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Fault injection, for tests: a rule matches requests by action (and optionally table)
// and acts on the next Count of them. In-process through DB.InjectFault, or from other
// processes through the admin API:
//
//	POST   /_fourlanes/faults  {"action":"PutItem","table":"t","kind":"drop","count":1}
//	DELETE /_fourlanes/faults  (clears every rule)
//	GET    /_fourlanes/faults  (lists the rules still armed)

// FaultKind is what an injected fault does to a request.
type FaultKind string

const (
	// FaultDropResponse lets the operation commit, then closes the connection without
	// a response: the caller cannot tell whether the write happened.
	FaultDropResponse FaultKind = "drop"
	// FaultDelay lets the operation commit, then holds the response for Delay.
	FaultDelay FaultKind = "delay"
	// FaultInternalError answers HTTP 500 InternalServerError; nothing is written.
	FaultInternalError FaultKind = "error"
	// FaultThrottle answers ProvisionedThroughputExceededException; nothing is written.
	FaultThrottle FaultKind = "throttle"
)

// Fault is one injection rule.
type Fault struct {
	Action string    `json:"action"`          // "PutItem", "TransactWriteItems", …
	Table  string    `json:"table,omitempty"` // "" matches every table
	Kind   FaultKind `json:"kind"`
	Count  int       `json:"count,omitempty"` // how many requests it hits (0: 1)
	// Delay is FaultDelay's hold; in JSON "delayMs".
	Delay time.Duration `json:"-"`
}

type faultJSON struct {
	Fault
	DelayMs int64 `json:"delayMs,omitempty"`
}

type faultRule struct {
	Fault
	left int
}

// InjectFault arms f.
func (db *DB) InjectFault(f Fault) error {
	switch f.Kind {
	case FaultDropResponse, FaultDelay, FaultInternalError, FaultThrottle:
	default:
		return fmt.Errorf("ddb: unknown fault kind %q (want drop, delay, error or throttle)", f.Kind)
	}
	if f.Action == "" {
		return fmt.Errorf("ddb: a fault needs an action")
	}
	if f.Kind == FaultDelay && f.Delay <= 0 {
		return fmt.Errorf("ddb: a delay fault needs a positive delay")
	}
	n := f.Count
	if n <= 0 {
		n = 1
	}
	db.ext.mu.Lock()
	db.ext.faults = append(db.ext.faults, &faultRule{Fault: f, left: n})
	db.ext.mu.Unlock()
	return nil
}

// ClearFaults disarms every fault.
func (db *DB) ClearFaults() {
	db.ext.mu.Lock()
	db.ext.faults = nil
	db.ext.mu.Unlock()
}

// Faults returns the armed faults, Count being what is left of each.
func (db *DB) Faults() []Fault {
	db.ext.mu.Lock()
	defer db.ext.mu.Unlock()
	out := make([]Fault, 0, len(db.ext.faults))
	for _, r := range db.ext.faults {
		f := r.Fault
		f.Count = r.left
		out = append(out, f)
	}
	return out
}

// injectedFault consumes the first armed fault matching this request's action and one of
// tables. Error faults return the error to send (before anything is written); response
// faults mark the request so the server drops or delays the answer after the commit.
func (db *DB) injectedFault(ctx context.Context, tables ...string) error {
	ri := requestFrom(ctx)
	if ri.action == "" {
		return nil
	}
	db.ext.mu.Lock()
	if len(db.ext.faults) == 0 {
		db.ext.mu.Unlock()
		return nil
	}
	var hit *faultRule
	for i, r := range db.ext.faults {
		if r.Action != ri.action || !matchesTable(r.Table, tables) {
			continue
		}
		hit = r
		r.left--
		if r.left <= 0 {
			db.ext.faults = append(db.ext.faults[:i:i], db.ext.faults[i+1:]...)
		}
		break
	}
	db.ext.mu.Unlock()
	if hit == nil {
		return nil
	}
	switch hit.Kind {
	case FaultDropResponse:
		ri.dropResponse = true
	case FaultDelay:
		ri.delay = hit.Delay
	case FaultInternalError:
		return newError(http.StatusInternalServerError, CodeInternalServerError, "Internal server error (injected fault)")
	case FaultThrottle:
		return throughputExceeded()
	}
	return nil
}

func matchesTable(want string, tables []string) bool {
	if want == "" {
		return true
	}
	for _, t := range tables {
		if t == want {
			return true
		}
	}
	return false
}

func (db *DB) serveAdmin(w http.ResponseWriter, r *http.Request) {
	if strings.TrimPrefix(r.URL.Path, adminPrefix) != "faults" {
		http.NotFound(w, r)
		return
	}
	switch r.Method {
	case http.MethodPost:
		var fj faultJSON
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&fj); err != nil {
			http.Error(w, "decoding the fault: "+err.Error(), http.StatusBadRequest)
			return
		}
		f := fj.Fault
		f.Delay = time.Duration(fj.DelayMs) * time.Millisecond
		if err := db.InjectFault(f); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case http.MethodDelete:
		db.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet:
		list := []faultJSON{}
		for _, f := range db.Faults() {
			list = append(list, faultJSON{Fault: f, DelayMs: f.Delay.Milliseconds()})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	default:
		http.Error(w, "POST, DELETE or GET", http.StatusMethodNotAllowed)
	}
}
