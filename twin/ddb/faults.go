package ddb

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Fault injection, for tests: a rule matches requests by action (and optionally table)
// and acts on the next Count of them, or, with a Rate, on each matching request with that
// probability (until Count hits, when Count is also set). In-process through
// DB.InjectFault, or from other processes through the admin API:
//
//	POST   /_fourlanes/faults  {"action":"PutItem","table":"t","kind":"drop","count":1}
//	POST   /_fourlanes/faults  {"action":"UpdateItem","match":"\":sent\"","kind":"stall","delayMs":60000}
//	POST   /_fourlanes/faults  {"action":"*","table":"t","kind":"error","rate":0.05,"seed":7}
//	DELETE /_fourlanes/faults  (clears every rule)
//	DELETE /_fourlanes/faults?table=t&table=u  (clears only the rules naming table t or u)
//	GET    /_fourlanes/faults  (lists the rules still armed)
//	GET    /_fourlanes/faults?table=t  (lists only the rules naming table t)
//
// A rule that names a table hits only requests on that table, so tests sharing one
// server (each on tables of its own) arm and clear their rules with ?table= and never
// disturb each other; a rule without a table, and a DELETE without ?table=, are
// server-wide, for a test that has the server to itself.

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
	// FaultStall holds the request before the operation runs, for Delay, then runs it.
	// A caller that goes away meanwhile (a process killed while it waits) writes
	// nothing: the request never reached the table. Tests use it to hold a process
	// just before a write and kill it there.
	FaultStall FaultKind = "stall"
)

// Fault is one injection rule.
type Fault struct {
	Action string `json:"action"`          // "PutItem", "TransactWriteItems", …; "*" matches every action
	Table  string `json:"table,omitempty"` // "" matches every table
	// Match, when set, limits the rule to requests whose JSON body contains it
	// (e.g. an expression attribute value's name, to pick one kind of write).
	Match string    `json:"match,omitempty"`
	Kind  FaultKind `json:"kind"`
	Count int       `json:"count,omitempty"` // how many requests it hits (0: 1; with a Rate, 0 is no limit)
	// Rate, when above 0, is the probability (at most 1) with which the rule hits each
	// matching request; Seed seeds its random source (0: seeded from the clock).
	Rate float64 `json:"rate,omitempty"`
	Seed uint64  `json:"seed,omitempty"`
	// Hits is how many requests the rule has hit so far (listing only).
	Hits int `json:"hits,omitempty"`
	// Delay is FaultDelay's hold; in JSON "delayMs".
	Delay time.Duration `json:"-"`
}

type faultJSON struct {
	Fault
	DelayMs int64 `json:"delayMs,omitempty"`
}

type faultRule struct {
	Fault
	left int // hits left; -1: no limit
	rnd  *rand.Rand
}

// InjectFault arms f.
func (db *DB) InjectFault(f Fault) error {
	switch f.Kind {
	case FaultDropResponse, FaultDelay, FaultInternalError, FaultThrottle, FaultStall:
	default:
		return fmt.Errorf("ddb: unknown fault kind %q (want drop, delay, error, throttle or stall)", f.Kind)
	}
	if f.Action == "" {
		return fmt.Errorf("ddb: a fault needs an action")
	}
	if (f.Kind == FaultDelay || f.Kind == FaultStall) && f.Delay <= 0 {
		return fmt.Errorf("ddb: a %s fault needs a positive delay", f.Kind)
	}
	if f.Rate < 0 || f.Rate > 1 {
		return fmt.Errorf("ddb: a fault's rate is a probability: want 0 < rate <= 1, not %v", f.Rate)
	}
	n := f.Count
	switch {
	case n <= 0 && f.Rate > 0:
		n = -1
	case n <= 0:
		n = 1
	}
	r := &faultRule{Fault: f, left: n}
	if f.Rate > 0 {
		seed := f.Seed
		if seed == 0 {
			seed = uint64(time.Now().UnixNano())
		}
		r.rnd = rand.New(rand.NewPCG(seed, seed>>1|1))
	}
	db.ext.mu.Lock()
	db.ext.faults = append(db.ext.faults, r)
	db.ext.mu.Unlock()
	return nil
}

// ClearFaults disarms every fault, or, given tables, only the faults that name one of
// them (a rule without a table is server-wide: only a ClearFaults without tables
// disarms it).
func (db *DB) ClearFaults(tables ...string) {
	db.ext.mu.Lock()
	defer db.ext.mu.Unlock()
	if len(tables) == 0 {
		db.ext.faults = nil
		return
	}
	kept := db.ext.faults[:0:0]
	for _, r := range db.ext.faults {
		if !scoped(r.Table, tables) {
			kept = append(kept, r)
		}
	}
	db.ext.faults = kept
}

// Faults returns the armed faults, Count being what is left of each (-1: no limit);
// given tables, only those that name one of them.
func (db *DB) Faults(tables ...string) []Fault {
	db.ext.mu.Lock()
	defer db.ext.mu.Unlock()
	out := make([]Fault, 0, len(db.ext.faults))
	for _, r := range db.ext.faults {
		if len(tables) > 0 && !scoped(r.Table, tables) {
			continue
		}
		f := r.Fault
		f.Count = r.left
		out = append(out, f)
	}
	return out
}

// scoped reports whether a rule naming table (""; every table) belongs to one of tables.
func scoped(table string, tables []string) bool {
	return table != "" && slices.Contains(tables, table)
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
		if (r.Action != "*" && r.Action != ri.action) || !matchesTable(r.Table, tables) || (r.Match != "" && !bytes.Contains(ri.body, []byte(r.Match))) {
			continue
		}
		if r.rnd != nil && r.rnd.Float64() >= r.Rate {
			continue // not this time; a later rule may still match
		}
		hit = r
		r.Hits++
		if r.left > 0 {
			r.left--
			if r.left == 0 {
				db.ext.faults = append(db.ext.faults[:i:i], db.ext.faults[i+1:]...)
			}
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
	case FaultStall:
		select {
		case <-ctx.Done():
			return newError(http.StatusInternalServerError, CodeInternalServerError,
				"the caller went away while the request was held (injected stall): nothing was written")
		case <-time.After(hit.Delay):
		}
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
	tables := r.URL.Query()["table"]
	if slices.Contains(tables, "") {
		http.Error(w, "?table= names a table: an empty one would match nothing", http.StatusBadRequest)
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
		db.ClearFaults(tables...)
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet:
		list := []faultJSON{}
		for _, f := range db.Faults(tables...) {
			list = append(list, faultJSON{Fault: f, DelayMs: f.Delay.Milliseconds()})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	default:
		http.Error(w, "POST, DELETE or GET", http.StatusMethodNotAllowed)
	}
}
