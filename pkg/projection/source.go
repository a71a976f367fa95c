package projection

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/changefeed"
)

// Source is what a projection is built from: the entities as their table
// holds them now.
type Source interface {
	// Get reads one entity (found false: it is not in the table).
	Get(ctx context.Context, tenant, entity, id string) (Change, bool, error)
	// Scan pages through every entity; cursor "" starts, a returned cursor
	// "" means the end.
	Scan(ctx context.Context, cursor string, limit int) ([]Entity, string, error)
}

// Entity is one entity a Source holds.
type Entity struct {
	Tenant string
	Change Change
}

// SourceDB is the part of the DynamoDB API TableSource uses.
type SourceDB interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// TableSource reads a tracked table, keyed by its entity's TenantAttr
// (partition key) and IDAttr (sort key), both strings. Items are read as the
// change feed reads them (changefeed.FromItem), so a projection is handed
// the same item from the table as from a change event.
type TableSource struct {
	DB     SourceDB
	Table  string
	Entity catalog.Entity
}

var _ Source = (*TableSource)(nil)

func (s *TableSource) change(item map[string]types.AttributeValue) (Entity, error) {
	c, err := changefeed.FromItem(s.Entity, s.Table, item, time.Now())
	if err != nil {
		return Entity{}, err
	}
	return Entity{Tenant: c.Envelope.TenantID, Change: Change{Entity: s.Entity.Name, ID: c.Payload.ID, Version: c.Payload.Version, Item: c.Payload.Item}}, nil
}

// Get reads one item with a consistent read.
func (s *TableSource) Get(ctx context.Context, tenant, entity, id string) (Change, bool, error) {
	if entity != s.Entity.Name {
		return Change{}, false, fmt.Errorf("read %s %s from the %s table: %w", entity, id, s.Entity.Name, ErrBadChange)
	}
	out, err := s.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table), ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{
		s.Entity.TenantAttr: sv(tenant), s.Entity.IDAttr: sv(id),
	}})
	if err != nil {
		return Change{}, false, fmt.Errorf("read %s %s: %w", entity, id, err)
	}
	if out.Item == nil {
		return Change{}, false, nil
	}
	e, err := s.change(out.Item)
	if err != nil {
		return Change{}, false, fmt.Errorf("read %s %s: %w", entity, id, err)
	}
	return e.Change, true, nil
}

// Scan pages through the table with consistent reads. An item that is not
// a change of the entity (no version, say) is skipped: the change feed
// rejects it too.
func (s *TableSource) Scan(ctx context.Context, cursor string, limit int) ([]Entity, string, error) {
	in := &dynamodb.ScanInput{TableName: aws.String(s.Table), ConsistentRead: aws.Bool(true), Limit: aws.Int32(int32(max(limit, 1)))}
	if cursor != "" {
		k, err := decodeCursor(cursor)
		if err != nil {
			return nil, "", err
		}
		in.ExclusiveStartKey = map[string]types.AttributeValue{s.Entity.TenantAttr: sv(k.PK), s.Entity.IDAttr: sv(k.SK)}
	}
	out, err := s.DB.Scan(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("scan %s: %w", s.Table, err)
	}
	es := make([]Entity, 0, len(out.Items))
	for _, it := range out.Items {
		e, err := s.change(it)
		if errors.Is(err, changefeed.ErrRejected) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("scan %s: %w", s.Table, err)
		}
		es = append(es, e)
	}
	next := ""
	if lek := out.LastEvaluatedKey; lek != nil {
		pk, _ := lek[s.Entity.TenantAttr].(*types.AttributeValueMemberS)
		sk, _ := lek[s.Entity.IDAttr].(*types.AttributeValueMemberS)
		if pk == nil || sk == nil {
			return nil, "", fmt.Errorf("scan %s: the last key lacks %s or %s (string keys)", s.Table, s.Entity.TenantAttr, s.Entity.IDAttr)
		}
		next = encodeCursor(cursorKey{PK: pk.Value, SK: sk.Value})
	}
	return es, next, nil
}
