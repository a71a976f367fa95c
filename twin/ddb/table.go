package ddb

import (
	"github.com/fourlanes/fourlanes/twin/ddb/attr"

	"bytes"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
)

// KeyDef names one key attribute and its scalar type (S, N or B).
type KeyDef struct {
	Name string
	Type attr.Kind
}

// Index is a secondary index: its own key schema over the table's items, kept in
// key order like the table (GSI or LSI), with the projection DynamoDB applies.
type Index struct {
	Name           string
	Global         bool
	Hash, Range    KeyDef // Range.Name is empty without a sort key
	ProjectionType string // ALL, KEYS_ONLY or INCLUDE
	NonKey         []string
	items          *btree.BTreeG[*entry]

	// Guarded by the table's mutex: the index's IndexStatus (ACTIVE, CREATING or
	// DELETING), whether it is being backfilled, and whether UpdateTable made it
	// (only those show Backfilling, as on AWS).
	status      string
	backfilling bool
	online      bool
}

// Index statuses, as DescribeTable spells them.
const (
	indexActive   = "ACTIVE"
	indexCreating = "CREATING"
	indexDeleting = "DELETING"
)

// indexSet is a table's secondary indexes. It is replaced whole, never changed, so
// that validation outside the table's lock reads a consistent set.
type indexSet struct {
	gsis, lsis []*Index
	all        []*Index // LSIs then GSIs
}

var noIndexes = &indexSet{}

// Table is one table: key schema, items in DynamoDB's key order, secondary indexes,
// stream and TTL. Its mutex guards everything below it; operations take it through
// lockTables (writes) or mu.RLock (reads), so each is linearizable.
type Table struct {
	Name    string
	ARN     string
	ID      string
	Created time.Time

	Hash, Range KeyDef // Range.Name is empty without a sort key

	ixs atomic.Pointer[indexSet] // the indexes items are written to (setIndexes)

	mu        sync.RWMutex
	attrDefs  []KeyDef // AttributeDefinitions: every key attribute of the table and its indexes
	deleting  []*Index // GSIs being deleted: described as DELETING, no longer written
	items     *btree.BTreeG[*entry]
	sizeBytes int64
	ttlAttr   string        // "" when TTL is off
	stream    *Stream       // nil when the table has no stream enabled
	streams   []*Stream     // every stream the table has had (latest last), for ListStreams
	billing   string        // PAY_PER_REQUEST or PROVISIONED, echoed by DescribeTable
	extra     tableExtState // what the operation files keep per table
	deleted   bool
}

// entry is one item in an ordered index with its decoded key values.
type entry struct {
	hk, rk *attr.Value // the index's key values (rk nil without a sort key)
	pk, sk *attr.Value // the table's key values (for index entries: the base item's key)
	item   attr.Item
	// blob, when item is nil, is the item in its binary form (attr.AppendFramed):
	// an item read back from disk stays so, a substring of the file's bytes, until
	// it is written again, and is decoded on each read (value). It keeps a restored
	// state about as large as its data.
	blob string
}

// value returns the entry's item, decoding it when it is kept in binary form.
func (e *entry) value() attr.Item {
	if e.item != nil || e.blob == "" {
		return e.item
	}
	it, _, err := attr.DecodeFramedIn(e.blob, 0)
	if err != nil {
		panic("ddb: a stored item does not decode: " + err.Error()) // checked by CRC when read from disk
	}
	return it
}

// lessKeys orders by partition key, then sort key, as DynamoDB's key order does
// (S and B bytewise, N numerically). Within a secondary index, entries with equal
// index keys are ordered by the table's key so that each is distinct.
func lessEntries(a, b *entry) bool {
	if c := compareKey(a.hk, b.hk); c != 0 {
		return c < 0
	}
	if c := compareKey(a.rk, b.rk); c != 0 {
		return c < 0
	}
	if c := compareKey(a.pk, b.pk); c != 0 {
		return c < 0
	}
	return compareKey(a.sk, b.sk) < 0
}

