package envelope

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Item is a DynamoDB item in the SDK's typed form.
type Item = map[string]types.AttributeValue

// ToItem encodes a stored event as an event row. The envelope must pass
// ValidateStored.
func (e *Envelope) ToItem() (Item, error) {
	t, err := e.ItemTemplate()
	if err != nil {
		return nil, err
	}
	return t.Item(e.Seq, e.PrevHash, e.Hash)
}

// ItemTemplate is the event row of an envelope that passed Validate, all but
// its seal: the payload's attribute value is made once, and Item adds seq,
// prev_hash and hash. The event store seals an Emit again at a new seq
// whenever it loses a race for the head, and the payload, the bulk of the
// row, never changes between those seals.
type ItemTemplate struct {
	base Item // every attribute but seq, prev_hash and hash; never written to
}

// ItemTemplate validates e (Validate) and builds its row but for seq,
// prev_hash and hash, which it ignores.
func (e *Envelope) ItemTemplate() (ItemTemplate, error) {
	if err := e.Validate(); err != nil {
		return ItemTemplate{}, err
	}
	payload, err := toAV("payload", e.Payload)
	if err != nil {
		return ItemTemplate{}, err
	}
	it := Item{
		keys.AttrTenant:        &types.AttributeValueMemberS{Value: e.TenantID},
		keys.AttrKind:          &types.AttributeValueMemberS{Value: keys.KindEvent},
		keys.AttrID:            &types.AttributeValueMemberS{Value: e.ID},
		keys.AttrType:          &types.AttributeValueMemberS{Value: e.Type},
		keys.AttrOccurredAt:    &types.AttributeValueMemberS{Value: e.OccurredAt},
		keys.AttrSchemaVersion: &types.AttributeValueMemberN{Value: strconv.Itoa(e.SchemaVersion)},
		keys.AttrPayload:       payload,
	}
	for name, v := range map[string]string{
		keys.AttrCorrelationID: e.CorrelationID,
		keys.AttrCausationID:   e.CausationID,
		keys.AttrActorID:       e.ActorID,
		keys.AttrTraceParent:   e.TraceParent,
	} {
		if v != "" { // optional fields are absent when unset, never empty
			it[name] = &types.AttributeValueMemberS{Value: v}
		}
	}
	return ItemTemplate{base: it}, nil
}

// Item is the row sealed at seq with prevHash and hash, which it checks as
// ValidateStored does. Rows of one template share their attribute values
// (the SDK only reads them).
func (t ItemTemplate) Item(seq int64, prevHash, hash string) (Item, error) {
	switch {
	case t.base == nil:
		return nil, fieldErr("payload", "is missing; build the template with Envelope.ItemTemplate")
	case seq < 1 || seq > MaxSeq:
		return nil, fieldErr("seq", "is %d; event sequence numbers run from 1 to 2^53-1", seq)
	case !isHexHash(prevHash):
		return nil, fieldErr("prev_hash", "%q is not 64 lowercase hex characters", prevHash)
	case !isHexHash(hash):
		return nil, fieldErr("hash", "%q is not 64 lowercase hex characters", hash)
	}
	it := make(Item, len(t.base)+3)
	maps.Copy(it, t.base)
	it[keys.AttrSeq] = &types.AttributeValueMemberN{Value: strconv.FormatInt(seq, 10)}
	it[keys.AttrPrevHash] = &types.AttributeValueMemberS{Value: prevHash}
	it[keys.AttrHash] = &types.AttributeValueMemberS{Value: hash}
	return it, nil
}

// ToAttributeValue encodes a payload-form value (see NormalizePayload) as a
// DynamoDB attribute value; path names the value in errors.
func ToAttributeValue(path string, v any) (types.AttributeValue, error) { return toAV(path, v) }

