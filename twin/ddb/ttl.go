package ddb

import (
	"strconv"
	"sync"
	"time"

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// Time to live: a sweeper deletes the items whose TTL attribute is a Number of epoch
// seconds before now ("less than the current time", UpdateTimeToLive's reference), through the same write path as DeleteItem, so the REMOVE
// reaches the stream marked as made by the service.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/TTL.html
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/time-to-live-ttl-streams.html
//
// AWS deletes expired items "typically within a few days"; here the sweep runs every
// Options.TTLSweep, so tests see deletions promptly. Items whose TTL attribute is not
// a Number, or holds a time more than five years in the past, are never deleted, as
// AWS documents.

// ttlMaxAgeYears is how far in the past a TTL value may be and still expire its item.
const ttlMaxAgeYears = 5

// background is the DB's background work: the TTL sweeper and stream maintenance
// (trimming and shard rollover when no reads or writes come to do it).
type background struct {
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

func (b *background) start(db *DB) {
	if db.opts.TTLSweep < 0 {
		return
	}
	b.quit, b.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(b.done)
		tick := time.NewTicker(db.opts.TTLSweep)
		defer tick.Stop()
		for {
			select {
			case <-b.quit:
				return
			case <-tick.C:
				if n := db.SweepTTL(); n > 0 {
					db.log.Debug("ddb: TTL deleted expired items", obs.KeyCount, n)
				}
				db.streams.maintain(db.now())
			}
		}
	}()
}

func (b *background) stop() {
	if b.quit == nil {
		return
	}
	b.once.Do(func() { close(b.quit) })
	<-b.done
}

// SweepTTL deletes, in every table with TTL enabled, the items whose TTL attribute
// has expired, and returns how many it deleted. Each deletion is a REMOVE on the
// table's stream with the service's user identity. The background sweeper calls it
// every Options.TTLSweep; tests call it directly.
func (db *DB) SweepTTL() int {
	deleted := 0
	for _, t := range db.Tables() {
		deleted += db.sweepTable(t)
	}
	return deleted
}

func (db *DB) sweepTable(t *Table) int {
	now := db.now()
	t.mu.RLock()
	name := t.ttlAttr
	var keys []attr.Item
	if name != "" && !t.deleted {
		t.items.Ascend(func(e *entry) bool {
			var v *attr.Value
			if e.item != nil {
				v = e.item[name]
			} else {
				v = attr.LookupFramed(e.blob, name)
			}
			if ttlExpired(v, now) {
				k := attr.Item{t.Hash.Name: e.hk}
				if t.Range.Name != "" {
					k[t.Range.Name] = e.rk
				}
				keys = append(keys, k)
			}
			return true
		})
	}
	t.mu.RUnlock()
	if len(keys) == 0 {
		return 0
	}
	// Deletions take the table's write lock a batch at a time, so that a mass expiry
	// does not hold writers off for the whole sweep.
	n := 0
	for len(keys) > 0 {
		batch := keys[:min(len(keys), ttlBatch)]
		keys = keys[len(batch):]
		deleted, ok := db.sweepBatch(t, batch, now)
		n += deleted
		if !ok {
			break
		}
	}
	return n
}

// ttlBatch is how many expired items one hold of a table's write lock deletes.
const ttlBatch = 256

// sweepBatch deletes the items of keys that are still expired; ok is false when the
// table went away or its TTL was turned off meanwhile.
func (db *DB) sweepBatch(t *Table, keys []attr.Item, now time.Time) (n int, ok bool) {
	j := db.begin()
	unlock := lockTables([]*Table{t})
	defer unlock()
	defer func() { db.commit(j) }()
	// The table may have changed since the scan: check again.
	if t.deleted || t.ttlAttr == "" {
		return 0, false
	}
	for _, k := range keys {
		item := t.getLocked(k)
		if item == nil || !ttlExpired(item[t.ttlAttr], now) {
			continue
		}
		// An item a transaction holds (Options.Conflicts) is left to a later sweep,
		// as a DeleteItem would be refused with TransactionConflict.
		if hk, rk := t.keyOf(k); t.extra.inflight[keyString(hk, rk)] != nil {
			continue
		}
		t.writeLocked(k, nil, ttlIdentity, now, j)
		n++
	}
	return n, true
}

// ttlExpired reports whether v, a TTL attribute's value, expires its item at now: a
// Number of epoch seconds less than now (equal is not expired yet), and not more than
// five years before it.
func ttlExpired(v *attr.Value, now time.Time) bool {
	if v == nil || v.Kind != attr.KindN {
		return false
	}
	sec, err := strconv.ParseFloat(v.S, 64)
	if err != nil {
		return false
	}
	nowSec := float64(now.UnixNano()) / 1e9
	oldest := float64(now.AddDate(-ttlMaxAgeYears, 0, 0).UnixNano()) / 1e9
	return sec < nowSec && sec >= oldest
}
