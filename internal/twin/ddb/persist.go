package ddb

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fourlanes/fourlanes/internal/twin/ddb/attr"
	"github.com/google/btree"
)

// Persistence (Options.DataDir): the whole state (tables with their schema, TTL
// attribute, stream settings and items, and the streams when the stream state can
// snapshot itself) is written to DataDir/stateFile at most every flushEvery after a
// change, and on Close, atomically (temporary file, fsync, rename). New loads it.
// A snapshot read-locks every table, clones each B-tree (copy-on-write, O(1)) and copies
// the streams' record lists, then encodes outside the locks, so writers wait only for
// the copies, and items and stream records are one consistent cut.

const (
	stateFile    = "ddb-state.json"
	stateVersion = 1
	flushEvery   = 200 * time.Millisecond
)

// streamSnapshotter is what the stream state offers to persistence, when it does:
// snapshot returns a JSON-encodable value; restore takes that value's JSON back.
type streamSnapshotter interface {
	snapshot() any
}

type streamRestorer interface {
	restore(json.RawMessage) error
	lookupAny(arn string) *Stream
}

type persister struct {
	db  *DB
	dir string

	flushMu sync.Mutex // one flush at a time

	mu     sync.Mutex
	timer  *time.Timer
	closed bool
	broken error // set when the file could not be loaded: never overwrite it then
}

func (p *persister) init(db *DB) {
	p.db = db
	p.dir = db.opts.DataDir
}

type persistedState struct {
	Version int
	Saved   time.Time
	Tables  []persistedTable `json:",omitempty"`
	Streams json.RawMessage  `json:",omitempty"`
}

type persistedIndex struct {
	Name           string
	Global         bool
	Hash, Range    KeyDef
	ProjectionType string
	NonKey         []string `json:",omitempty"`
}

type persistedTable struct {
	Name, ARN, ID string
	Created       time.Time
	Hash, Range   KeyDef
	AttrDefs      []KeyDef
	GSIs, LSIs    []persistedIndex `json:",omitempty"`
	TTLAttr       string           `json:",omitempty"`
	Billing       string
	StreamView    string   `json:",omitempty"` // the enabled stream's view type
	StreamARN     string   `json:",omitempty"` // the enabled stream
	StreamARNs    []string `json:",omitempty"` // every stream the table has had
	// Items are written one by one from a clone of the table's tree (writeState), so a
	// snapshot never holds a second copy of a table; read back all at once.
	Items []attr.Item `json:",omitempty"`
}

// tableSnap is one table's settings and a copy-on-write clone of its items.
type tableSnap struct {
	head  persistedTable
	items *btree.BTreeG[*entry]
}

func (p *persister) changed() {
	if p.dir == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer == nil && !p.closed {
		p.timer = time.AfterFunc(flushEvery, func() {
			p.mu.Lock()
			p.timer = nil
			p.mu.Unlock()
			if err := p.flush(true); err != nil {
				p.db.log.Error("ddb: writing the state", "dir", p.dir, "err", err)
			}
		})
	}
}

func (p *persister) close() error {
	if p.dir == "" {
		return nil
	}
	p.mu.Lock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.mu.Unlock()
	return p.flush(false)
}

