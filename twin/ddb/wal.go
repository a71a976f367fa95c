package ddb

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// Persistence (Options.DataDir): a write-ahead log of every change, and rare
// snapshots of the whole state.
//
// Each call that changes the state (an item write, a transaction, a batch, a TTL
// sweep's batch, a table's creation, change or deletion, an index becoming ACTIVE)
// appends one frame to wal-N.log before it is answered, while it still holds the
// locks of the tables it changed, so the log's order is the order the changes took
// effect in. A frame is length, CRC-32 and payload; a transaction is one frame, so
// it is replayed whole or not at all. The cost of a write is its own size.
//
// Fsync policy: a frame is written to the file with one write(2) before the call is
// answered, so a process that is killed (SIGKILL, a crash, OOM) loses nothing it
// acknowledged: the kernel holds the bytes. The log is fsynced once a second when it
// changed, and at every snapshot and on Close; a power cut or kernel crash can lose
// at most the last second. A local DynamoDB for tests and development trades that
// second for not paying a disk flush (milliseconds on many disks) on every write.
//
// A snapshot (snapshot-N.bin) is the state as of the start of wal-N.log: written
// when the log since the last snapshot outgrows the snapshot (and at least 64 MB),
// and on Close. It is taken at one cut (every change waits a moment while the
// tables' B-trees are cloned, copy-on-write, and the streams' record lists copied),
// written to a temporary file, fsynced and renamed; then the older snapshot and
// logs are removed. New loads the newest snapshot and replays the logs from its N
// on; a torn frame at the end of the last log (a write cut short) ends the replay.
//
// Items read back from a snapshot or a log stay in the file's bytes, in their binary
// form (entry.blob), until they are written again: a restored state takes about as
// much memory as its data; reads that need an item decode it, and reads that return
// whole items write their JSON from the binary form directly.
//
// The state file of earlier versions (ddb-state.json, the whole state as JSON) is
// read once when there is no snapshot or log yet, written as the first snapshot,
// and renamed to ddb-state.json.upgraded.

const (
	stateFile       = "ddb-state.json" // the JSON state of earlier versions (upgrade only)
	stateVersion    = 1
	walPrefix       = "wal-"
	walSuffix       = ".log"
	snapPrefix      = "snapshot-"
	snapSuffix      = ".bin"
	snapMagic       = "FLDDBSN1"
	minSnapshotWAL  = 64 << 20
	fsyncEvery      = time.Second
	frameHeaderSize = 8 // uint32 length, uint32 CRC-32 (IEEE) of the payload
)

// Entry kinds inside a frame.
const (
	entryWrite byte = iota + 1 // an item written or deleted
	entryTable                 // a table's definition, after CreateTable, UpdateTable, UpdateTimeToLive, an index change
	entryDrop                  // DeleteTable
)

// journal gathers one call's changes into a frame. A nil *journal (no DataDir, or a
// replay) takes nothing; every method is safe on nil.
type journal struct {
	p     *persister
	buf   []byte
	force *streamPlace  // replay: where the write's stream record goes
	blob  string        // replay: the written item's binary form, a substring of the log's bytes
	slab  *[]attr.Value // replay: where the kept items' key values go (journal.keep)
}

// keep copies a key value of a replayed write into the replay's slab (nil stays nil).
func (j *journal) keep(v *attr.Value) *attr.Value {
	if v == nil {
		return nil
	}
	if j.slab == nil || len(*j.slab) == cap(*j.slab) {
		s := make([]attr.Value, 0, 4096)
		j.slab = &s
	}
	*j.slab = append(*j.slab, *v)
	return &(*j.slab)[len(*j.slab)-1]
}

// blobOf is the binary form a replayed write keeps its item in ("" otherwise).
func (j *journal) blobOf() string {
	if j == nil {
		return ""
	}
	return j.blob
}

// begin starts the journal of a call that will change the state: nil when the DB
// keeps no DataDir. Until commit, a snapshot's cut waits for the call.
func (db *DB) begin() *journal {
	p := &db.ext.persist
	if p.dir == "" || p.broken != nil {
		return nil
	}
	p.cut.RLock()
	return &journal{p: p, buf: make([]byte, frameHeaderSize, 256)}
}

