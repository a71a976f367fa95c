package catalog

import (
	"strings"

	"github.com/fourlanes/fourlanes/pkg/internal/ident"
)

// The change-feed namespace. Change events are derived from tracked tables'
// streams; no module declares them and they never enter the log.
const (
	ChangeNamespace     = "record"
	ChangePrefix        = ChangeNamespace + "."
	ChangeWrittenPrefix = ChangePrefix + "written."
	ChangeDeletedPrefix = ChangePrefix + "deleted."
	// ChangeSchemaVersion is the schema version of every change event
	// (payload ChangeV1).
	ChangeSchemaVersion = 1
)

func entityChar(c byte) bool { return ident.Upper(c) || ident.Digit(c) || c == '_' }

// ValidEntity reports whether name is a well-formed entity name (upper case).
func ValidEntity(name string) bool { return ident.Word(name, 64, ident.Upper, entityChar) }

// ChangeType returns record.written.<entity>, or record.deleted.<entity>
// when deleted.
func ChangeType(entity string, deleted bool) string {
	if deleted {
		return ChangeDeletedPrefix + entity
	}
	return ChangeWrittenPrefix + entity
}

// ParseChangeType splits a change-event type into its entity and whether it
// is a deletion. ok is false for any other type.
func ParseChangeType(t string) (entity string, deleted, ok bool) {
	switch {
	case strings.HasPrefix(t, ChangeWrittenPrefix):
		entity = t[len(ChangeWrittenPrefix):]
	case strings.HasPrefix(t, ChangeDeletedPrefix):
		entity, deleted = t[len(ChangeDeletedPrefix):], true
	default:
		return "", false, false
	}
	return entity, deleted, ValidEntity(entity)
}

// IsChangeType reports whether t is in the change-feed namespace.
func IsChangeType(t string) bool { return strings.HasPrefix(t, ChangePrefix) }

// ChangeV1 is the payload of a change event (schema version 1), the contract
// between the change feed that builds it and the BEST_EFFORT subscribers that
// read it.
//
// Versions: Version is the item's version attribute. For record.written it is
// read from the new image; for record.deleted it is the version of the item
// that was deleted (the old image), and the event is a tombstone: a projection
// keeps it so that a late write of that version or an older one cannot
// resurrect the item. Versions of an entity id never go back; an id is never
// reused after a delete.
type ChangeV1 struct {
	Entity  string         `json:"entity"`
	ID      string         `json:"id"`      // the item's IDAttr value
	Version int64          `json:"version"` // see above
	Item    map[string]any `json:"item,omitempty"`
	// Item is the new image, un-typed (envelope payload form), on
	// record.written; absent on record.deleted.
}
