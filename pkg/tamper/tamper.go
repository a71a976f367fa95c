package tamper

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// Change names what happened to the log (the EMF dimension "Change").
type Change string

const (
	// EventModified: an event row was overwritten (PutItem over an existing
	// seq, or an update).
	EventModified Change = "event_modified"
	// EventRemoved: an event row was deleted.
	EventRemoved Change = "event_removed"
	// HeadModified: the head row changed in a way no append makes.
	HeadModified Change = "head_modified"
	// HeadRemoved: the head row was deleted.
	HeadRemoved Change = "head_removed"
	// RowModified and RowRemoved: another row of the log (a negative seq,
	// such as an emit's idempotency-key row) changed. Every row of the log
	// is insert-only.
	RowModified Change = "row_modified"
	RowRemoved  Change = "row_removed"
	// Unreadable: a MODIFY or REMOVE record whose key or images cannot be
	// read; it is reported, never skipped.
	Unreadable Change = "unreadable"
)

// MaxAdvance is the most a head can advance in one honest transaction:
// TransactWriteItems takes at most 100 actions and one of them is the head's
// own Put, so group commit appends at most 99 events at once.
const MaxAdvance = 99

// headAttrs is exactly what eventstore writes into a head row, with
// keys.AttrShards besides when the emitter gave the tenant chain shards.
var headAttrs = []string{
	keys.AttrTenant, keys.AttrSeq, keys.AttrKind, keys.AttrLastSeq,
	keys.AttrLastHash, keys.AttrLastEventID, keys.AttrDedupID,
}

// Finding is one change to the log.
type Finding struct {
	Change Change
	Tenant string // "" when the key cannot be read
	Seq    string // the row's sort key as written (a number; "" when unreadable)
	// What says what changed, for a person: the attributes that differ, or
	// why a head change is not an honest advance.
	What string
	// EventName, EventID and StreamSeq identify the stream record.
	EventName string
	EventID   string
	StreamSeq string
	// Principal is the stream record's userIdentity (DynamoDB's TTL deletes
	// carry one; other writes do not).
	Principal string
}

// Inspect decides whether one stream record of the events table is a change
// to the log. raw is the record as Lambda delivers it.
func Inspect(raw json.RawMessage) (Finding, bool) {
	var rec events.DynamoDBEventRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		var head struct {
			EventID   string `json:"eventID"`
			EventName string `json:"eventName"`
		}
		_ = json.Unmarshal(raw, &head)
		if head.EventName == "INSERT" {
			return Finding{}, false
		}
		return Finding{Change: Unreadable, EventName: head.EventName, EventID: head.EventID,
			What: "stream record does not decode: " + err.Error()}, true
	}
	return InspectRecord(rec)
}

// InspectRecord is Inspect on a decoded record.
func InspectRecord(rec events.DynamoDBEventRecord) (Finding, bool) {
	f := Finding{EventName: rec.EventName, EventID: rec.EventID, StreamSeq: rec.Change.SequenceNumber}
	if u := rec.UserIdentity; u != nil {
		f.Principal = u.Type + ":" + u.PrincipalID
	}
	switch rec.EventName {
	case "INSERT":
		return Finding{}, false
	case "MODIFY", "REMOVE":
	default:
		f.Change, f.What = Unreadable, fmt.Sprintf("unknown eventName %q", rec.EventName)
		return f, true
	}
	tenant, seq, err := key(rec.Change.Keys)
	f.Tenant, f.Seq = tenant, seq
	if err != nil {
		f.Change, f.What = Unreadable, err.Error()
		return f, true
	}
	old, nu := rec.Change.OldImage, rec.Change.NewImage
	isHead := seq == strconv.Itoa(keys.HeadSeq)
	isOther := strings.HasPrefix(seq, "-") // neither an event (seq ≥ 1) nor the head
	switch {
	case rec.EventName == "REMOVE" && isOther:
		f.Change, f.What = RowRemoved, fmt.Sprintf("row of kind %q deleted", str(old, keys.AttrKind))
	case isOther:
		f.Change, f.What = RowModified, fmt.Sprintf("row of kind %q overwritten; changed: %s", str(old, keys.AttrKind), diff(old, nu))
	case rec.EventName == "REMOVE" && isHead:
		f.Change, f.What = HeadRemoved, "head row deleted (was "+headSummary(old)+")"
	case rec.EventName == "REMOVE":
		f.Change, f.What = EventRemoved, "event row deleted (was "+eventSummary(old)+")"
	case isHead:
		why := honestAdvance(old, nu)
		if why == "" {
			return Finding{}, false
		}
		f.Change, f.What = HeadModified, why+"; changed: "+diff(old, nu)
	default:
		f.Change, f.What = EventModified, "event row overwritten (was "+eventSummary(old)+"); changed: "+diff(old, nu)
	}
	return f, true
}

// key reads the tenant and the seq from a record's key.
func key(k map[string]events.DynamoDBAttributeValue) (tenant, seq string, err error) {
	t, ok := k[keys.AttrTenant]
	if !ok || t.DataType() != events.DataTypeString {
		return "", "", fmt.Errorf("key has no string %s", keys.AttrTenant)
	}
	s, ok := k[keys.AttrSeq]
	if !ok || s.DataType() != events.DataTypeNumber {
		return t.String(), "", fmt.Errorf("key has no number %s", keys.AttrSeq)
	}
	if !isInteger(s.Number()) {
		return t.String(), s.Number(), fmt.Errorf("key %s %q is not an integer", keys.AttrSeq, s.Number())
	}
	return t.String(), s.Number(), nil
}