// commit writes the journal's frame to the log (one write(2)) and lets a snapshot
// go ahead. The caller still holds the locks of every table it changed. An error
// means the change is in memory but not in the log.
func (db *DB) commit(j *journal) error {
	if j == nil || j.p == nil {
		return nil
	}
	defer j.p.cut.RUnlock()
	if len(j.buf) == frameHeaderSize {
		return nil
	}
	if err := j.p.append(j.buf); err != nil {
		db.log.Error("ddb: writing the log", obs.KeyDir, j.p.dir, obs.Err(err))
		return newError(500, CodeInternalServerError, "Internal server error: the change could not be logged: %v", err)
	}
	return nil
}

func (j *journal) placement() *streamPlace {
	if j == nil {
		return nil
	}
	return j.force
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// write logs an item write (item nil: a delete) and where its stream record went.
func (j *journal) write(t *Table, key, item attr.Item, ident *UserIdentity, at time.Time, place streamPlace) {
	if j == nil || j.p == nil {
		return
	}
	b := append(j.buf, entryWrite)
	b = appendString(b, t.Name)
	b = binary.AppendVarint(b, at.UnixNano())
	if ident != nil {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	if item == nil {
		b = append(b, 0)
		b = attr.AppendFramed(b, t.KeyItem(key))
	} else {
		b = append(b, 1)
		b = attr.AppendFramed(b, item)
	}
	b = appendString(b, place.shard)
	b = binary.AppendUvarint(b, place.seq)
	j.buf = b
}

// table logs t's definition (schema, indexes, TTL, billing, stream). The caller
// holds t.mu.
func (j *journal) table(t *Table) {
	if j == nil || j.p == nil {
		return
	}
	def, _ := json.Marshal(tableHead(t))
	j.buf = appendString(append(j.buf, entryTable), string(def))
}

// drop logs the deletion of the named table at `at`.
func (j *journal) drop(name string, at time.Time) {
	if j == nil || j.p == nil {
		return
	}
	b := appendString(append(j.buf, entryDrop), name)
	j.buf = binary.AppendVarint(b, at.UnixNano())
}

// persister is the DataDir's log and snapshots.
type persister struct {
	db  *DB
	dir string

	cut sync.RWMutex // held shared by every call between begin and commit; a snapshot's cut holds it alone

	mu       sync.Mutex // guards what follows
	f        *os.File   // the log being appended to
	gen      int        // its N
	size     int64      // bytes in it
	snapSize int64      // size of the last snapshot
	dirty    bool       // written since the last fsync
	closed   bool
	snapping bool

	broken error // the DataDir could not be loaded: nothing is written then

	replaySlab *[]attr.Value // the key values of replayed items (journal.keep), during load only
	quit       chan struct{}
	done       chan struct{}
}

func (p *persister) init(db *DB) {
	p.db = db
	p.dir = db.opts.DataDir
}

func walPath(dir string, gen int) string {
	return filepath.Join(dir, walPrefix+strconv.Itoa(gen)+walSuffix)
}

func snapPath(dir string, gen int) string {
	return filepath.Join(dir, snapPrefix+strconv.Itoa(gen)+snapSuffix)
}

// append writes one frame (its header filled in here) to the log.
func (p *persister) append(frame []byte) error {
	payload := frame[frameHeaderSize:]
	binary.LittleEndian.PutUint32(frame[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(frame[4:8], crc32.ChecksumIEEE(payload))
	p.mu.Lock()
	if p.f == nil {
		p.mu.Unlock()
		return errors.New("the log is closed")
	}
	_, err := p.f.Write(frame)
	p.size += int64(len(frame))
	p.dirty = true
	snap := !p.snapping && p.size >= max(minSnapshotWAL, p.snapSize)
	if snap {
		p.snapping = true
	}
	p.mu.Unlock()
	if snap {
		go func() {
			if err := p.snapshot(); err != nil {
				p.db.log.Error("ddb: writing a snapshot", obs.KeyDir, p.dir, obs.Err(err))
			}
		}()
	}
	return err
}

// load restores the DataDir's state into the (empty) DB and opens the log for
// appending. A state that cannot be read is logged and left alone: the DB then
// runs in memory only rather than write over it (Open refuses to start).
func (p *persister) load() {
	if p.dir == "" {
		return
	}
	if err := p.loadDir(); err != nil {
		p.broken = err
		p.db.log.Error("ddb: loading the state; running without persistence", obs.KeyDir, p.dir, obs.Err(err))
		return
	}
	p.quit, p.done = make(chan struct{}), make(chan struct{})
	go p.syncLoop()
}

func (p *persister) loadDir() error {
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	snaps, wals, err := p.files()
	if err != nil {
		return err
	}
	from := 0
	if len(snaps) > 0 {
		from = snaps[len(snaps)-1]
		if err := p.readSnapshot(from); err != nil {
			return fmt.Errorf("reading %s: %w", filepath.Base(snapPath(p.dir, from)), err)
		}
	} else if len(wals) == 0 {
		upgraded, err := p.upgradeJSON()
		if err != nil {
			return err
		}
		if upgraded {
			return nil // the JSON state was written as snapshot 1, and wal-1 opened
		}
	}
	last := from
	for i, gen := range wals {
		if gen < from {
			continue
		}
		if err := p.replay(gen, i == len(wals)-1); err != nil {
			return fmt.Errorf("replaying %s: %w", filepath.Base(walPath(p.dir, gen)), err)
		}
		last = gen
	}
	p.replaySlab = nil
	p.db.streams.maintain(p.db.now())
	p.db.resumeIndexBuilds()
	// Loading left garbage (a log replay as much as the log is large): hand it back
	// to the system soon rather than hold it until the heap grows into it; in the
	// background, so that serving starts at once.
	go debug.FreeOSMemory()
	// New changes go to a log of their own: the replayed ones stay as they were
	// until the next snapshot covers them.
	return p.openLog(last + 1)
}

// files lists the generations of the snapshots and logs in the DataDir, ascending.
func (p *persister) files() (snaps, wals []int, err error) {
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		name := e.Name()
		if n, ok := genOf(name, snapPrefix, snapSuffix); ok {
			snaps = append(snaps, n)
		} else if n, ok := genOf(name, walPrefix, walSuffix); ok {
			wals = append(wals, n)
		}
	}
	sort.Ints(snaps)
	sort.Ints(wals)
	return snaps, wals, nil
}

func genOf(name, prefix, suffix string) (int, bool) {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, suffix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}

func (p *persister) openLog(gen int) error {
	f, err := os.OpenFile(walPath(p.dir, gen), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	syncDir(p.dir)
	p.mu.Lock()
	p.f, p.gen, p.size = f, gen, st.Size()
	p.mu.Unlock()
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// replay applies one log's frames. In the last log a torn frame at the end (a
// write the process did not finish) ends the replay; anywhere else it is corruption.
// The log is read whole and kept: the items it writes stay in its bytes (entry.blob).
func (p *persister) replay(gen int, last bool) error {
	b, err := os.ReadFile(walPath(p.dir, gen))
	if err != nil {
		return err
	}
	whole := unsafe.String(unsafe.SliceData(b), len(b))
	for off := 0; off < len(b); {
		if len(b)-off < frameHeaderSize {
			if last {
				return nil
			}
			return fmt.Errorf("frame at offset %d is cut short", off)
		}
		n := int(binary.LittleEndian.Uint32(b[off : off+4]))
		start := off + frameHeaderSize
		if n > len(b)-start || crc32.ChecksumIEEE(b[start:start+n]) != binary.LittleEndian.Uint32(b[off+4:off+8]) {
			if last {
				p.db.log.Warn("ddb: the log ends in a torn frame; replay stops there", obs.KeyFile, walPath(p.dir, gen), obs.KeyOffset, off)
				return nil
			}
			return fmt.Errorf("frame at offset %d is damaged", off)
		}
		if err := p.db.applyFrame(whole[start:start+n], start, whole); err != nil {
			return fmt.Errorf("frame at offset %d: %w", off, err)
		}
		off = start + n
	}
	return nil
}

// applyFrame replays one frame's entries; frame is whole[base:base+len(frame)].
func (db *DB) applyFrame(frame string, base int, whole string) error {
	b := unsafe.Slice(unsafe.StringData(frame), len(frame)) // read only
	for len(b) > 0 {
		kind := b[0]
		b = b[1:]
		var err error
		switch kind {
		case entryWrite:
			b, err = db.applyWrite(b, base+len(frame)-len(b), whole)
		case entryTable:
			var def []byte
			if def, b, err = readBytes(b); err == nil {
				err = db.applyTableDef(def)
			}
		case entryDrop:
			var name []byte
			if name, b, err = readBytes(b); err == nil {
				var at int64
				if at, b, err = readVarint(b); err == nil {
					db.applyDrop(string(name), time.Unix(0, at).UTC())
				}
			}
		default:
			err = fmt.Errorf("unknown entry kind %d", kind)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

var errShort = errors.New("entry cut short")

func readBytes(b []byte) ([]byte, []byte, error) {
	n, h := binary.Uvarint(b)
	if h <= 0 || n > uint64(len(b)-h) {
		return nil, nil, errShort
	}
	return b[h : h+int(n)], b[h+int(n):], nil
}

func readVarint(b []byte) (int64, []byte, error) {
	v, h := binary.Varint(b)
	if h <= 0 {
		return 0, nil, errShort
	}
	return v, b[h:], nil
}

func readUvarint(b []byte) (uint64, []byte, error) {
	v, h := binary.Uvarint(b)
	if h <= 0 {
		return 0, nil, errShort
	}
	return v, b[h:], nil
}

// applyWrite replays an item write; b is whole[off:].
func (db *DB) applyWrite(b []byte, off int, whole string) ([]byte, error) {
	n := len(b)
	name, b, err := readBytes(b)
	if err != nil {
		return nil, err
	}
	at, b, err := readVarint(b)
	if err != nil || len(b) < 2 {
		return nil, errShort
	}
	service, present := b[0] == 1, b[1] == 1
	itemAt := off + (n - len(b)) + 2
	it, next, err := attr.DecodeFramedIn(whole, itemAt)
	if err != nil {
		return nil, err
	}
	b = b[next-itemAt+2:]
	shard, b, err := readBytes(b)
	if err != nil {
		return nil, err
	}
	seq, b, err := readUvarint(b)
	if err != nil {
		return nil, err
	}
	t := db.tables[string(name)]
	if t == nil {
		return nil, fmt.Errorf("a write to table %s, which the log never created", name)
	}
	var ident *UserIdentity
	if service {
		ident = ttlIdentity
	}
	j := &journal{slab: db.ext.persist.replaySlab}
	defer func() { db.ext.persist.replaySlab = j.slab }()
	if len(shard) > 0 {
		j.force = &streamPlace{shard: string(shard), seq: seq}
	}
	key, item := t.KeyItem(it), it
	if present {
		j.blob = whole[itemAt:next]
	} else {
		item = nil
	}
	t.writeLocked(key, item, ident, time.Unix(0, at).UTC(), j)
	return b, nil
}

// tableHead is t's definition as the log and snapshots keep it. The caller holds t.mu.
func tableHead(t *Table) persistedTable {
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
		pt.StreamLabel, pt.StreamCreated = t.stream.Label, t.stream.created
	}
	for _, st := range t.streams {
		pt.StreamARNs = append(pt.StreamARNs, st.ARN)
	}
	return pt
}

// applyTableDef creates the table of a logged definition, or brings the existing
// one to it (indexes, TTL, billing, stream).
func (db *DB) applyTableDef(raw []byte) error {
	var pt persistedTable
	if err := json.Unmarshal(raw, &pt); err != nil {
		return err
	}
	t := db.tables[pt.Name]
	if t == nil {
		t = &Table{Name: pt.Name, ARN: pt.ARN, ID: pt.ID, Created: pt.Created, Hash: pt.Hash, Range: pt.Range, items: newTree()}
		db.tables[t.Name] = t
	}
	t.attrDefs, t.ttlAttr, t.billing = pt.AttrDefs, pt.TTLAttr, pt.Billing
	old := map[string]*Index{}
	for _, ix := range t.indexes() {
		old[ix.Name] = ix
	}
	restore := func(list []persistedIndex) []*Index {
		var out []*Index
		for _, pi := range list {
			ix := old[pi.Name]
			if ix == nil {
				ix = restoreIndex(pi)
				t.items.Ascend(func(e *entry) bool { // an index the log adds: built from the items so far
					if ie := ix.entryOf(t, e); ie != nil && indexKeyFits(ix, ie) {
						ix.items.ReplaceOrInsert(ie)
					}
					return true
				})
			}
			ix.status, ix.online = pi.Status, pi.Online
			if ix.status == "" {
				ix.status = indexActive
			}
			out = append(out, ix)
		}
		return out
	}
	t.setIndexes(restore(pt.GSIs), restore(pt.LSIs))
	if cur := t.stream; cur != nil && cur.ARN != pt.StreamARN {
		cur.disable(db.now())
		t.stream = nil
	}
	if pt.StreamARN != "" && t.stream == nil {
		t.stream = db.streams.revive(t, pt.StreamARN, pt.StreamLabel, pt.StreamView, pt.StreamCreated)
		t.streams = append(t.streams, t.stream)
	}
	return nil
}

func (db *DB) applyDrop(name string, at time.Time) {
	t := db.tables[name]
	if t == nil {
		return
	}
	delete(db.tables, name)
	t.deleted = true
	if t.stream != nil {
		t.stream.disable(at)
	}
}

// revive re-creates a table's stream with the ARN, label and creation time the log
// gives (a replay of the CreateTable or UpdateTable that made it).
func (s *streamState) revive(t *Table, arn, label, view string, created time.Time) *Stream {
	if st := s.lookupAny(arn); st != nil {
		st.mu.Lock()
		st.owner = t
		st.mu.Unlock()
		return st
	}
	ks := []keySchemaJSON{{AttributeName: t.Hash.Name, KeyType: "HASH"}}
	if t.Range.Name != "" {
		ks = append(ks, keySchemaJSON{AttributeName: t.Range.Name, KeyType: "RANGE"})
	}
	st := &Stream{ARN: arn, Label: label, ViewType: view, db: s.db, tableName: t.Name, keySchema: ks, created: created, owner: t,
		byID: map[string]*shard{}, next: uint64(created.UnixMicro())}
	st.openShard(created, "")
	s.mu.Lock()
	s.by[arn] = st
	s.mu.Unlock()
	return st
}

// resumeIndexBuilds restarts the backfill of every index a restart found CREATING,
// and finishes the deletes it found DELETING.
func (db *DB) resumeIndexBuilds() {
	for _, t := range db.tables {
		for _, ix := range t.GSIs() {
			if ix.status == indexCreating {
				ix.backfilling = false
				go db.buildIndex(t, ix)
			}
		}
	}
}

// ---- snapshots ----

// snapshotMeta is a snapshot's header: everything but the items and the stream
// records, which follow it in binary.
type snapshotMeta struct {
	Version int
	Gen     int
	Saved   time.Time
	Tables  []persistedTable
	Streams streamsSnap
}

// snapshot writes the state as snapshot-(N+1) and starts wal-(N+1), then removes
// what the snapshot covers.
func (p *persister) snapshot() error {
	p.cut.Lock()
	all := p.db.Tables()
	unlock := rlockTables(all)
	tables := make([]tableSnap, 0, len(all))
	for _, t := range all {
		tables = append(tables, tableSnap{head: tableHead(t), items: t.items.Clone()})
	}
	streams := p.db.streams.snapshot().(streamsSnap)
	unlock()
	p.mu.Lock()
	gen := p.gen + 1
	old := p.f
	err := p.openLogLocked(gen)
	p.mu.Unlock()
	p.cut.Unlock()
	if err != nil {
		return err
	}
	if old != nil {
		_ = old.Sync()
		old.Close()
	}
	size, err := writeSnapshot(p.dir, gen, p.db.now().UTC(), tables, streams)
	p.mu.Lock()
	p.snapping = false
	if err == nil {
		p.snapSize = size
	}
	p.mu.Unlock()
	if err != nil {
		return err
	}
	snaps, wals, err := p.files()
	if err != nil {
		return err
	}
	for _, n := range snaps {
		if n < gen {
			os.Remove(snapPath(p.dir, n))
		}
	}
	for _, n := range wals {
		if n < gen {
			os.Remove(walPath(p.dir, n))
		}
	}
	return nil
}

// openLogLocked is openLog for a caller that holds p.mu.
func (p *persister) openLogLocked(gen int) error {
	f, err := os.OpenFile(walPath(p.dir, gen), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	syncDir(p.dir)
	p.f, p.gen, p.size, p.dirty = f, gen, 0, false
	return nil
}

func writeSnapshot(dir string, gen int, saved time.Time, tables []tableSnap, streams streamsSnap) (int64, error) {
	meta := snapshotMeta{Version: stateVersion, Gen: gen, Saved: saved, Streams: streams}
	for _, ts := range tables {
		meta.Tables = append(meta.Tables, ts.head)
	}
	// The records go in binary after the header: strip them from its copy.
	recs := make([][]recordSnap, 0)
	meta.Streams.Streams = append([]streamSnap(nil), streams.Streams...)
	for i := range meta.Streams.Streams {
		shards := append([]shardSnap(nil), meta.Streams.Streams[i].Shards...)
		for k := range shards {
			recs = append(recs, shards[k].Records)
			shards[k].Records = nil
		}
		meta.Streams.Streams[i].Shards = shards
	}
	head, err := json.Marshal(meta)
	if err != nil {
		return 0, err
	}
	f, err := os.CreateTemp(dir, snapPrefix+"tmp-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name()) // a no-op after the rename
	h := crc32.NewIEEE()
	w := bufio.NewWriterSize(io.MultiWriter(f, h), 1<<20)
	var buf []byte
	put := func(b []byte) { _, _ = w.Write(b) }
	put([]byte(snapMagic))
	put(appendString(nil, string(head)))
	for _, ts := range tables {
		put(binary.AppendUvarint(nil, uint64(ts.items.Len())))
		ts.items.Ascend(func(e *entry) bool {
			if e.blob != "" {
				buf = append(buf[:0], e.blob...)
			} else {
				buf = attr.AppendFramed(buf[:0], e.item)
			}
			put(buf)
			return true
		})
	}
	for _, rs := range recs {
		put(binary.AppendUvarint(nil, uint64(len(rs))))
		for _, r := range rs {
			buf = binary.AppendUvarint(buf[:0], r.Seq)
			buf = binary.AppendVarint(buf, r.At.UnixNano())
			buf = appendString(buf, r.Name)
			var flags byte
			if r.Old != nil {
				flags |= 1
			}
			if r.New != nil {
				flags |= 2
			}
			if r.Ident != nil {
				flags |= 4
			}
			buf = append(buf, flags)
			buf = attr.AppendFramed(buf, r.Keys)
			if r.Old != nil {
				buf = attr.AppendFramed(buf, r.Old)
			}
			if r.New != nil {
				buf = attr.AppendFramed(buf, r.New)
			}
			buf = binary.AppendUvarint(buf, uint64(r.Size))
			put(buf)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], h.Sum32())
	if _, err := f.Write(sum[:]); err != nil {
		f.Close()
		return 0, err
	}
	st, _ := f.Stat()
	if err := f.Sync(); err != nil {
		f.Close()
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	if err := os.Rename(f.Name(), snapPath(dir, gen)); err != nil {
		return 0, err
	}
	syncDir(dir)
	return st.Size(), nil
}

// readSnapshot loads snapshot-gen into the (empty) DB.
func (p *persister) readSnapshot(gen int) error {
	b, err := os.ReadFile(snapPath(p.dir, gen))
	if err != nil {
		return err
	}
	if len(b) < len(snapMagic)+4 || string(b[:len(snapMagic)]) != snapMagic {
		return errors.New("not a snapshot of this server")
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return errors.New("checksum mismatch")
	}
	// The items' names and texts stay in the file's bytes, read once and never
	// changed: no copy per item, and no allocation rounding either. The bytes live
	// as long as one item of the snapshot does (an item replaced since keeps its old
	// bytes until then), at most the snapshot's size.
	whole := unsafe.String(unsafe.SliceData(body), len(body))
	decode := func(rest []byte) (attr.Item, []byte, error) {
		it, next, err := attr.DecodeFramedIn(whole, len(body)-len(rest))
		if err != nil {
			return nil, nil, err
		}
		return it, body[next:], nil
	}
	rest := body[len(snapMagic):]
	head, rest, err := readBytes(rest)
	if err != nil {
		return err
	}
	var meta snapshotMeta
	if err := json.Unmarshal(head, &meta); err != nil {
		return err
	}
	db := p.db
	tables := make([]*Table, 0, len(meta.Tables))
	for _, pt := range meta.Tables {
		t := newRestoredTable(pt)
		n, r, err := readUvarint(rest)
		if err != nil {
			return err
		}
		rest = r
		if len(t.indexes()) == 0 {
			// No index to feed: each item's key values are copied into one slab
			// (decoding whole items would leave two thirds of every small-object
			// span as garbage the runtime cannot hand back) and its size read
			// off its binary form.
			perItem := 1
			if t.Range.Name != "" {
				perItem = 2
			}
			slab := make([]attr.Value, 0, int(n)*perItem)
			key := func(blob, name string) (*attr.Value, error) {
				v := attr.LookupFramed(blob, name)
				if v == nil {
					return nil, fmt.Errorf("an item of %s has no key attribute %s", t.Name, name)
				}
				slab = append(slab, *v)
				return &slab[len(slab)-1], nil
			}
			for i := uint64(0); i < n; i++ {
				start := len(body) - len(rest)
				end, err := attr.FramedEnd(whole, start)
				if err != nil {
					return err
				}
				blob := whole[start:end]
				rest = body[end:]
				e := &entry{blob: blob}
				if e.hk, err = key(blob, t.Hash.Name); err != nil {
					return err
				}
				if t.Range.Name != "" {
					if e.rk, err = key(blob, t.Range.Name); err != nil {
						return err
					}
				}
				size, err := attr.FramedSize(blob)
				if err != nil {
					return err
				}
				t.items.ReplaceOrInsert(e)
				t.sizeBytes += int64(size)
			}
		} else {
			for i := uint64(0); i < n; i++ {
				start := len(body) - len(rest)
				var it attr.Item
				if it, rest, err = decode(rest); err != nil {
					return err
				}
				t.loadLocked(it, whole[start:len(body)-len(rest)])
			}
		}
		tables = append(tables, t)
	}
	for si := range meta.Streams.Streams {
		shards := meta.Streams.Streams[si].Shards
		for k := range shards {
			n, r, err := readUvarint(rest)
			if err != nil {
				return err
			}
			rest = r
			recs := make([]recordSnap, 0, n)
			for i := uint64(0); i < n; i++ {
				var rs recordSnap
				var at int64
				var name []byte
				if rs.Seq, rest, err = readUvarint(rest); err != nil {
					return err
				}
				if at, rest, err = readVarint(rest); err != nil {
					return err
				}
				if name, rest, err = readBytes(rest); err != nil || len(rest) == 0 {
					return errShort
				}
				rs.At, rs.Name = time.Unix(0, at).UTC(), string(name)
				flags := rest[0]
				rest = rest[1:]
				if rs.Keys, rest, err = decode(rest); err != nil {
					return err
				}
				if flags&1 != 0 {
					if rs.Old, rest, err = decode(rest); err != nil {
						return err
					}
				}
				if flags&2 != 0 {
					if rs.New, rest, err = decode(rest); err != nil {
						return err
					}
				}
				if flags&4 != 0 {
					rs.Ident = ttlIdentity
				}
				var size uint64
				if size, rest, err = readUvarint(rest); err != nil {
					return err
				}
				rs.Size = int(size)
				recs = append(recs, rs)
			}
			shards[k].Records = recs
		}
	}
	if len(rest) != 0 {
		return errors.New("trailing bytes")
	}
	if err := db.streams.restoreSnap(meta.Streams); err != nil {
		return err
	}
	for i, t := range tables {
		linkStreams(db, t, meta.Tables[i])
		db.tables[t.Name] = t
	}
	p.snapSize = int64(len(b))
	return nil
}

// newRestoredTable makes an empty table of a persisted definition.
func newRestoredTable(pt persistedTable) *Table {
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
	return t
}

// linkStreams points a restored table at its restored streams (a stream whose
// records were not kept starts afresh).
func linkStreams(db *DB, t *Table, pt persistedTable) {
	for _, arn := range pt.StreamARNs {
		if s := db.streams.lookupAny(arn); s != nil {
			s.mu.Lock()
			if !s.disabled {
				s.owner = t
			}
			s.mu.Unlock()
			t.streams = append(t.streams, s)
			if arn == pt.StreamARN {
				t.stream = s
			}
		}
	}
	if pt.StreamView != "" && t.stream == nil {
		t.stream = newStream(db, t, pt.StreamView, db.now())
		t.streams = append(t.streams, t.stream)
	}
}

// syncLoop fsyncs the log once a second when it changed.
func (p *persister) syncLoop() {
	defer close(p.done)
	tick := time.NewTicker(fsyncEvery)
	defer tick.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-tick.C:
			p.mu.Lock()
			f, dirty := p.f, p.dirty
			p.dirty = false
			p.mu.Unlock()
			if dirty && f != nil {
				_ = f.Sync()
			}
		}
	}
}

// close writes a last snapshot (so the next start reads no log) and closes the log.
func (p *persister) close() error {
	if p.dir == "" {
		return nil
	}
	if p.broken != nil {
		return fmt.Errorf("ddb: not writing %s: its state could not be loaded: %w", p.dir, p.broken)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	close(p.quit)
	<-p.done
	// A snapshot the log triggered may be under way: wait for it, then write ours.
	for {
		p.mu.Lock()
		busy := p.snapping
		if !busy {
			p.snapping = true
		}
		p.mu.Unlock()
		if !busy {
			break
		}
		time.Sleep(time.Millisecond)
	}
	err := p.snapshot()
	p.cut.Lock()
	p.mu.Lock()
	if p.f != nil {
		if serr := p.f.Sync(); err == nil {
			err = serr
		}
		p.f.Close()
		p.f = nil
	}
	p.mu.Unlock()
	p.cut.Unlock()
	return err
}

// upgradeJSON reads the JSON state file of earlier versions, if there is one,
// writes it as snapshot 1, opens wal-1 and renames the JSON file aside.
func (p *persister) upgradeJSON() (bool, error) {
	file := filepath.Join(p.dir, stateFile)
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err := p.loadFile(); err != nil {
		return false, fmt.Errorf("upgrading %s: %w", stateFile, err)
	}
	p.db.streams.maintain(p.db.now())
	p.mu.Lock()
	p.gen, p.snapping = 0, true // the snapshot is 1, and opens wal-1
	p.mu.Unlock()
	if err := p.snapshot(); err != nil {
		return false, err
	}
	if err := os.Rename(file, file+".upgraded"); err != nil {
		return false, err
	}
	p.db.log.Info("ddb: upgraded the JSON state to a snapshot and a log; the old file can be removed", obs.KeyFile, file+".upgraded")
	return true, nil
}
