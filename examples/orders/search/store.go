package search

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// ProjectionName prefixes this projection's parked rows in the state table.
const ProjectionName = "search"

// The search table: EnvTable names it in the functions' environment; its
// keys are keys.AttrPK (the tenant) and keys.AttrSK (<ENTITY>#<id>).
const (
	EnvTable        = "SEARCH_TABLE"
	SKSep           = "#"
	AttrDoc         = "doc"     // M: the projected item; absent on a tombstone
	AttrDeleted     = "deleted" // BOOL: true on a tombstone
	AttrProjectedAt = "projected_at"
)

// DynamoDB is the part of the DynamoDB API DynamoStore uses.
type DynamoDB interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// DynamoStore keeps docs in the search table (pk = tenant, sk =
// <ENTITY>#<id>) and parked changes in the state table (pk =
// park#search#<len>:<tenant>#<len>:<ENTITY>#<id>, sk = version in 20 digits, with a TTL).
type DynamoStore struct {
	DB          DynamoDB
	SearchTable string
	StateTable  string
	// ParkFor is how long a parked change is kept (default 7 days); past it,
	// only Repair closes the gap.
	ParkFor time.Duration
	Now     func() time.Time
}

var _ Store = (*DynamoStore)(nil)

func sv(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func nv(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func (s *DynamoStore) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func docKey(tenant, entity, id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{keys.AttrPK: sv(tenant), keys.AttrSK: sv(entity + SKSep + id)}
}

func parkKey(tenant, entity, id string, v int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		// Tenant ids may hold '#' (any punctuation SQS allows): the tenant and the entity are
		// length-prefixed so that no two (tenant, entity, id) share a key.
		keys.AttrPK: sv(fmt.Sprintf("%s%s#%d:%s#%d:%s#%s", keys.StateParkedPrefix, ProjectionName, len(tenant), tenant, len(entity), entity, id)),
		keys.AttrSK: sv(fmt.Sprintf("%020d", v)),
	}
}

func (s *DynamoStore) Get(ctx context.Context, tenant, entity, id string) (Doc, bool, error) {
	out, err := s.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.SearchTable), Key: docKey(tenant, entity, id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Doc{}, false, fmt.Errorf("read %s %s: %w", entity, id, err)
	}
	if out.Item == nil {
		return Doc{}, false, nil
	}
	d := Doc{Tenant: tenant, Entity: entity, ID: id}
	if v, ok := out.Item[keys.AttrVersion].(*types.AttributeValueMemberN); ok {
		d.Version, _ = strconv.ParseInt(v.Value, 10, 64)
	}
	if v, ok := out.Item[AttrDeleted].(*types.AttributeValueMemberBOOL); ok {
		d.Deleted = v.Value
	}
	if v, ok := out.Item[AttrDoc].(*types.AttributeValueMemberS); ok {
		if d.Item, err = decodeJSON(v.Value); err != nil {
			return Doc{}, false, fmt.Errorf("read %s %s: %w", entity, id, err)
		}
	}
	return d, true, nil
}

func (s *DynamoStore) Put(ctx context.Context, d Doc, prev int64, found bool) (bool, error) {
	item := docKey(d.Tenant, d.Entity, d.ID)
	item[keys.AttrVersion] = nv(d.Version)
	item[AttrDeleted] = &types.AttributeValueMemberBOOL{Value: d.Deleted}
	item[AttrProjectedAt] = sv(envelope.FormatTime(s.now()))
	if !d.Deleted {
		b, err := json.Marshal(d.Item)
		if err != nil {
			return false, fmt.Errorf("project %s %s: %w", d.Entity, d.ID, err)
		}
		item[AttrDoc] = sv(string(b))
	}
	in := &dynamodb.PutItemInput{TableName: aws.String(s.SearchTable), Item: item}
	if found {
		in.ConditionExpression = aws.String("#v = :prev")
		in.ExpressionAttributeNames = map[string]string{"#v": keys.AttrVersion}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": nv(prev)}
	} else {
		in.ConditionExpression = aws.String("attribute_not_exists(#pk)")
		in.ExpressionAttributeNames = map[string]string{"#pk": keys.AttrPK}
	}
	_, err := s.DB.PutItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("project %s %s v%d: %w", d.Entity, d.ID, d.Version, err)
	}
	return true, nil
}

