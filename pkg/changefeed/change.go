package changefeed

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/pkg/tracing"
)

// Reasons a record is rejected (RejectError.Reason, and the Reason dimension
// of keys.MetricChangeRejected).
const (
	RejectNoImage         = "no_image"        // neither image: the stream is not NEW_AND_OLD_IMAGES
	RejectEventName       = "event_name"      // the event name contradicts the images
	RejectNoTenant        = "no_tenant"       // the tenant attribute is missing or not a string
	RejectNoID            = "no_id"           // the id attribute is missing or not a string or number
	RejectBadVersion      = "bad_version"     // the version attribute is missing, not an integer, or < 1
	RejectUnrepresentable = "unrepresentable" // an attribute the envelope payload cannot carry
	RejectInvalidEnvelope = "invalid_envelope"
)

// ErrRejected matches every *RejectError.
var ErrRejected = errors.New("stream record cannot become a change event")

// RejectError says why a record cannot become a change event. Retrying
// cannot fix it.
type RejectError struct {
	Reason string
	Detail string
}

func (e *RejectError) Error() string { return "rejected (" + e.Reason + "): " + e.Detail }

// Is matches ErrRejected.
func (e *RejectError) Is(target error) bool { return target == ErrRejected }

func reject(reason, format string, args ...any) error {
	return &RejectError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// changeNamespace names the change events' UUIDs (RFC 9562 name-based).
var changeNamespace = uuid.MustParse("6f1f5d0e-3c55-4c7a-9a55-2f0c8e0b7a31")

// Change is a change event and what its row records besides the envelope.
type Change struct {
	Envelope envelope.Envelope
	Payload  catalog.ChangeV1
	Entity   catalog.Entity
	Deleted  bool
	Cause    string // keys.ChangeCauseWrite or keys.ChangeCauseTTL
	// NameUnknown: the record's event name was none of INSERT, MODIFY,
	// REMOVE; it was classified by its images.
	NameUnknown bool
	// VersionUnchanged: a MODIFY whose new image has the old image's
	// version; projections that apply by version will not see it.
	VersionUnchanged bool
	Source           Record
}

// Build turns a stream record of entity's table into a change event. The
// error is a *RejectError when the record cannot become one.
func Build(ent catalog.Entity, r Record) (Change, error) {
	return build(ent, r, func(string, string, int64) string { return r.Table() + "\x00" + r.EventID })
}

// TableEventID stands for the stream eventID of a change built from an item
// as re-read from its table (FromItem).
const TableEventID = "table"

// FromItem builds the change event of an item as it is now in its table, for
// repairs that cannot read the stream any more: record.written at the item's
// current version. Its id is derived from the table, tenant, id and version,
// so the same item at the same version always makes the same change event.
func FromItem(ent catalog.Entity, table string, item envelope.Item, now time.Time) (Change, error) {
	r := Record{EventID: TableEventID, EventName: EventModify, NewImage: item, Created: now}
	return build(ent, r, func(tenant, id string, v int64) string {
		return TableEventID + "\x00" + table + "\x00" + tenant + "\x00" + id + "\x00" + strconv.FormatInt(v, 10)
	})
}

func build(ent catalog.Entity, r Record, name func(tenant, id string, version int64) string) (Change, error) {
	c := Change{Entity: ent, Source: r, Cause: keys.ChangeCauseWrite}
	img := r.NewImage
	if img == nil {
		img, c.Deleted = r.OldImage, true
	}
	if img == nil {
		return c, reject(RejectNoImage, "record %s (%s) has neither NewImage nor OldImage; the table's stream must be NEW_AND_OLD_IMAGES", r.EventID, r.EventName)
	}
	switch r.EventName {
	case EventInsert, EventModify:
		if c.Deleted {
			return c, reject(RejectEventName, "record %s is %s without a NewImage", r.EventID, r.EventName)
		}
	case EventRemove:
		if !c.Deleted {
			return c, reject(RejectEventName, "record %s is REMOVE with a NewImage", r.EventID)
		}
	default:
		c.NameUnknown = true
	}
	if c.Deleted && r.UserType == "Service" && r.UserPrincipal == "dynamodb.amazonaws.com" {
		// TTL: AWS marks it REMOVE with the service identity (userIdentity
		// Service, dynamodb.amazonaws.com), and only then is it one. A
		// delete under an unknown event name is not guessed to be TTL: its
		// cause stays a write, and the feed logs a warning naming the event
		// name for every such record (feed.go).
		c.Cause = keys.ChangeCauseTTL
	}
	tenant, ok := img[ent.TenantAttr].(*types.AttributeValueMemberS)
	if !ok || tenant.Value == "" {
		return c, reject(RejectNoTenant, "%s item of record %s has no string %q", ent.Name, r.EventID, ent.TenantAttr)
	}
	// The item's tenant is a tenant, never a chain shard's name: the edge's
	// rule (a reserved "~<digits>" suffix would bind another tenant).
	if err := tenancy.CheckTenant(tenant.Value); err != nil {
		return c, reject(RejectInvalidEnvelope, "%s item of record %s: %s: %v", ent.Name, r.EventID, ent.TenantAttr, err)
	}
	id, err := idOf(img[ent.IDAttr])
	if err != nil {
		return c, reject(RejectNoID, "%s item of record %s: %s %v", ent.Name, r.EventID, ent.IDAttr, err)
	}
	version, err := versionOf(img[ent.VersionAttr])
	if err != nil {
		return c, reject(RejectBadVersion, "%s %s of record %s: %s %v", ent.Name, id, r.EventID, ent.VersionAttr, err)
	}
	if !c.Deleted && r.OldImage != nil {
		if old, err := versionOf(r.OldImage[ent.VersionAttr]); err == nil && old == version {
			c.VersionUnchanged = true
		}
	}
	c.Payload = catalog.ChangeV1{Entity: ent.Name, ID: id, Version: version}
	if !c.Deleted {
		if c.Payload.Item, err = Untype(r.NewImage); err != nil {
			return c, reject(RejectUnrepresentable, "%s %s v%d: %v", ent.Name, id, version, err)
		}
	}
	when := r.Created
	if when.IsZero() {
		when = time.Now()
	}
	e, err := envelopeOf(catalog.ChangeType(ent.Name, c.Deleted), tenant.Value, when, name(tenant.Value, id, version), c.Payload)
	if err != nil {
		return c, reject(RejectInvalidEnvelope, "%s %s v%d: %v", ent.Name, id, version, err)
	}
	// The write that made the change may carry its request's trace
	// (StampTrace): the change event's work joins it.
	if tp, ok := img[keys.AttrTraceParent].(*types.AttributeValueMemberS); ok && envelope.ValidTraceParent(tp.Value) {
		e.TraceParent = tp.Value
	}
	c.Envelope = e
	return c, nil
}

// StampTrace sets item's traceparent attribute (keys.AttrTraceParent) to
// the W3C trace context of ctx's span, when ctx has one, so that the change
// event of this write, and the BEST_EFFORT handlers it reaches, join the
// writer's trace. Call it on the item of a Put to a tracked table before
// the write. The attribute is an ordinary one of the item: it is in the
// change payload's item too. It returns item.
func StampTrace(ctx context.Context, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if tp := tracing.TraceParent(ctx); tp != "" && item != nil {
		item[keys.AttrTraceParent] = &types.AttributeValueMemberS{Value: tp}
	}
	return item
}

func envelopeOf(typ, tenant string, when time.Time, name string, p catalog.ChangeV1) (envelope.Envelope, error) {
	payload, err := envelope.NormalizePayload(p)
	if err != nil {
		return envelope.Envelope{}, err
	}
	e := envelope.Envelope{
		ID:            uuid.NewSHA1(changeNamespace, []byte(name)).String(),
		Type:          typ,
		TenantID:      tenant,
		OccurredAt:    envelope.FormatTime(when.UTC()),
		SchemaVersion: catalog.ChangeSchemaVersion,
		Payload:       payload,
	}
	if err := e.Validate(); err != nil {
		return envelope.Envelope{}, err
	}
	return e, nil
}

func idOf(av types.AttributeValue) (string, error) {
	switch x := av.(type) {
	case *types.AttributeValueMemberS:
		if x.Value == "" {
			return "", errors.New("is empty")
		}
		return x.Value, nil
	case *types.AttributeValueMemberN:
		return x.Value, nil
	case nil:
		return "", errors.New("is missing")
	default:
		return "", fmt.Errorf("is a %T, want S or N", av)
	}
}

func versionOf(av types.AttributeValue) (int64, error) {
	n, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		if av == nil {
			return 0, errors.New("is missing")
		}
		return 0, fmt.Errorf("is a %T, want N", av)
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", n.Value)
	}
	if v < 1 {
		return 0, fmt.Errorf("is %d; versions start at 1 (a projection treats 0 as absent)", v)
	}
	return v, nil
}