func compareKey(a, b *attr.Value) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	if a.Kind != b.Kind {
		return int(a.Kind) - int(b.Kind)
	}
	switch a.Kind {
	case attr.KindS:
		return strings.Compare(a.S, b.S)
	case attr.KindN:
		return attr.CompareNumbers(a.S, b.S)
	case attr.KindB:
		return bytes.Compare(a.B, b.B)
	}
	return 0
}

func newTree() *btree.BTreeG[*entry] { return btree.NewG(32, lessEntries) }

// keyOf returns the table's key values of item (nil when missing: callers validate first).
func (t *Table) keyOf(item attr.Item) (hk, rk *attr.Value) {
	hk = item[t.Hash.Name]
	if t.Range.Name != "" {
		rk = item[t.Range.Name]
	}
	return hk, rk
}

// KeyItem returns just the key attributes of item.
func (t *Table) KeyItem(item attr.Item) attr.Item {
	k := attr.Item{t.Hash.Name: item[t.Hash.Name]}
	if t.Range.Name != "" {
		k[t.Range.Name] = item[t.Range.Name]
	}
	return k
}

// getLocked returns the stored item with the key in key (nil when absent). The caller
// holds t.mu (read or write). The item must not be changed.
func (t *Table) getLocked(key attr.Item) attr.Item {
	if e := t.getEntryLocked(key); e != nil {
		return e.value()
	}
	return nil
}

// getEntryLocked returns the tree entry of the item with the key in key (nil when
// absent). The caller holds t.mu.
func (t *Table) getEntryLocked(key attr.Item) *entry {
	hk, rk := t.keyOf(key)
	e, ok := t.items.Get(&entry{hk: hk, rk: rk})
	if !ok {
		return nil
	}
	return e
}

// writeLocked replaces the item with the key of key by item (item nil deletes it),
// keeps the secondary indexes and size in step, and hands the change to the stream.
// ident marks a change made by the service itself (TTL); nil otherwise. It returns the
// old item (nil when there was none). The caller holds t.mu for writing and has
// validated item. A write that changes nothing reaches no stream, as on AWS.
//
// j, when the DB keeps a DataDir, takes the change for the log (wal.go); during a
// replay of the log it carries where the change's stream record went, so the
// record lands in the same shard with the same sequence number.
func (t *Table) writeLocked(key, item attr.Item, ident *UserIdentity, at time.Time, j *journal) (old attr.Item) {
	hk, rk := t.keyOf(key)
	probe := &entry{hk: hk, rk: rk}
	if prev, ok := t.items.Get(probe); ok {
		old = prev.value()
	}
	blob := j.blobOf()
	if item == nil {
		if old == nil {
			return nil
		}
		t.items.Delete(probe)
		t.sizeBytes -= int64(old.Size())
	} else {
		e := &entry{hk: hk, rk: rk, item: item}
		if blob != "" {
			// A replayed write keeps the item in the log's bytes; its key values
			// move to the replay's slab, so that the decoded rest can be freed
			// whole.
			e.item, e.blob = nil, blob
			e.hk, e.rk = j.keep(hk), j.keep(rk)
		}
		t.items.ReplaceOrInsert(e)
		if old != nil {
			t.sizeBytes -= int64(old.Size())
		}
		t.sizeBytes += int64(item.Size())
	}
	for _, ix := range t.indexes() {
		ix.update(t, old, item, blob)
	}
	var place streamPlace
	if t.stream != nil && !(old == nil && item == nil) && !(old != nil && item != nil && attr.EqualItems(old, item)) {
		place = t.stream.record(t.KeyItem(key), old, item, ident, at, j.placement())
	}
	j.write(t, key, item, ident, at, place)
	return old
}

// indexes returns every index the table's items are written to (GSIs being
// created included). Safe without the table's lock.
func (t *Table) indexes() []*Index { return t.indexSet().all }

