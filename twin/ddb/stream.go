package ddb

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// Streams: every change of an item becomes a record in its table's stream, in the
// order the table's write lock committed it; records live in shards that roll over
// (parent → child) and are trimmed after the retention period.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Streams.html
// The wire operations (ListStreams, DescribeStream, GetShardIterator, GetRecords) are
// in streamapi.go.

// UserIdentity marks a change made by the service itself (a TTL deletion), as
// stream records carry it. On the Streams wire the members are PascalCase
// (Identity{PrincipalId, Type}); Lambda's and Pipes' event JSON spells them
// "principalId" and "type", which is the consumer's conversion.
type UserIdentity struct {
	Type        string `json:"Type"`
	PrincipalID string `json:"PrincipalId"`
}

// ttlIdentity is the identity AWS puts on a TTL deletion's REMOVE record.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/time-to-live-ttl-streams.html
var ttlIdentity = &UserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"}

// Stream is one table's stream: shards of records, retention, iterators. Its
// exported fields never change after newStream; everything else is guarded by mu.
type Stream struct {
	ARN      string
	Label    string
	ViewType string

	db        *DB
	tableName string
	keySchema []keySchemaJSON
	created   time.Time

	mu         sync.Mutex
	owner      *Table   // the table that made it; nil once disabled (so a deleted table's items can go) or after a restore (matched by name)
	shards     []*shard // creation order; closed shards whose records are gone are dropped
	byID       map[string]*shard
	open       *shard // nil once disabled
	next       uint64 // the sequence number the next record gets
	nextShard  int    // index of the next shard, part of its ID so IDs sort by creation
	disabled   bool
	disabledAt time.Time
}

// shard is one shard's records. recs[off:] are live, in sequence order; trimming
// advances off and compacts when the dead prefix is at least half the slice, so a
// trim costs amortized O(records trimmed), never a copy of the whole shard per call.
type shard struct {
	id, parent string
	created    time.Time
	start      uint64 // StartingSequenceNumber
	end        uint64 // EndingSequenceNumber, set when closed
	closed     bool
	closedAt   time.Time
	count      int    // records ever appended (for rollover)
	floor      uint64 // the lowest sequence number still readable (trim horizon)
	lastAt     time.Time
	recs       []*streamRecord
	off        int
}

// streamRecord is one change as the stream keeps it: only the images its view type
// asks for. Images are held by reference: a stored item is never changed in place
// (table.go's contract), so they stay as they were at commit.
type streamRecord struct {
	seq      uint64
	at       time.Time
	name     string // INSERT, MODIFY or REMOVE
	keys     attr.Item
	old, new attr.Item
	ident    *UserIdentity
	size     int
}

// Sequence numbers are a per-stream counter, started from the stream's creation time
// in microseconds (so a re-created stream's numbers do not repeat the old one's),
// written as 21 digits: "1" and the counter in 20. Fixed width makes string and
// numeric order agree, as consumers compare either way; AWS's are 21 to 40 digits.
const seqDigits = 21

func formatSeq(n uint64) string {
	var b [seqDigits]byte
	b[0] = '1'
	for i := seqDigits - 1; i > 0; i-- {
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[:])
}

func parseSeq(s string) (uint64, bool) {
	if len(s) != seqDigits || s[0] != '1' {
		return 0, false
	}
	n, err := strconv.ParseUint(s[1:], 10, 64)
	return n, err == nil
}

// newStream starts a stream for t with the view type (KEYS_ONLY, NEW_IMAGE, OLD_IMAGE,
// NEW_AND_OLD_IMAGES), created at `at`, and registers it by ARN. Its label is the
// creation time to the millisecond, as AWS's; when that ARN is taken (a stream turned
// off and on within one millisecond) the label moves on by a millisecond.
func newStream(db *DB, t *Table, viewType string, at time.Time) *Stream {
	ks := []keySchemaJSON{{AttributeName: t.Hash.Name, KeyType: "HASH"}}
	if t.Range.Name != "" {
		ks = append(ks, keySchemaJSON{AttributeName: t.Range.Name, KeyType: "RANGE"})
	}
	s := &Stream{
		ViewType: viewType, db: db, tableName: t.Name, keySchema: ks, created: at, owner: t,
		byID: map[string]*shard{}, next: uint64(at.UnixMicro()),
	}
	// Registered, the stream is visible to ListStreams and the background loop:
	// its lock covers it until its first shard is open.
	s.mu.Lock()
	defer s.mu.Unlock()
	db.streams.add(s, t.ARN, at)
	s.openShard(at, "")
	return s
}

