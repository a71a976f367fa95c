package ddb

import (
	"encoding/json"
	"net/http"
	"time"
)

// The admin API's clock, for tests in another process than the server: a
// skew added to the server's clock (Options.Now), so that such a test can
// expire TTLs, stream records, transaction tokens and leases as an
// in-process test does with Options.Now.
//
//	POST /_fourlanes/clock  {"skewMs": 600000}   the server's clock runs 10 minutes ahead
//	GET  /_fourlanes/clock                        {"skewMs": …, "now": "<the server's time>"}
//
// The skew is the whole server's, never one table's: a test that moves it
// runs a server of its own (`fourlanes dynamodb -listen 127.0.0.1:0`).

type clockJSON struct {
	SkewMs int64  `json:"skewMs"`
	Now    string `json:"now,omitempty"`
}

// SetClockSkew sets the skew added to the server's clock.
func (db *DB) SetClockSkew(d time.Duration) { db.skew.Store(int64(d)) }

func (db *DB) serveClock(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		var c clockJSON
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10)).Decode(&c); err != nil {
			http.Error(w, "decoding the clock: "+err.Error()+` (want {"skewMs": N})`, http.StatusBadRequest)
			return
		}
		db.SetClockSkew(time.Duration(c.SkewMs) * time.Millisecond)
		w.WriteHeader(http.StatusNoContent)
	case http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(clockJSON{SkewMs: time.Duration(db.skew.Load()).Milliseconds(), Now: db.opts.Now().UTC().Format(time.RFC3339Nano)})
	default:
		http.Error(w, "POST or GET", http.StatusMethodNotAllowed)
	}
}