func toAV(path string, v any) (types.AttributeValue, error) {
	switch x := v.(type) {
	case nil:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case bool:
		return &types.AttributeValueMemberBOOL{Value: x}, nil
	case string:
		return &types.AttributeValueMemberS{Value: x}, nil
	case json.Number:
		return &types.AttributeValueMemberN{Value: string(x)}, nil
	case []any:
		l := make([]types.AttributeValue, len(x))
		for i, e := range x {
			av, err := toAV(fmt.Sprintf("%s[%d]", path, i), e)
			if err != nil {
				return nil, err
			}
			l[i] = av
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case map[string]any:
		m := make(map[string]types.AttributeValue, len(x))
		for k, e := range x {
			av, err := toAV(path+"."+k, e)
			if err != nil {
				return nil, err
			}
			m[k] = av
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	default:
		return nil, fieldErr(path, "has unsupported Go type %T", v)
	}
}

// FromItem decodes an event row. A head row (or any other kind) returns an
// error wrapping ErrNotEventRow; a malformed row returns a *FieldError naming
// the attribute. The result passes ValidateStored.
func FromItem(it Item) (Envelope, error) {
	var e Envelope
	kind, err := str(it, keys.AttrKind, true)
	if err != nil {
		return e, err
	}
	if kind != keys.KindEvent {
		return e, fmt.Errorf("kind %q: %w", kind, ErrNotEventRow)
	}
	if e.TenantID, err = str(it, keys.AttrTenant, true); err != nil {
		return e, err
	}
	if e.Seq, err = num(it, keys.AttrSeq); err != nil {
		return e, err
	}
	if e.ID, err = str(it, keys.AttrID, true); err != nil {
		return e, err
	}
	if e.Type, err = str(it, keys.AttrType, true); err != nil {
		return e, err
	}
	if e.OccurredAt, err = str(it, keys.AttrOccurredAt, true); err != nil {
		return e, err
	}
	sv, err := num(it, keys.AttrSchemaVersion)
	if err != nil {
		return e, err
	}
	if sv > 1<<31-1 {
		return e, fieldErr(keys.AttrSchemaVersion, "%d is too large", sv)
	}
	e.SchemaVersion = int(sv)
	if e.CorrelationID, err = str(it, keys.AttrCorrelationID, false); err != nil {
		return e, err
	}
	if e.CausationID, err = str(it, keys.AttrCausationID, false); err != nil {
		return e, err
	}
	if e.ActorID, err = str(it, keys.AttrActorID, false); err != nil {
		return e, err
	}
	if e.TraceParent, err = str(it, keys.AttrTraceParent, false); err != nil {
		return e, err
	}
	if e.PrevHash, err = str(it, keys.AttrPrevHash, true); err != nil {
		return e, err
	}
	if e.Hash, err = str(it, keys.AttrHash, true); err != nil {
		return e, err
	}
	pav, ok := it[keys.AttrPayload]
	if !ok {
		return e, fieldErr(keys.AttrPayload, "is missing")
	}
	if _, isMap := pav.(*types.AttributeValueMemberM); !isMap {
		return e, fieldErr(keys.AttrPayload, "is not a map (M)")
	}
	p, err := fromAV("payload", pav)
	if err != nil {
		return e, err
	}
	e.Payload = p.(map[string]any)
	if err := e.ValidateStored(); err != nil {
		return e, err
	}
	return e, nil
}

func str(it Item, name string, required bool) (string, error) {
	av, ok := it[name]
	if !ok {
		if required {
			return "", fieldErr(name, "is missing")
		}
		return "", nil
	}
	s, ok := av.(*types.AttributeValueMemberS)
	if !ok {
		return "", fieldErr(name, "is not a string (S)")
	}
	if s.Value == "" && !required {
		return "", fieldErr(name, "is an empty string; optional fields must be absent when unset")
	}
	return s.Value, nil
}

func num(it Item, name string) (int64, error) {
	av, ok := it[name]
	if !ok {
		return 0, fieldErr(name, "is missing")
	}
	n, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fieldErr(name, "is not a number (N)")
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fieldErr(name, "%q is not an integer", n.Value)
	}
	return v, nil
}

// fromAV decodes a stored payload value. It looks like changefeed's untype
// and differs on purpose: a payload was written by toAV from JSON, so only
// JSON's shapes may come back (binary and sets are refused as
// ErrUnsupportedAV: something else wrote the row), and every string is
// checked as Emit checked it, since the hash covers these bytes.
func fromAV(path string, av types.AttributeValue) (any, error) {
	switch x := av.(type) {
	case *types.AttributeValueMemberNULL:
		return nil, nil
	case *types.AttributeValueMemberBOOL:
		return x.Value, nil
	case *types.AttributeValueMemberS:
		return normalizeValue(path, x.Value, 0)
	case *types.AttributeValueMemberN:
		return CanonicalNumber(path, x.Value)
	case *types.AttributeValueMemberL:
		out := make([]any, len(x.Value))
		for i, e := range x.Value {
			v, err := fromAV(fmt.Sprintf("%s[%d]", path, i), e)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case *types.AttributeValueMemberM:
		out := make(map[string]any, len(x.Value))
		for k, e := range x.Value {
			v, err := fromAV(path+"."+k, e)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	case nil:
		return nil, fieldErr(path, "is a nil attribute value")
	default:
		return nil, fmt.Errorf("%s: %T: %w", path, av, ErrUnsupportedAV)
	}
}

// FromStreamImage decodes a stream record's NewImage as aws-lambda-go
// delivers it to a Lambda function.
func FromStreamImage(img map[string]events.DynamoDBAttributeValue) (Envelope, error) {
	it, err := ItemFromStreamImage(img)
	if err != nil {
		return Envelope{}, err
	}
	return FromItem(it)
}

// FromStreamJSON decodes the raw JSON of a stream image ({"id":{"S":"…"},…}),
// as a Pipe passes it to its enrichment.
func FromStreamJSON(raw []byte) (Envelope, error) {
	var img map[string]events.DynamoDBAttributeValue
	if err := json.Unmarshal(raw, &img); err != nil {
		return Envelope{}, fmt.Errorf("decode stream image: %w", err)
	}
	return FromStreamImage(img)
}

// ItemFromStreamImage converts a stream image to the SDK's typed item, so a
// single decoder serves tables and streams.
func ItemFromStreamImage(img map[string]events.DynamoDBAttributeValue) (Item, error) {
	if img == nil {
		return nil, fieldErr("NewImage", "is missing")
	}
	it := make(Item, len(img))
	for k, v := range img {
		av, err := streamToAV(k, v)
		if err != nil {
			return nil, err
		}
		it[k] = av
	}
	return it, nil
}

func streamToAV(path string, v events.DynamoDBAttributeValue) (types.AttributeValue, error) {
	switch v.DataType() {
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}, nil
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}, nil
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}, nil
	case events.DataTypeList:
		src := v.List()
		l := make([]types.AttributeValue, len(src))
		for i, e := range src {
			av, err := streamToAV(fmt.Sprintf("%s[%d]", path, i), e)
			if err != nil {
				return nil, err
			}
			l[i] = av
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case events.DataTypeMap:
		src := v.Map()
		m := make(map[string]types.AttributeValue, len(src))
		for k, e := range src {
			av, err := streamToAV(path+"."+k, e)
			if err != nil {
				return nil, err
			}
			m[k] = av
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}, nil
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}, nil
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}, nil
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}, nil
	default:
		return nil, fmt.Errorf("%s: data type %d: %w", path, v.DataType(), ErrUnsupportedAV)
	}
}