// isInteger: an optional minus sign and digits (DynamoDB keeps numbers
// without a plus sign or leading zeros).
func isInteger(n string) bool {
	n = strings.TrimPrefix(n, "-")
	if n == "" {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// honestAdvance returns "" when a head MODIFY is exactly what an append
// writes, and otherwise why it is not.
//
// An honest advance is one eventstore transaction committing k events
// (k = 1 for a single Emit, 1 < k ≤ MaxAdvance under group commit): the head
// is Put with the condition last_seq = old last_seq, so both images are head
// rows with exactly the head's attributes, new last_seq = old last_seq + k,
// the hash and the last event id are new, and dedup_id is derived from the
// new last event id. The images alone cannot show that last_hash is really
// the hash of event last_seq: a forged head with this shape is reconcile's
// to find (a head mismatch).
func honestAdvance(old, nu map[string]events.DynamoDBAttributeValue) string {
	for _, im := range []struct {
		name  string
		image map[string]events.DynamoDBAttributeValue
	}{{"old", old}, {"new", nu}} {
		if im.image == nil {
			return "head MODIFY without the " + im.name + " image (the stream must be NEW_AND_OLD_IMAGES)"
		}
		if k := str(im.image, keys.AttrKind); k != keys.KindHead {
			return fmt.Sprintf("%s image of the head row has kind %q", im.name, k)
		}
		names := attrNames(im.image)
		if _, sharded := im.image[keys.AttrShards]; sharded {
			names = slices.DeleteFunc(names, func(n string) bool { return n == keys.AttrShards })
			if n, err := num(im.image, keys.AttrShards); err != nil || n < 2 || n > tenancy.MaxShards {
				got := "not a number"
				if err == nil {
					got = strconv.FormatInt(n, 10)
				}
				return fmt.Sprintf("%s image of the head row has %s %s, want a number of chain shards (2 to %d)",
					im.name, keys.AttrShards, got, tenancy.MaxShards)
			}
		}
		if !slices.Equal(names, sortedHeadAttrs()) {
			return fmt.Sprintf("%s image of the head row has attributes %s, want exactly %s (and %s for a tenant with chain shards)",
				im.name, strings.Join(names, ","), strings.Join(sortedHeadAttrs(), ","), keys.AttrShards)
		}
	}
	was, err1 := num(old, keys.AttrLastSeq)
	now, err2 := num(nu, keys.AttrLastSeq)
	if err1 != nil || err2 != nil {
		return "head last_seq is not an integer"
	}
	switch k := now - was; {
	case k < 1:
		return fmt.Sprintf("head moved from last_seq %d to %d: a head never moves back or stands still", was, now)
	case k > MaxAdvance:
		return fmt.Sprintf("head advanced by %d (last_seq %d to %d): one transaction commits at most %d events", k, was, now, MaxAdvance)
	}
	if str(old, keys.AttrLastHash) == str(nu, keys.AttrLastHash) {
		return "head advanced but kept its last_hash"
	}
	if str(old, keys.AttrLastEventID) == str(nu, keys.AttrLastEventID) {
		return "head advanced but kept its last_event_id"
	}
	if d, want := str(nu, keys.AttrDedupID), eventstore.HeadDedupID(str(nu, keys.AttrLastEventID)); d != want {
		return fmt.Sprintf("head dedup_id %q is not derived from its last_event_id (want %q)", d, want)
	}
	return ""
}

func sortedHeadAttrs() []string {
	out := slices.Clone(headAttrs)
	sort.Strings(out)
	return out
}

func attrNames(im map[string]events.DynamoDBAttributeValue) []string {
	out := make([]string, 0, len(im))
	for k := range im {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func str(im map[string]events.DynamoDBAttributeValue, name string) string {
	v, ok := im[name]
	if !ok || v.DataType() != events.DataTypeString {
		return ""
	}
	return v.String()
}

func num(im map[string]events.DynamoDBAttributeValue, name string) (int64, error) {
	v, ok := im[name]
	if !ok || v.DataType() != events.DataTypeNumber {
		return 0, fmt.Errorf("%s is not a number", name)
	}
	return strconv.ParseInt(v.Number(), 10, 64)
}

// diff lists the attributes that differ between two images: "-a" removed,
// "+b" added, "c" changed. A REMOVE's missing new image removes everything.
func diff(old, nu map[string]events.DynamoDBAttributeValue) string {
	names := map[string]bool{}
	for k := range old {
		names[k] = true
	}
	for k := range nu {
		names[k] = true
	}
	sorted := make([]string, 0, len(names))
	for k := range names {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []string
	for _, k := range sorted {
		o, inOld := old[k]
		n, inNew := nu[k]
		switch {
		case !inNew:
			out = append(out, "-"+k)
		case !inOld:
			out = append(out, "+"+k)
		case !same(o, n):
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return "no attribute differs"
	}
	return strings.Join(out, ",")
}

func same(a, b events.DynamoDBAttributeValue) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

func eventSummary(im map[string]events.DynamoDBAttributeValue) string {
	if im == nil {
		return "no old image"
	}
	return fmt.Sprintf("id %s, type %s, hash %s", orDash(str(im, keys.AttrID)), orDash(str(im, keys.AttrType)), orDash(str(im, keys.AttrHash)))
}

func headSummary(im map[string]events.DynamoDBAttributeValue) string {
	if im == nil {
		return "no old image"
	}
	last := "-"
	if v, ok := im[keys.AttrLastSeq]; ok && v.DataType() == events.DataTypeNumber {
		last = v.Number()
	}
	return fmt.Sprintf("last_seq %s, last_hash %s", last, orDash(str(im, keys.AttrLastHash)))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