// openShard opens a child of parent (or a root shard). The caller holds s.mu.
func (s *Stream) openShard(at time.Time, parent string) {
	h := sha256.Sum256([]byte(s.ARN))
	sh := &shard{
		id:     fmt.Sprintf("shardId-%020d-%s%04x", at.UnixMilli(), hex.EncodeToString(h[:2]), s.nextShard&0xffff),
		parent: parent, created: at, start: s.next, floor: s.next, lastAt: at,
	}
	s.nextShard++
	s.shards = append(s.shards, sh)
	s.byID[sh.id] = sh
	s.open = sh
}

// closeOpen closes the open shard at `at`. An empty shard burns one sequence number
// so that its range is not empty and its child starts after it.
func (s *Stream) closeOpen(at time.Time) {
	sh := s.open
	if sh == nil {
		return
	}
	if n := len(sh.recs); n > 0 {
		sh.end = sh.recs[n-1].seq
	} else if sh.count > 0 {
		sh.end = sh.floor - 1
	} else {
		sh.end = sh.start
		s.next = sh.start + 1
	}
	sh.closed, sh.closedAt = true, at
	s.open = nil
}

// record appends the change of one item (keys; old and new images, nil when absent)
// to the open shard. The caller holds the table's write lock, so records are in
// commit order.
//
// It returns where the record went. A replay of the log passes that place back in
// (forced): the record then goes to that shard with that sequence number, whatever
// the rollover rules would do now, so shard IDs and sequence numbers a reader holds
// stay valid across a restart.
func (s *Stream) record(keys, old, item attr.Item, ident *UserIdentity, at time.Time, forced *streamPlace) streamPlace {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.disabled {
		return streamPlace{}
	}
	if forced != nil {
		if s.open == nil || s.open.id != forced.shard {
			parent := ""
			if s.open != nil {
				parent = s.open.id
				s.closeOpen(at)
			}
			s.openShardID(at, parent, forced.shard, forced.seq)
		}
		s.next = forced.seq
	} else {
		s.maintainLocked(at)
	}
	sh := s.open
	if forced == nil && sh.count >= s.db.opts.ShardRecords {
		s.roll(at)
		sh = s.open
	}
	if at.Before(sh.lastAt) {
		at = sh.lastAt // a shard's times never go back, so trimming can stop at the first young record
	}
	r := &streamRecord{seq: s.next, at: at, keys: keys, ident: ident}
	s.next++
	switch {
	case old == nil:
		r.name = "INSERT"
	case item == nil:
		r.name = "REMOVE"
	default:
		r.name = "MODIFY"
	}
	switch s.ViewType {
	case "NEW_IMAGE":
		r.new = item
	case "OLD_IMAGE":
		r.old = old
	case "NEW_AND_OLD_IMAGES":
		r.old, r.new = old, item
	}
	r.size = keys.Size() + r.old.Size() + r.new.Size()
	sh.recs = append(sh.recs, r)
	sh.count++
	sh.lastAt = at
	return streamPlace{shard: sh.id, seq: r.seq}
}

// streamPlace is where a stream record went: its shard and sequence number (a
// zero shard: no record).
type streamPlace struct {
	shard string
	seq   uint64
}

// openShardID opens a shard with a known ID and first sequence number (a replay of
// the log re-creating a rollover). The caller holds s.mu.
func (s *Stream) openShardID(at time.Time, parent, id string, start uint64) {
	sh := &shard{id: id, parent: parent, created: at, start: start, floor: start, lastAt: at}
	s.nextShard++
	s.shards = append(s.shards, sh)
	s.byID[sh.id] = sh
	s.open = sh
	s.next = start
}

// roll closes the open shard and opens its child.
func (s *Stream) roll(at time.Time) {
	parent := s.open.id
	s.closeOpen(at)
	s.openShard(at, parent)
}

// disable closes the stream (stream turned off or table deleted): its shards stay
// readable until retention ends, and no new records arrive.
func (s *Stream) disable(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.disabled {
		return
	}
	s.closeOpen(at)
	s.disabled, s.disabledAt = true, at
	s.owner = nil
}

// maintainLocked rolls an open shard over when it is older than ShardAge, drops
// records older than the retention period and the closed shards they leave empty.
// Shards are in creation order and their records' times only grow, so the walk stops
// at the first shard that keeps a record (or is open): amortized O(1) per call
// however many shards the stream has. The caller holds s.mu.
func (s *Stream) maintainLocked(now time.Time) {
	if s.open != nil && now.Sub(s.open.created) >= s.db.opts.ShardAge {
		s.roll(now)
	}
	cutoff := now.Add(-s.db.opts.StreamRetention)
	gone := 0
	for i, sh := range s.shards {
		sh.trim(cutoff)
		if i == gone && sh.gone(cutoff) {
			gone++
			continue
		}
		if !sh.closed || len(sh.live()) > 0 {
			break
		}
	}
	if gone == 0 {
		return
	}
	for i, sh := range s.shards[:gone] {
		delete(s.byID, sh.id)
		s.shards[i] = nil
	}
	s.shards = s.shards[gone:]
}

