package ddb

import (
	"time"

	"github.com/fourlanes/fourlanes/internal/twin/ddb/attr"
)

// UserIdentity marks a change made by the service itself (a TTL deletion), as
// stream records carry it.
type UserIdentity struct {
	Type        string `json:"Type"`
	PrincipalID string `json:"PrincipalId"`
}

// Stream is one table's stream: shards of records, retention, iterators.
type Stream struct {
	ARN      string
	Label    string
	ViewType string
}

// newStream starts a stream for t with the view type (KEYS_ONLY, NEW_IMAGE, OLD_IMAGE,
// NEW_AND_OLD_IMAGES), created at `at`.
func newStream(db *DB, t *Table, viewType string, at time.Time) *Stream {
	label := at.UTC().Format("2006-01-02T15:04:05.000")
	return &Stream{ARN: t.ARN + "/stream/" + label, Label: label, ViewType: viewType}
}

// record appends the change of one item (keys; old and new images, nil when absent)
// to the open shard. The caller holds the table's write lock, so records are in
// commit order.
func (s *Stream) record(keys, old, item attr.Item, ident *UserIdentity, at time.Time) {}

// disable closes the stream (stream turned off or table deleted): its shards stay
// readable until retention ends, and no new records arrive.
func (s *Stream) disable(at time.Time) {}

// streamState is the DB's registry of streams by ARN; a stream outlives its table
// until its records expire.
type streamState struct{}

func (s *streamState) init(db *DB) {}