// loadLocked adds an item of a snapshot, whose keys are all distinct, to a table
// being restored: writeLocked without the look-up of an old item, the stream or the
// log. The caller owns t alone.
//
// blob is the item's binary form to keep instead of item ("" keeps item).
func (t *Table) loadLocked(item attr.Item, blob string) {
	hk, rk := t.keyOf(item)
	e := &entry{hk: hk, rk: rk, item: item}
	if blob != "" {
		e.item, e.blob = nil, blob
	}
	t.items.ReplaceOrInsert(e)
	t.sizeBytes += int64(item.Size())
	for _, ix := range t.indexes() {
		ix.update(t, nil, item, blob)
	}
}

func (t *Table) indexSet() *indexSet {
	if s := t.ixs.Load(); s != nil {
		return s
	}
	return noIndexes
}

// GSIs returns the table's global secondary indexes (those being created too).
func (t *Table) GSIs() []*Index { return t.indexSet().gsis }

// LSIs returns the table's local secondary indexes.
func (t *Table) LSIs() []*Index { return t.indexSet().lsis }

// setIndexes replaces the table's indexes. The caller holds t.mu for writing (or
// owns t alone, before it is shared).
func (t *Table) setIndexes(gsis, lsis []*Index) {
	all := make([]*Index, 0, len(gsis)+len(lsis))
	all = append(append(all, lsis...), gsis...)
	t.ixs.Store(&indexSet{gsis: gsis, lsis: lsis, all: all})
}

// update moves an item's index entry from its old to its new version. An item that
// lacks an index key attribute (or has it with another type) is not in the index.
//
// blob, when not "", is item's binary form, which the new entry keeps instead.
func (ix *Index) update(t *Table, old, item attr.Item, blob string) {
	if old != nil {
		if e := ix.entryFor(t, old); e != nil {
			ix.items.Delete(e)
		}
	}
	if item != nil {
		// An item whose key breaks the index's key limits can be in the table only
		// from before the index existed (writes since are refused): it stays out of
		// the index, as the backfill leaves it out, also when a restart rebuilds it.
		if e := ix.entryFor(t, item); e != nil && indexKeyFits(ix, e) {
			if blob != "" {
				e.item, e.blob = nil, blob
			}
			ix.items.ReplaceOrInsert(e)
		}
	}
}

func (ix *Index) entryFor(t *Table, item attr.Item) *entry {
	hk := item[ix.Hash.Name]
	if hk == nil || hk.Kind != ix.Hash.Type {
		return nil
	}
	var rk *attr.Value
	if ix.Range.Name != "" {
		rk = item[ix.Range.Name]
		if rk == nil || rk.Kind != ix.Range.Type {
			return nil
		}
	}
	pk, sk := t.keyOf(item)
	return &entry{hk: hk, rk: rk, pk: pk, sk: sk, item: item}
}

// entryOf is entryFor of a table entry, keeping its binary form when it has one.
func (ix *Index) entryOf(t *Table, te *entry) *entry {
	e := ix.entryFor(t, te.value())
	if e != nil && te.blob != "" {
		e.item, e.blob = nil, te.blob
	}
	return e
}

// Project returns the attributes of item that the index holds.
func (ix *Index) Project(t *Table, item attr.Item) attr.Item {
	if ix.ProjectionType == "ALL" {
		return item
	}
	out := attr.Item{}
	for _, k := range []string{t.Hash.Name, t.Range.Name, ix.Hash.Name, ix.Range.Name} {
		if k != "" && item[k] != nil {
			out[k] = item[k]
		}
	}
	if ix.ProjectionType == "INCLUDE" {
		for _, k := range ix.NonKey {
			if item[k] != nil {
				out[k] = item[k]
			}
		}
	}
	return out
}

// ItemCount returns how many items the table holds.
func (t *Table) ItemCount() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.items.Len()
}
