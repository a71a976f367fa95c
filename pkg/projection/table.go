package projection

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Attributes of a projected row besides its keys and keys.AttrVersion.
const (
	AttrDoc         = "doc"     // S: the projected document, as JSON; absent on a tombstone
	AttrDeleted     = "deleted" // BOOL: true on a tombstone
	AttrProjectedAt = "projected_at"
	// AttrParkedAt is the RFC 3339 time a park was written (state table).
	AttrParkedAt = "parked_at"
)

// ParkShards is how many state-table partitions hold one projection's parks,
// so that SweepParks queries them instead of scanning the state table.
const ParkShards = 8

// DynamoDB is the part of the DynamoDB API Table uses.
type DynamoDB interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ DynamoDB = (*dynamodb.Client)(nil)

// Table keeps rows in the projection's own table and parks in the state
// table.
//
//	row   PK = tenant, SK = <ENTITY>#<id> (Entity set: <id>), version, deleted, doc, projected_at
//	park  pk = park#<projection>#<shard>, sk = <len>:<tenant>#<len>:<ENTITY>#<id>#<version, 20 digits>,
//	      change (JSON), parked_at, expires_at (TTL)
type Table struct {
	DB    DynamoDB
	Table string // the projection's table
	// PK and SK name the table's key attributes (default keys.AttrPK and
	// keys.AttrSK).
	PK, SK string
	// Entity, when set, is the one entity the table holds: its sort key is
	// the id alone.
	Entity     string
	StateTable string
	// Name prefixes the projection's parks (Projector.Name).
	Name string
	Now  func() time.Time
}

var _ Store = (*Table)(nil)

func sv(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func nv(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func (s *Table) pk() string {
	if s.PK == "" {
		return keys.AttrPK
	}
	return s.PK
}

func (s *Table) sk() string {
	if s.SK == "" {
		return keys.AttrSK
	}
	return s.SK
}

func (s *Table) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Table) key(tenant, entity, id string) map[string]types.AttributeValue {
	sk := entity + "#" + id
	if s.Entity != "" {
		sk = id
	}
	return map[string]types.AttributeValue{s.pk(): sv(tenant), s.sk(): sv(sk)}
}

// Get reads a row.
func (s *Table) Get(ctx context.Context, tenant, entity, id string) (Row, bool, error) {
	out, err := s.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table), Key: s.key(tenant, entity, id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Row{}, false, fmt.Errorf("read %s %s: %w", entity, id, err)
	}
	if out.Item == nil {
		return Row{}, false, nil
	}
	r, err := s.decodeRow(out.Item)
	if err != nil {
		return Row{}, false, fmt.Errorf("read %s %s: %w", entity, id, err)
	}
	return r, true, nil
}

func (s *Table) decodeRow(item map[string]types.AttributeValue) (Row, error) {
	var r Row
	if v, ok := item[s.pk()].(*types.AttributeValueMemberS); ok {
		r.Tenant = v.Value
	}
	if v, ok := item[s.sk()].(*types.AttributeValueMemberS); ok {
		if s.Entity != "" {
			r.Entity, r.ID = s.Entity, v.Value
		} else if e, id, ok := strings.Cut(v.Value, "#"); ok {
			r.Entity, r.ID = e, id
		}
	}
	if r.Tenant == "" || r.ID == "" {
		return Row{}, fmt.Errorf("row %s is not a projected row (keys %s, %s)", s.keyOf(item), s.pk(), s.sk())
	}
	v, ok := item[keys.AttrVersion].(*types.AttributeValueMemberN)
	if !ok {
		return Row{}, fmt.Errorf("row %s has no %s", s.keyOf(item), keys.AttrVersion)
	}
	var err error
	if r.Version, err = strconv.ParseInt(v.Value, 10, 64); err != nil {
		return Row{}, fmt.Errorf("row %s: %s: %w", s.keyOf(item), keys.AttrVersion, err)
	}
	if v, ok := item[AttrDeleted].(*types.AttributeValueMemberBOOL); ok {
		r.Deleted = v.Value
	}
	if v, ok := item[AttrDoc].(*types.AttributeValueMemberS); ok {
		if err := decodeJSON(v.Value, &r.Item); err != nil {
			return Row{}, fmt.Errorf("row %s: %s: %w", s.keyOf(item), AttrDoc, err)
		}
	}
	return r, nil
}

// Put writes a row conditionally on the version it replaces.
func (s *Table) Put(ctx context.Context, r Row, prev int64, found bool) (bool, error) {
	item := s.key(r.Tenant, r.Entity, r.ID)
	item[keys.AttrVersion] = nv(r.Version)
	item[AttrDeleted] = &types.AttributeValueMemberBOOL{Value: r.Deleted}
	item[AttrProjectedAt] = sv(envelope.FormatTime(s.now()))
	if !r.Deleted {
		b, err := json.Marshal(r.Item)
		if err != nil {
			return false, fmt.Errorf("project %s %s: %w", r.Entity, r.ID, err)
		}
		item[AttrDoc] = sv(string(b))
	}
	in := &dynamodb.PutItemInput{TableName: aws.String(s.Table), Item: item}
	if found {
		in.ConditionExpression = aws.String("#v = :prev")
		in.ExpressionAttributeNames = map[string]string{"#v": keys.AttrVersion}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": nv(prev)}
	} else {
		in.ConditionExpression = aws.String("attribute_not_exists(#pk)")
		in.ExpressionAttributeNames = map[string]string{"#pk": s.pk()}
	}
	_, err := s.DB.PutItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("project %s %s v%d: %w", r.Entity, r.ID, r.Version, err)
	}
	return true, nil
}