func (s *DynamoStore) Park(ctx context.Context, tenant string, c catalog.ChangeV1) error {
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("park %s %s v%d: %w", c.Entity, c.ID, c.Version, err)
	}
	keep := s.ParkFor
	if keep <= 0 {
		keep = 7 * 24 * time.Hour
	}
	item := parkKey(tenant, c.Entity, c.ID, c.Version)
	item[keys.AttrChange] = sv(string(b))
	item[keys.AttrExpiresAt] = nv(s.now().Add(keep).Unix())
	if _, err := s.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.StateTable), Item: item}); err != nil {
		return fmt.Errorf("park %s %s v%d: %w", c.Entity, c.ID, c.Version, err)
	}
	return nil
}

func (s *DynamoStore) Parked(ctx context.Context, tenant, entity, id string, v int64) (catalog.ChangeV1, bool, error) {
	out, err := s.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.StateTable), Key: parkKey(tenant, entity, id, v), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return catalog.ChangeV1{}, false, fmt.Errorf("read parked %s %s v%d: %w", entity, id, v, err)
	}
	raw, ok := out.Item[keys.AttrChange].(*types.AttributeValueMemberS)
	if !ok {
		return catalog.ChangeV1{}, false, nil
	}
	var c catalog.ChangeV1
	dec := json.NewDecoder(bytes.NewReader([]byte(raw.Value)))
	dec.UseNumber()
	if err := dec.Decode(&c); err != nil {
		return catalog.ChangeV1{}, false, fmt.Errorf("read parked %s %s v%d: %w", entity, id, v, err)
	}
	return c, true, nil
}

func (s *DynamoStore) Unpark(ctx context.Context, tenant, entity, id string, v int64) error {
	if _, err := s.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.StateTable), Key: parkKey(tenant, entity, id, v)}); err != nil {
		return fmt.Errorf("unpark %s %s v%d: %w", entity, id, v, err)
	}
	return nil
}

func decodeJSON(s string) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// MemoryStore is an in-memory Store (tests, local experiments). Safe for
// concurrent use.
type MemoryStore struct {
	mu     sync.Mutex
	docs   map[string]Doc
	parked map[string]catalog.ChangeV1
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{docs: map[string]Doc{}, parked: map[string]catalog.ChangeV1{}}
}

func mkey(tenant, entity, id string) string { return tenant + "\x00" + entity + "\x00" + id }

func (m *MemoryStore) Get(_ context.Context, tenant, entity, id string) (Doc, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.docs[mkey(tenant, entity, id)]
	return d, ok, nil
}

func (m *MemoryStore) Put(_ context.Context, d Doc, prev int64, found bool) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := mkey(d.Tenant, d.Entity, d.ID)
	cur, ok := m.docs[k]
	if ok != found || ok && cur.Version != prev {
		return false, nil
	}
	m.docs[k] = d
	return true, nil
}

func (m *MemoryStore) Park(_ context.Context, tenant string, c catalog.ChangeV1) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.parked[mkey(tenant, c.Entity, c.ID)+"\x00"+strconv.FormatInt(c.Version, 10)] = c
	return nil
}

func (m *MemoryStore) Parked(_ context.Context, tenant, entity, id string, v int64) (catalog.ChangeV1, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.parked[mkey(tenant, entity, id)+"\x00"+strconv.FormatInt(v, 10)]
	return c, ok, nil
}

func (m *MemoryStore) Unpark(_ context.Context, tenant, entity, id string, v int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.parked, mkey(tenant, entity, id)+"\x00"+strconv.FormatInt(v, 10))
	return nil
}

// TableSchema is the search table as infra/ deploys it (pk, sk strings), for
// tests and local runs that create the table themselves.
func TableSchema(name string) *dynamodb.CreateTableInput {
	return keys.PKSKTable(name)
}
