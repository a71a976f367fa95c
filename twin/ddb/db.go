package ddb

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a DB. The zero value serves like AWS in us-east-1 with account
// 000000000000, in memory, with no injected faults.
type Options struct {
	// Region and AccountID go into ARNs. Defaults: us-east-1, 000000000000.
	Region    string
	AccountID string
	// Now is the clock (default time.Now); tests move it to expire TTLs, iterators and records.
	Now func() time.Time
	// Logger receives the server's own log lines (default: discard).
	Logger *slog.Logger
	// DataDir, when set, keeps the state across restarts: a write-ahead log of every
	// change and rare snapshots (see wal.go).
	DataDir string

	// StreamRetention is how long stream records stay readable (AWS: 24 hours).
	StreamRetention time.Duration
	// ShardRecords rolls a stream's open shard over to a child shard after this many
	// records (0: 10,000). AWS rolls shards over roughly every four hours; a small
	// number here exercises a reader's parent-before-child rule.
	ShardRecords int
	// ShardAge rolls the open shard over when it is this old (0: 4 hours).
	ShardAge time.Duration
	// TTLSweep is how often expired items are deleted (0: every second; <0: never).
	TTLSweep time.Duration

	// Conflicts makes concurrent transactions on one item fail the way AWS's do
	// (TransactionConflict), instead of queueing behind each other.
	Conflicts bool
	// ConflictWindow is how long a transaction holds its items before it commits
	// when Conflicts is on (0: 2ms); wider windows give more conflicts.
	ConflictWindow time.Duration
	// PartitionWCU, when positive, is a per-partition-key write budget in WCU per
	// second (AWS: 1,000); writes over it fail with ProvisionedThroughputExceededException.
	PartitionWCU float64
	// PartitionStartEmpty makes a partition's budget start with nothing saved (it
	// then holds at most one second's worth, as always): a benchmark on fresh tables
	// measures the sustained rate, not a sustained rate plus a second's burst.
	PartitionStartEmpty bool
}

// DB is one DynamoDB endpoint's state: its tables, streams, idempotency tokens and faults.
// Every method is safe for concurrent use.
type DB struct {
	opts Options
	log  *slog.Logger
	skew atomic.Int64 // nanoseconds added to Options.Now by the admin API's clock (clock.go)

	mu     sync.RWMutex
	tables map[string]*Table

	ext     dbExtensions // state the data-plane files keep (tokens, faults, budgets): ext.go
	streams streamState  // every stream by ARN, kept after its table goes: stream.go
	bg      background   // the TTL sweeper and other background work: ttl.go

	// indexHook, when set (by tests, before any index change), is called at each
	// step of an online index change, which waits until it returns (index.go).
	indexHook func(index string, p indexPhase)
}