// Rows scans the projection's table.
func (s *Table) Rows(ctx context.Context, cursor string, limit int) ([]Row, string, error) {
	in := &dynamodb.ScanInput{TableName: aws.String(s.Table), ConsistentRead: aws.Bool(true), Limit: aws.Int32(int32(max(limit, 1)))}
	if cursor != "" {
		k, err := decodeCursor(cursor)
		if err != nil {
			return nil, "", err
		}
		in.ExclusiveStartKey = map[string]types.AttributeValue{s.pk(): sv(k.PK), s.sk(): sv(k.SK)}
	}
	out, err := s.DB.Scan(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("scan %s: %w", s.Table, err)
	}
	rows := make([]Row, 0, len(out.Items))
	var bad []error
	for _, it := range out.Items {
		r, err := s.decodeRow(it)
		if err != nil {
			bad = append(bad, &BadRowError{Key: s.keyOf(it), Err: err})
			continue
		}
		rows = append(rows, r)
	}
	next := ""
	if lek := out.LastEvaluatedKey; lek != nil {
		pk, _ := lek[s.pk()].(*types.AttributeValueMemberS)
		sk, _ := lek[s.sk()].(*types.AttributeValueMemberS)
		if pk == nil || sk == nil {
			return nil, "", fmt.Errorf("scan %s: last key %s lacks %s or %s", s.Table, s.keyOf(lek), s.pk(), s.sk())
		}
		next = encodeCursor(cursorKey{PK: pk.Value, SK: sk.Value})
	}
	return rows, next, errors.Join(bad...)
}

// BadRowError is a stored row that does not decode. Rows passes over it:
// it returns the page's other rows and its cursor with one BadRowError per
// such row, so that one bad row does not stop a scan.
type BadRowError struct {
	Key string
	Err error
}

func (e *BadRowError) Error() string { return fmt.Sprintf("row %s: %v", e.Key, e.Err) }

func (e *BadRowError) Unwrap() error { return e.Err }

func (s *Table) parkShard(tenant, entity, id string) int {
	h := fnv.New32a()
	fmt.Fprintf(h, "%d:%s#%d:%s#%s", len(tenant), tenant, len(entity), entity, id)
	return int(h.Sum32() % ParkShards)
}

func (s *Table) parkPK(shard int) string {
	return fmt.Sprintf("%s%s#%d", keys.StateParkedPrefix, s.Name, shard)
}

func (s *Table) parkKey(tenant, entity, id string, v int64) map[string]types.AttributeValue {
	// Tenant ids may hold '#' (any punctuation SQS allows): the tenant and
	// the entity are length-prefixed so that no two (tenant, entity, id)
	// share a key.
	return map[string]types.AttributeValue{
		keys.AttrPK: sv(s.parkPK(s.parkShard(tenant, entity, id))),
		keys.AttrSK: sv(fmt.Sprintf("%d:%s#%d:%s#%s#%020d", len(tenant), tenant, len(entity), entity, id, v)),
	}
}

// parked is a park as the state table stores its change.
type parked struct {
	Tenant  string         `json:"tenant"`
	Entity  string         `json:"entity"`
	ID      string         `json:"id"`
	Version int64          `json:"version"`
	Deleted bool           `json:"deleted,omitempty"`
	Item    map[string]any `json:"item,omitempty"`
}

// Park keeps a change in the state table unless that version is there
// already.
func (s *Table) Park(ctx context.Context, p Park) error {
	c := p.Change
	b, err := json.Marshal(parked{Tenant: p.Tenant, Entity: c.Entity, ID: c.ID, Version: c.Version, Deleted: c.Deleted, Item: c.Item})
	if err != nil {
		return fmt.Errorf("park %s %s v%d: %w", c.Entity, c.ID, c.Version, err)
	}
	item := s.parkKey(p.Tenant, c.Entity, c.ID, c.Version)
	item[keys.AttrChange] = sv(string(b))
	item[AttrParkedAt] = sv(envelope.FormatTime(p.ParkedAt))
	item[keys.AttrExpiresAt] = nv(p.ExpiresAt.Unix())
	_, err = s.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.StateTable), Item: item,
		// A duplicate delivery of a parked change keeps the first park:
		// its age is what SweepParks alarms on.
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": keys.AttrPK},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("park %s %s v%d: %w", c.Entity, c.ID, c.Version, err)
	}
	return nil
}