// flush writes the state now. A timer's flush that finds the DB closed does nothing:
// Close has written (or is writing) the last state, and nothing may follow it.
func (p *persister) flush(timer bool) error {
	if p.broken != nil {
		return fmt.Errorf("ddb: not writing %s: it could not be loaded: %w", stateFile, p.broken)
	}
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	if timer {
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return nil
		}
	}
	// One consistent cut: every table stays read-locked until the streams are copied.
	// A write appends its stream record under its table's write lock, so no record in
	// the snapshot lacks its item change, and no item change lacks its record.
	all := p.db.Tables()
	unlock := rlockTables(all)
	tables := make([]tableSnap, 0, len(all))
	for _, t := range all {
		tables = append(tables, snapshotTableLocked(t))
	}
	var streamCopy any
	if s, ok := any(&p.db.streams).(streamSnapshotter); ok {
		streamCopy = s.snapshot()
	}
	unlock()
	var streams json.RawMessage
	if streamCopy != nil {
		b, err := json.Marshal(streamCopy)
		if err != nil {
			return fmt.Errorf("ddb: encoding the streams: %w", err)
		}
		streams = b
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return fmt.Errorf("ddb: data dir: %w", err)
	}
	f, err := os.CreateTemp(p.dir, stateFile+".tmp-*")
	if err != nil {
		return fmt.Errorf("ddb: state file: %w", err)
	}
	defer os.Remove(f.Name()) // a no-op after the rename
	w := bufio.NewWriterSize(f, 1<<20)
	if err := writeState(w, p.db.now().UTC(), tables, streams); err != nil {
		f.Close()
		return fmt.Errorf("ddb: encoding the state: %w", err)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("ddb: writing the state: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("ddb: syncing the state: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("ddb: closing the state: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(p.dir, stateFile)); err != nil {
		return fmt.Errorf("ddb: replacing the state: %w", err)
	}
	if d, err := os.Open(p.dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// snapshotTableLocked copies t's settings and clones its items; the caller holds t.mu.
func snapshotTableLocked(t *Table) tableSnap {
	pt := persistedTable{
		Name: t.Name, ARN: t.ARN, ID: t.ID, Created: t.Created,
		Hash: t.Hash, Range: t.Range, AttrDefs: t.attrDefs,
		TTLAttr: t.ttlAttr, Billing: t.billing,
	}
	for _, ix := range t.GSIs() {
		pt.GSIs = append(pt.GSIs, persistIndex(ix))
	}
	for _, ix := range t.LSIs() {
		pt.LSIs = append(pt.LSIs, persistIndex(ix))
	}
	if t.stream != nil {
		pt.StreamView, pt.StreamARN = t.stream.ViewType, t.stream.ARN
	}
	for _, st := range t.streams {
		pt.StreamARNs = append(pt.StreamARNs, st.ARN)
	}
	return tableSnap{head: pt, items: t.items.Clone()}
}

// writeState writes persistedState's JSON, streaming each table's items from its clone.
func writeState(w *bufio.Writer, saved time.Time, tables []tableSnap, streams json.RawMessage) error {
	head, err := json.Marshal(persistedState{Version: stateVersion, Saved: saved})
	if err != nil {
		return err
	}
	w.Write(head[:len(head)-1]) // the object without its closing brace
	w.WriteString(`,"Tables":[`)
	for i, ts := range tables {
		if i > 0 {
			w.WriteByte(',')
		}
		th, err := json.Marshal(ts.head)
		if err != nil {
			return err
		}
		w.Write(th[:len(th)-1])
		w.WriteString(`,"Items":[`)
		first := true
		ts.items.Ascend(func(e *entry) bool {
			if !first {
				w.WriteByte(',')
			}
			first = false
			b, _ := e.item.MarshalJSON()
			w.Write(b)
			return true
		})
		w.WriteString("]}")
	}
	w.WriteByte(']')
	if len(streams) > 0 {
		w.WriteString(`,"Streams":`)
		w.Write(streams)
	}
	_, err = w.WriteString("}\n")
	return err
}

func persistIndex(ix *Index) persistedIndex {
	return persistedIndex{Name: ix.Name, Global: ix.Global, Hash: ix.Hash, Range: ix.Range, ProjectionType: ix.ProjectionType, NonKey: ix.NonKey}
}

// load reads DataDir's state into the (empty) DB. A file that cannot be read is logged
// and left alone: the DB then runs in memory only rather than overwrite it.
func (p *persister) load() {
	if p.dir == "" {
		return
	}
	if err := p.loadFile(); err != nil {
		p.broken = err
		p.db.log.Error("ddb: loading the state; running without persistence", "dir", p.dir, "err", err)
	}
}

func (p *persister) loadFile() error {
	f, err := os.Open(filepath.Join(p.dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	var st persistedState
	if err := json.NewDecoder(bufio.NewReaderSize(f, 1<<20)).Decode(&st); err != nil {
		return fmt.Errorf("decoding %s: %w", stateFile, err)
	}
	if st.Version != stateVersion {
		return fmt.Errorf("%s has version %d, want %d", stateFile, st.Version, stateVersion)
	}
	db := p.db
	restorer, canRestore := any(&db.streams).(streamRestorer)
	if canRestore && len(st.Streams) > 0 {
		if err := restorer.restore(st.Streams); err != nil {
			return fmt.Errorf("restoring the streams: %w", err)
		}
	}
	for _, pt := range st.Tables {
		t := &Table{
			Name: pt.Name, ARN: pt.ARN, ID: pt.ID, Created: pt.Created,
			Hash: pt.Hash, Range: pt.Range, attrDefs: pt.AttrDefs,
			items: newTree(), ttlAttr: pt.TTLAttr, billing: pt.Billing,
		}
		var gsis, lsis []*Index
		for _, pi := range pt.GSIs {
			gsis = append(gsis, restoreIndex(pi))
		}
		for _, pi := range pt.LSIs {
			lsis = append(lsis, restoreIndex(pi))
		}
		t.setIndexes(gsis, lsis)
		for _, it := range pt.Items {
			t.writeLocked(t.KeyItem(it), it, nil, pt.Created) // no stream linked yet: no records
		}
		if canRestore {
			for _, arn := range pt.StreamARNs {
				if s := restorer.lookupAny(arn); s != nil {
					t.streams = append(t.streams, s)
					if arn == pt.StreamARN {
						t.stream = s
					}
				}
			}
		}
		if pt.StreamView != "" && t.stream == nil {
			// The streams' records were not kept: a new, empty stream.
			t.stream = newStream(db, t, pt.StreamView, db.now())
			t.streams = append(t.streams, t.stream)
		}
		db.mu.Lock()
		db.tables[t.Name] = t
		db.mu.Unlock()
	}
	return nil
}

func restoreIndex(pi persistedIndex) *Index {
	return &Index{Name: pi.Name, Global: pi.Global, Hash: pi.Hash, Range: pi.Range, ProjectionType: pi.ProjectionType, NonKey: pi.NonKey, items: newTree(), status: indexActive}
}