// Untype converts a typed item to the envelope payload form: numbers as
// canonical json.Number (a number outside I-JSON is an error naming the
// attribute), B as a base64 string, sets as arrays.
func Untype(it envelope.Item) (map[string]any, error) {
	out := make(map[string]any, len(it))
	for k, v := range it {
		x, err := untype(k, v)
		if err != nil {
			return nil, err
		}
		out[k] = x
	}
	return out, nil
}

// untype turns a tracked table's attribute into JSON. It looks like
// envelope's fromAV and differs on purpose: a tracked item is whatever the
// owning service wrote, so every DynamoDB type must map (binary as base64,
// sets as arrays), and no string rule applies, since a change event is not
// chained.
func untype(path string, av types.AttributeValue) (any, error) {
	switch x := av.(type) {
	case *types.AttributeValueMemberNULL:
		return nil, nil
	case *types.AttributeValueMemberBOOL:
		return x.Value, nil
	case *types.AttributeValueMemberS:
		return x.Value, nil
	case *types.AttributeValueMemberN:
		return envelope.CanonicalNumber(path, x.Value)
	case *types.AttributeValueMemberB:
		return base64.StdEncoding.EncodeToString(x.Value), nil
	case *types.AttributeValueMemberSS:
		l := make([]any, len(x.Value))
		for i, s := range x.Value {
			l[i] = s
		}
		return l, nil
	case *types.AttributeValueMemberNS:
		l := make([]any, len(x.Value))
		for i, s := range x.Value {
			n, err := envelope.CanonicalNumber(fmt.Sprintf("%s[%d]", path, i), s)
			if err != nil {
				return nil, err
			}
			l[i] = n
		}
		return l, nil
	case *types.AttributeValueMemberBS:
		l := make([]any, len(x.Value))
		for i, b := range x.Value {
			l[i] = base64.StdEncoding.EncodeToString(b)
		}
		return l, nil
	case *types.AttributeValueMemberL:
		l := make([]any, len(x.Value))
		for i, e := range x.Value {
			v, err := untype(fmt.Sprintf("%s[%d]", path, i), e)
			if err != nil {
				return nil, err
			}
			l[i] = v
		}
		return l, nil
	case *types.AttributeValueMemberM:
		m := make(map[string]any, len(x.Value))
		for k, e := range x.Value {
			v, err := untype(path+"."+k, e)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	default:
		return nil, fmt.Errorf("%s: unsupported attribute value %T", path, av)
	}
}