// Parked reads one park.
func (s *Table) Parked(ctx context.Context, tenant, entity, id string, v int64) (Park, bool, error) {
	out, err := s.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.StateTable), Key: s.parkKey(tenant, entity, id, v), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Park{}, false, fmt.Errorf("read parked %s %s v%d: %w", entity, id, v, err)
	}
	if out.Item == nil {
		return Park{}, false, nil
	}
	p, err := decodePark(out.Item)
	if err != nil {
		return Park{}, false, fmt.Errorf("read parked %s %s v%d: %w", entity, id, v, err)
	}
	return p, true, nil
}

// keyOf renders an item's key for an error message.
func (s *Table) keyOf(item map[string]types.AttributeValue) string {
	return fmt.Sprintf("(%s %s)", str(item[s.pk()]), str(item[s.sk()]))
}

func parkKeyOf(item map[string]types.AttributeValue) string {
	return fmt.Sprintf("(%s %s)", str(item[keys.AttrPK]), str(item[keys.AttrSK]))
}

func str(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return strconv.Quote(s.Value)
	}
	return "?"
}

func decodePark(item map[string]types.AttributeValue) (Park, error) {
	raw, ok := item[keys.AttrChange].(*types.AttributeValueMemberS)
	if !ok {
		return Park{}, fmt.Errorf("park %s has no %s", parkKeyOf(item), keys.AttrChange)
	}
	var c parked
	if err := decodeJSON(raw.Value, &c); err != nil {
		return Park{}, fmt.Errorf("park %s: %w", parkKeyOf(item), err)
	}
	p := Park{Tenant: c.Tenant, Change: Change{Entity: c.Entity, ID: c.ID, Version: c.Version, Deleted: c.Deleted, Item: c.Item}}
	if v, ok := item[AttrParkedAt].(*types.AttributeValueMemberS); ok {
		p.ParkedAt, _ = time.Parse(time.RFC3339Nano, v.Value)
	}
	if v, ok := item[keys.AttrExpiresAt].(*types.AttributeValueMemberN); ok {
		if sec, err := strconv.ParseInt(v.Value, 10, 64); err == nil {
			p.ExpiresAt = time.Unix(sec, 0).UTC()
		}
	}
	return p, nil
}

// Unpark removes one park.
func (s *Table) Unpark(ctx context.Context, tenant, entity, id string, v int64) error {
	if _, err := s.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.StateTable), Key: s.parkKey(tenant, entity, id, v)}); err != nil {
		return fmt.Errorf("unpark %s %s v%d: %w", entity, id, v, err)
	}
	return nil
}

// Parks queries the projection's park partitions in turn.
func (s *Table) Parks(ctx context.Context, cursor string, limit int) ([]Park, string, error) {
	shard, after := 0, ""
	if cursor != "" {
		k, err := decodeCursor(cursor)
		if err != nil {
			return nil, "", err
		}
		if shard, err = strconv.Atoi(k.PK); err != nil || shard < 0 || shard >= ParkShards {
			return nil, "", fmt.Errorf("park cursor: shard %q: %w", k.PK, ErrBadCursor)
		}
		after = k.SK
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.StateTable),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": keys.AttrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": sv(s.parkPK(shard))},
		Limit:                     aws.Int32(int32(max(limit, 1))),
	}
	if after != "" {
		in.ExclusiveStartKey = map[string]types.AttributeValue{keys.AttrPK: sv(s.parkPK(shard)), keys.AttrSK: sv(after)}
	}
	out, err := s.DB.Query(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("list parks of %s: %w", s.Name, err)
	}
	ps := make([]Park, 0, len(out.Items))
	for _, it := range out.Items {
		p, err := decodePark(it)
		if err != nil {
			return nil, "", fmt.Errorf("list parks of %s: %w", s.Name, err)
		}
		ps = append(ps, p)
	}
	switch sk, _ := out.LastEvaluatedKey[keys.AttrSK].(*types.AttributeValueMemberS); {
	case sk != nil:
		return ps, encodeCursor(cursorKey{PK: strconv.Itoa(shard), SK: sk.Value}), nil
	case shard+1 < ParkShards:
		return ps, encodeCursor(cursorKey{PK: strconv.Itoa(shard + 1)}), nil
	default:
		return ps, "", nil
	}
}

// ErrBadCursor: a cursor this package did not write.
var ErrBadCursor = errors.New("bad cursor")

type cursorKey struct {
	PK string `json:"p"`
	SK string `json:"s,omitempty"`
}

func encodeCursor(k cursorKey) string {
	b, _ := json.Marshal(k)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(c string) (cursorKey, error) {
	var k cursorKey
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		err = json.Unmarshal(b, &k)
	}
	if err != nil {
		return cursorKey{}, fmt.Errorf("cursor %q: %w", c, ErrBadCursor)
	}
	return k, nil
}

func decodeJSON(s string, v any) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	return dec.Decode(v)
}

// TableSchema is a projection table as the examples deploy it (pk, sk
// strings), for tests and local runs that create the table themselves.
func TableSchema(name string) *dynamodb.CreateTableInput { return keys.PKSKTable(name) }