// ToStreamImage renders an item as a stream image, the inverse of
// ItemFromStreamImage for the kinds an envelope uses.
func ToStreamImage(it Item) (map[string]events.DynamoDBAttributeValue, error) {
	out := make(map[string]events.DynamoDBAttributeValue, len(it))
	names := make([]string, 0, len(it))
	for k := range it {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v, err := avToStream(k, it[k])
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

func avToStream(path string, av types.AttributeValue) (events.DynamoDBAttributeValue, error) {
	switch x := av.(type) {
	case *types.AttributeValueMemberNULL:
		return events.NewNullAttribute(), nil
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(x.Value), nil
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(x.Value), nil
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(x.Value), nil
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(x.Value))
		for i, e := range x.Value {
			v, err := avToStream(fmt.Sprintf("%s[%d]", path, i), e)
			if err != nil {
				return events.DynamoDBAttributeValue{}, err
			}
			l[i] = v
		}
		return events.NewListAttribute(l), nil
	case *types.AttributeValueMemberM:
		m := make(map[string]events.DynamoDBAttributeValue, len(x.Value))
		for k, e := range x.Value {
			v, err := avToStream(path+"."+k, e)
			if err != nil {
				return events.DynamoDBAttributeValue{}, err
			}
			m[k] = v
		}
		return events.NewMapAttribute(m), nil
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(x.Value), nil
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(x.Value), nil
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(x.Value), nil
	case *types.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(x.Value), nil
	default:
		return events.DynamoDBAttributeValue{}, fmt.Errorf("%s: %T: %w", path, av, ErrUnsupportedAV)
	}
}

// ItemFromStreamsSDK converts an image read with the DynamoDB Streams API
// (GetRecords in aws-sdk-go-v2) to the DynamoDB typed item.
func ItemFromStreamsSDK(img map[string]streamtypes.AttributeValue) (Item, error) {
	if img == nil {
		return nil, fieldErr("NewImage", "is missing")
	}
	it := make(Item, len(img))
	for k, v := range img {
		av, err := streamsToAV(k, v)
		if err != nil {
			return nil, err
		}
		it[k] = av
	}
	return it, nil
}

func streamsToAV(path string, v streamtypes.AttributeValue) (types.AttributeValue, error) {
	switch x := v.(type) {
	case *streamtypes.AttributeValueMemberNULL:
		return &types.AttributeValueMemberNULL{Value: x.Value}, nil
	case *streamtypes.AttributeValueMemberBOOL:
		return &types.AttributeValueMemberBOOL{Value: x.Value}, nil
	case *streamtypes.AttributeValueMemberS:
		return &types.AttributeValueMemberS{Value: x.Value}, nil
	case *streamtypes.AttributeValueMemberN:
		return &types.AttributeValueMemberN{Value: x.Value}, nil
	case *streamtypes.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: x.Value}, nil
	case *streamtypes.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: x.Value}, nil
	case *streamtypes.AttributeValueMemberNS:
		return &types.AttributeValueMemberNS{Value: x.Value}, nil
	case *streamtypes.AttributeValueMemberBS:
		return &types.AttributeValueMemberBS{Value: x.Value}, nil
	case *streamtypes.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(x.Value))
		for i, e := range x.Value {
			av, err := streamsToAV(fmt.Sprintf("%s[%d]", path, i), e)
			if err != nil {
				return nil, err
			}
			l[i] = av
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case *streamtypes.AttributeValueMemberM:
		m := make(map[string]types.AttributeValue, len(x.Value))
		for k, e := range x.Value {
			av, err := streamsToAV(path+"."+k, e)
			if err != nil {
				return nil, err
			}
			m[k] = av
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	default:
		return nil, fmt.Errorf("%s: %T: %w", path, v, ErrUnsupportedAV)
	}
}
