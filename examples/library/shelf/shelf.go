// Package shelf is the library's BEST_EFFORT subscriber: it projects the LOAN
// change feed into the shelf table, one row per loan saying whether its book
// is out or back on the shelf. Change events arrive unordered and may repeat,
// so each is applied by version: a row is written only over an older one,
// and a delete leaves a tombstone at its version that no late write of that
// version or older can overwrite. The projection therefore reaches each
// loan's final version whatever the order of arrival; a change event the
// feed lost is re-applied by dlq-repair (Repair).
package shelf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/examples/library/loans"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// EnvTable names the shelf table in a function's environment.
const EnvTable = "LIBRARY_SHELF_TABLE"

// Attributes of a shelf row besides loans.AttrTenant and loans.AttrID (its
// keys) and loans.AttrVersion.
const (
	AttrBook    = "book"
	AttrOnShelf = "on_shelf"
	AttrDeleted = "deleted"
)

// Module declares shelf's one subscription.
var Module = catalog.Module[*Projector]{
	Name: "shelf",
	Doc:  "Shelf availability projection.",
	Subscribes: []catalog.Subscription[*Projector]{
		{Name: "shelf.loans", Types: "record.*." + loans.Entity, Lane: catalog.BestEffort, Reads: []int{catalog.ChangeSchemaVersion},
			Doc: "Apply loan writes and deletes by version.", Handler: (*Projector).OnChange},
	},
}

// DB is the part of the DynamoDB client shelf uses.
type DB interface {
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

var _ DB = (*dynamodb.Client)(nil)

// Projector is shelf's handler receiver.
type Projector struct {
	DB     DB
	Table  string // the shelf table
	Logger *slog.Logger
}

// OnChange applies one change event of a loan.
func (p *Projector) OnChange(ctx context.Context, e envelope.Envelope) error {
	entity, deleted, ok := catalog.ParseChangeType(e.Type)
	if !ok || entity != loans.Entity {
		return fmt.Errorf("shelf: %s is not a change of %s", e.Type, loans.Entity)
	}
	var c catalog.ChangeV1
	if err := e.DecodePayload(&c); err != nil {
		return fmt.Errorf("shelf: %w", err)
	}
	if c.ID == "" || c.Version < 1 {
		return fmt.Errorf("shelf: %s carries id %q version %d", e.Type, c.ID, c.Version)
	}
	if deleted {
		c.Item = nil
	}
	return p.apply(ctx, e.TenantID, c.ID, c.Version, c.Item)
}

// Repair applies a loan as re-read from its table (item nil: it is gone, at
// version): dlq-repair calls it when the loan's change events were lost.
func (p *Projector) Repair(ctx context.Context, tenant, entity, id string, version int64, item map[string]any) error {
	if entity != loans.Entity {
		return fmt.Errorf("shelf: repair of %s, want %s", entity, loans.Entity)
	}
	return p.apply(ctx, tenant, id, version, item)
}

// apply writes the row of loan id at version (a tombstone when item is nil)
// unless the row already holds that version or a later one; a tombstone also
// replaces a live row of its own version.
func (p *Projector) apply(ctx context.Context, tenant, id string, version int64, item map[string]any) error {
	row := map[string]types.AttributeValue{
		loans.AttrTenant:  &types.AttributeValueMemberS{Value: tenant},
		loans.AttrID:      &types.AttributeValueMemberS{Value: id},
		loans.AttrVersion: &types.AttributeValueMemberN{Value: strconv.FormatInt(version, 10)},
	}
	cond := "attribute_not_exists(#v) OR #v < :v"
	if item == nil {
		row[AttrDeleted] = &types.AttributeValueMemberBOOL{Value: true}
		cond = "attribute_not_exists(#v) OR #v <= :v"
	} else {
		book, _ := item[loans.AttrBook].(string)
		status, _ := item[loans.AttrStatus].(string)
		row[AttrBook] = &types.AttributeValueMemberS{Value: book}
		row[AttrOnShelf] = &types.AttributeValueMemberBOOL{Value: status == loans.StatusReturned}
	}
	_, err := p.DB.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(p.Table),
		Item:                      row,
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  map[string]string{"#v": loans.AttrVersion},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: strconv.FormatInt(version, 10)}},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // a duplicate, or older than what is projected
	}
	if err != nil {
		return fmt.Errorf("shelf: loan %s v%d: %w", id, version, err)
	}
	p.log().DebugContext(ctx, "loan projected", slog.String("tenant", tenant), slog.String("loan_id", id), slog.Int64("version", version))
	return nil
}

func (p *Projector) log() *slog.Logger {
	if p.Logger == nil {
		return slog.Default()
	}
	return p.Logger
}

// Row is one projected loan.
type Row struct {
	Version int64
	Book    string
	OnShelf bool
	Deleted bool
}

// Get reads the projected row of loan id.
func (p *Projector) Get(ctx context.Context, tenant, id string) (Row, bool, error) {
	out, err := p.DB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(p.Table),
		ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			loans.AttrTenant: &types.AttributeValueMemberS{Value: tenant},
			loans.AttrID:     &types.AttributeValueMemberS{Value: id},
		},
	})
	if err != nil {
		return Row{}, false, fmt.Errorf("shelf: read loan %s: %w", id, err)
	}
	if out.Item == nil {
		return Row{}, false, nil
	}
	var r Row
	if v, ok := out.Item[loans.AttrVersion].(*types.AttributeValueMemberN); ok {
		r.Version, _ = strconv.ParseInt(v.Value, 10, 64)
	}
	if v, ok := out.Item[AttrBook].(*types.AttributeValueMemberS); ok {
		r.Book = v.Value
	}
	if v, ok := out.Item[AttrOnShelf].(*types.AttributeValueMemberBOOL); ok {
		r.OnShelf = v.Value
	}
	if v, ok := out.Item[AttrDeleted].(*types.AttributeValueMemberBOOL); ok {
		r.Deleted = v.Value
	}
	return r, true, nil
}