// New returns an empty DB.
func New(opts Options) *DB {
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.AccountID == "" {
		opts.AccountID = "000000000000"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.StreamRetention == 0 {
		opts.StreamRetention = 24 * time.Hour
	}
	if opts.ShardRecords == 0 {
		opts.ShardRecords = 10000
	}
	if opts.ShardAge == 0 {
		opts.ShardAge = 4 * time.Hour
	}
	if opts.TTLSweep == 0 {
		opts.TTLSweep = time.Second
	}
	if opts.ConflictWindow == 0 {
		opts.ConflictWindow = 2 * time.Millisecond
	}
	db := &DB{opts: opts, log: opts.Logger, tables: map[string]*Table{}}
	base := opts.Now
	db.opts.Now = func() time.Time { return base().Add(time.Duration(db.skew.Load())) } // clock.go
	db.ext.init(db)
	db.streams.init(db)
	db.ext.load() // persist.go: the DataDir's state, once the streams can take theirs
	db.bg.start(db)
	return db
}

// Open returns a DB made with opts, or an error when opts.DataDir holds a state
// that cannot be loaded. The servers (`fourlanes dynamodb -data`, `make dev`)
// use it: a state that silently went missing would be the worst outcome of a
// restart. New, given the same folder, runs in memory and refuses to write
// over the file instead.
func Open(opts Options) (*DB, error) {
	db := New(opts)
	if err := db.ext.persist.broken; err != nil {
		db.bg.stop()
		return nil, fmt.Errorf("ddb: the state in %s cannot be loaded (move its %s*, %s* and %s files aside, or remove the folder to start afresh): %w",
			opts.DataDir, snapPrefix, walPrefix, stateFile, err)
	}
	return db, nil
}

// Close stops the DB's background work (the TTL sweeper) and, with a DataDir, writes
// a snapshot of its state (so the next start replays no log) and closes the log.
// The DB must not be used afterwards.
func (db *DB) Close() error {
	db.bg.stop()
	return db.ext.close()
}

// Options returns the options the DB runs with (defaults filled in).
func (db *DB) Options() Options { return db.opts }

func (db *DB) now() time.Time { return db.opts.Now() }

// table returns the named table, or ResourceNotFoundException as AWS words it. A
// name that no table can have is a ValidationException, as on AWS (a name outside
// [a-zA-Z0-9_.-]{3,255} is refused before any look-up). The name may also be the
// table's ARN, which AWS accepts wherever a table is named.
func (db *DB) table(name string) (*Table, error) {
	name, err := db.tableName(name)
	if err != nil {
		return nil, err
	}
	db.mu.RLock()
	t := db.tables[name]
	db.mu.RUnlock()
	if t == nil {
		return nil, notFoundf("Requested resource not found: Table: %s not found", name)
	}
	return t, nil
}

// tableName checks a TableName parameter and returns the table's name (an ARN of
// this endpoint's account and region resolved to it).
func (db *DB) tableName(name string) (string, error) {
	if name == "" {
		return "", validationf("1 validation error detected: Value null at 'tableName' failed to satisfy constraint: Member must not be null")
	}
	if strings.HasPrefix(name, "arn:") {
		if rest, ok := strings.CutPrefix(name, db.arn("table/")); ok && !strings.Contains(rest, "/") {
			name = rest
		}
	}
	if err := checkTableName(name, "tableName"); err != nil {
		return "", err
	}
	return name, nil
}

// checkTableName refuses a table or index name outside AWS's constraints, naming
// the parameter (tableName, indexName) as AWS's message does.
func checkTableName(name, param string) error {
	switch {
	case len(name) < 3:
		return validationf("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must have length greater than or equal to 3", name, param)
	case len(name) > 255:
		return validationf("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must have length less than or equal to 255", name, param)
	case !validTableName(name):
		return validationf("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+", name, param)
	}
	return nil
}

// validTableName reports whether name is made of [a-zA-Z0-9_.-] only (the hot
// path's check: a regular expression costs a microsecond a call).
func validTableName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// Tables returns the tables in name order.
func (db *DB) Tables() []*Table {
	db.mu.RLock()
	defer db.mu.RUnlock()
	out := make([]*Table, 0, len(db.tables))
	for _, t := range db.tables {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (db *DB) arn(resource string) string {
	return "arn:aws:dynamodb:" + db.opts.Region + ":" + db.opts.AccountID + ":" + resource
}

// lockTables write-locks the tables in name order (no deadlock between two multi-table
// callers) and returns the function that unlocks them.
func lockTables(ts []*Table) func() {
	return lockInOrder(ts, (*sync.RWMutex).Lock, (*sync.RWMutex).Unlock)
}

// rlockTables read-locks the tables in name order and returns the unlock.
func rlockTables(ts []*Table) func() {
	return lockInOrder(ts, (*sync.RWMutex).RLock, (*sync.RWMutex).RUnlock)
}

// lockInOrder locks each distinct table of ts once, in name order, and returns the
// function that unlocks them in reverse.
func lockInOrder(ts []*Table, lock, unlock func(*sync.RWMutex)) func() {
	uniq := map[*Table]struct{}{}
	var list []*Table
	for _, t := range ts {
		if _, ok := uniq[t]; !ok {
			uniq[t] = struct{}{}
			list = append(list, t)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	for _, t := range list {
		lock(&t.mu)
	}
	return func() {
		for i := len(list) - 1; i >= 0; i-- {
			unlock(&list[i].mu)
		}
	}
}