// trim drops the records created before cutoff.
func (sh *shard) trim(cutoff time.Time) {
	i := sh.off
	for i < len(sh.recs) && sh.recs[i].at.Before(cutoff) {
		sh.floor = sh.recs[i].seq + 1
		sh.recs[i] = nil
		i++
	}
	if i == sh.off {
		return
	}
	sh.off = i
	if sh.off == len(sh.recs) {
		sh.recs, sh.off = sh.recs[:0], 0
		if sh.closed {
			sh.recs = nil
		}
		return
	}
	if sh.off >= 64 && sh.off*2 >= len(sh.recs) {
		live := make([]*streamRecord, len(sh.recs)-sh.off, cap(sh.recs)/2+1)
		copy(live, sh.recs[sh.off:])
		sh.recs, sh.off = live, 0
	}
}

// gone reports whether a shard has left the stream: closed, with no record left, and
// either its records were trimmed or it closed empty longer than retention ago.
func (sh *shard) gone(cutoff time.Time) bool {
	return sh.closed && len(sh.recs) == sh.off && (sh.count > 0 || sh.closedAt.Before(cutoff))
}

// live returns the shard's readable records.
func (sh *shard) live() []*streamRecord { return sh.recs[sh.off:] }

// search returns the index in live() of the first record with a sequence number at
// or after seq: O(log n).
func (sh *shard) search(seq uint64) int {
	live := sh.live()
	return sort.Search(len(live), func(i int) bool { return live[i].seq >= seq })
}

// latest is the position just after the shard's newest record.
func (s *Stream) latest(sh *shard) uint64 {
	if sh.closed {
		return sh.end + 1
	}
	return s.next
}

// status is the stream's StreamStatus.
func (s *Stream) status() string {
	if s.disabled {
		return "DISABLED"
	}
	return "ENABLED"
}

// eventID is a record's eventID: 32 hex digits, as AWS's, derived from the stream
// and the sequence number so that it is stable across reads and restarts.
func (s *Stream) eventID(seq uint64) string {
	h := sha256.Sum256([]byte(s.ARN + "#" + formatSeq(seq)))
	return hex.EncodeToString(h[:16])
}

// streamState is the DB's registry of streams by ARN; a stream outlives its table
// until its records expire.
type streamState struct {
	db *DB
	mu sync.Mutex
	by map[string]*Stream
}

func (s *streamState) init(db *DB) {
	s.db = db
	s.by = map[string]*Stream{}
}

// add registers st under the table's ARN and a free label from at onwards.
func (s *streamState) add(st *Stream, tableARN string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		st.Label = at.UTC().Format("2006-01-02T15:04:05.000")
		st.ARN = tableARN + "/stream/" + st.Label
		if s.by[st.ARN] == nil {
			break
		}
		at = at.Add(time.Millisecond)
	}
	s.by[st.ARN] = st
}

// lookup returns the stream with the ARN, when it is visible (see visible).
func (s *streamState) lookup(arn string) *Stream {
	s.mu.Lock()
	st := s.by[arn]
	s.mu.Unlock()
	if st == nil || !st.visible() {
		return nil
	}
	return st
}

// all returns the registered streams in ARN order (visible or not).
func (s *streamState) all() []*Stream {
	s.mu.Lock()
	out := make([]*Stream, 0, len(s.by))
	for _, st := range s.by {
		out = append(out, st)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ARN < out[j].ARN })
	return out
}

// visible reports whether the stream is served: it was disabled (so it once served),
// or its table exists. A stream made by a CreateTable that then failed (the name was
// taken) never becomes visible and is forgotten by maintain.
func (st *Stream) visible() bool {
	st.mu.Lock()
	disabled, owner := st.disabled, st.owner
	st.mu.Unlock()
	if disabled {
		return true
	}
	st.db.mu.RLock()
	t := st.db.tables[st.tableName]
	st.db.mu.RUnlock()
	return t != nil && (owner == nil || owner == t)
}

// maintain trims every stream's records and rolls aged shards at now, and forgets
// streams that are disabled with nothing left to read after retention (and those of
// tables never created). The background loop calls it; reads also trim as they go.
func (s *streamState) maintain(now time.Time) {
	cutoff := now.Add(-s.db.opts.StreamRetention)
	for _, st := range s.all() {
		st.mu.Lock()
		st.maintainLocked(now)
		forget := st.disabled && len(st.shards) == 0 && st.disabledAt.Before(cutoff)
		st.mu.Unlock()
		if !forget && !st.disabled && !st.visible() && now.Sub(st.created) > time.Minute {
			forget = true
		}
		if forget {
			s.mu.Lock()
			delete(s.by, st.ARN)
			s.mu.Unlock()
		}
	}
}

// ---- persistence (persist.go calls snapshot and restore) ----

type streamsSnap struct {
	Streams []streamSnap
}

type streamSnap struct {
	ARN, Label, ViewType, TableName string
	KeySchema                       []keySchemaJSON
	Created                         time.Time
	Next                            uint64
	NextShard                       int
	Disabled                        bool
	DisabledAt                      time.Time
	Shards                          []shardSnap
}

type shardSnap struct {
	ID, Parent       string
	Created          time.Time
	Start, End       uint64
	Closed           bool
	ClosedAt, LastAt time.Time
	Count            int
	Floor            uint64
	Records          []recordSnap
}

type recordSnap struct {
	Seq      uint64
	At       time.Time
	Name     string
	Keys     attr.Item
	Old, New attr.Item     `json:",omitempty"`
	Ident    *UserIdentity `json:",omitempty"`
	Size     int
}

// snapshot returns every stream's state, to be encoded as JSON. Each stream is copied
// under its lock; records are immutable, so encoding happens outside the locks.
func (s *streamState) snapshot() any {
	var out streamsSnap
	for _, st := range s.all() {
		st.mu.Lock()
		ss := streamSnap{
			ARN: st.ARN, Label: st.Label, ViewType: st.ViewType, TableName: st.tableName,
			KeySchema: st.keySchema, Created: st.created, Next: st.next, NextShard: st.nextShard,
			Disabled: st.disabled, DisabledAt: st.disabledAt,
		}
		for _, sh := range st.shards {
			sn := shardSnap{
				ID: sh.id, Parent: sh.parent, Created: sh.created, Start: sh.start, End: sh.end,
				Closed: sh.closed, ClosedAt: sh.closedAt, LastAt: sh.lastAt, Count: sh.count, Floor: sh.floor,
				Records: make([]recordSnap, 0, len(sh.live())),
			}
			for _, r := range sh.live() {
				sn.Records = append(sn.Records, recordSnap{Seq: r.seq, At: r.at, Name: r.name, Keys: r.keys, Old: r.old, New: r.new, Ident: r.ident, Size: r.size})
			}
			ss.Shards = append(ss.Shards, sn)
		}
		st.mu.Unlock()
		out.Streams = append(out.Streams, ss)
	}
	return out
}

// restore replaces the registry with a snapshot's streams. A restored stream is
// matched to its table by name; the table's own stream pointer is persist.go's to set,
// from lookupAny(arn).
func (s *streamState) restore(raw json.RawMessage) error {
	var in streamsSnap
	if err := json.Unmarshal(raw, &in); err != nil {
		return fmt.Errorf("restoring streams: %w", err)
	}
	return s.restoreSnap(in)
}

// restoreSnap is restore of a decoded snapshot.
func (s *streamState) restoreSnap(in streamsSnap) error {
	by := map[string]*Stream{}
	for _, ss := range in.Streams {
		st := &Stream{
			ARN: ss.ARN, Label: ss.Label, ViewType: ss.ViewType, db: s.db, tableName: ss.TableName,
			keySchema: ss.KeySchema, created: ss.Created, next: ss.Next, nextShard: ss.NextShard,
			disabled: ss.Disabled, disabledAt: ss.DisabledAt, byID: map[string]*shard{},
		}
		for _, sn := range ss.Shards {
			sh := &shard{
				id: sn.ID, parent: sn.Parent, created: sn.Created, start: sn.Start, end: sn.End,
				closed: sn.Closed, closedAt: sn.ClosedAt, lastAt: sn.LastAt, count: sn.Count, floor: sn.Floor,
				recs: make([]*streamRecord, 0, len(sn.Records)),
			}
			for _, r := range sn.Records {
				sh.recs = append(sh.recs, &streamRecord{seq: r.Seq, at: r.At, name: r.Name, keys: r.Keys, old: r.Old, new: r.New, ident: r.Ident, size: r.Size})
			}
			st.shards = append(st.shards, sh)
			st.byID[sh.id] = sh
			if !sh.closed {
				st.open = sh
			}
		}
		if st.open == nil && !st.disabled {
			return fmt.Errorf("restoring stream %s: enabled, but no open shard", st.ARN)
		}
		by[st.ARN] = st
	}
	s.mu.Lock()
	s.by = by
	s.mu.Unlock()
	return nil
}

// lookupAny returns the registered stream with the ARN, visible or not (for
// persist.go to relink a restored table's stream).
func (s *streamState) lookupAny(arn string) *Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.by[arn]
}
