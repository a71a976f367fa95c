// Package orders is the example's order lifecycle: it writes the orders table
// and announces each change in the same transaction (Emit with the write as
// an extra write), so no order changes without its event and no event exists
// without its change.
package orders

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/fourlanes/fourlanes/pkg/changefeed"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// Order statuses.
const (
	StatusPlaced    = "placed"
	StatusPaid      = "paid"
	StatusShipped   = "shipped"
	StatusCancelled = "cancelled"
)

// Order item attributes besides AttrTenant, AttrID and keys.AttrVersion.
const (
	AttrStatus        = "status"
	AttrCustomerEmail = "customer_email"
	AttrTotalCents    = "total_cents"
	AttrCurrency      = "currency"
	AttrUpdatedAt     = "updated_at"
)

// ErrStale: the order changed since the caller read it (its version moved).
var ErrStale = errors.New("order changed since it was read")

// Emitter is the part of eventstore.Store that orders uses. Every emit
// names its order as the shard key, so a tenant the application later
// declares hot (app.Application.ChainShards) keeps each order's events in
// order on one chain with no change here; a tenant with one chain ignores it.
type Emitter interface {
	EmitWith(ctx context.Context, in eventstore.EmitInput) (envelope.Envelope, error)
}

// Order is the state of one order as the service returns it.
type Order struct {
	ID            string
	Version       int64
	Status        string
	CustomerEmail string
	Items         []Item
	TotalCents    int64
	Currency      string
}

// Service places and advances orders. The tenant comes from the context.
type Service struct {
	Events Emitter
	Table  string // the orders table
	Now    func() time.Time
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Place creates an order at version 1 and emits order.placed with it. The
// error may be an *eventstore.PostCommitError: the order exists, but an
// INLINE subscription (inventory) refused it; cancel it then.
func (s *Service) Place(ctx context.Context, email string, items []Item, totalCents int64, currency string) (Order, error) {
	tenant, err := tenancy.Tenant(ctx)
	if err != nil {
		return Order{}, fmt.Errorf("place order: %w", err)
	}
	o := Order{ID: uuid.NewString(), Version: 1, Status: StatusPlaced, CustomerEmail: email, Items: items, TotalCents: totalCents, Currency: currency}
	put := PutNew(s.Table, tenant, o, s.now())
	// The order's change event (and the search projection's work) joins
	// this request's trace, as order.placed does.
	changefeed.StampTrace(ctx, put.Put.Item)
	_, err = s.Events.EmitWith(ctx, eventstore.EmitInput{Type: TypePlaced, ShardKey: o.ID, Extra: []types.TransactWriteItem{put},
		Payload: PlacedV2{OrderID: o.ID, CustomerEmail: email, Items: items, TotalCents: totalCents, Currency: currency}})
	if err != nil {
		return o, fmt.Errorf("place order: %w", err)
	}
	return o, nil
}

// Pay records the payment of o (as the caller read it) and emits order.paid.
// ErrStale if the order changed since it was read.
func (s *Service) Pay(ctx context.Context, o Order, paymentRef string) (Order, error) {
	upd, err := s.step(ctx, o, StatusPaid)
	if err != nil {
		return o, err
	}
	_, err = s.Events.EmitWith(ctx, eventstore.EmitInput{Type: TypePaid, ShardKey: o.ID, Extra: []types.TransactWriteItem{upd},
		Payload: PaidV1{OrderID: o.ID, CustomerEmail: o.CustomerEmail, AmountCents: o.TotalCents, PaymentRef: paymentRef}})
	return next(o, StatusPaid, err)
}

// Ship records the shipment of o and emits order.shipped.
func (s *Service) Ship(ctx context.Context, o Order, carrier, tracking string) (Order, error) {
	upd, err := s.step(ctx, o, StatusShipped)
	if err != nil {
		return o, err
	}
	_, err = s.Events.EmitWith(ctx, eventstore.EmitInput{Type: TypeShipped, ShardKey: o.ID, Extra: []types.TransactWriteItem{upd},
		Payload: ShippedV1{OrderID: o.ID, CustomerEmail: o.CustomerEmail, Carrier: carrier, TrackingNumber: tracking}})
	return next(o, StatusShipped, err)
}

// Cancel cancels o and emits order.cancelled.
func (s *Service) Cancel(ctx context.Context, o Order, reason string) (Order, error) {
	upd, err := s.step(ctx, o, StatusCancelled)
	if err != nil {
		return o, err
	}
	_, err = s.Events.EmitWith(ctx, eventstore.EmitInput{Type: TypeCancelled, ShardKey: o.ID, Extra: []types.TransactWriteItem{upd},
		Payload: CancelledV1{OrderID: o.ID, CustomerEmail: o.CustomerEmail, Reason: reason}})
	return next(o, StatusCancelled, err)
}

// step builds the versioned update that moves o to status.
func (s *Service) step(ctx context.Context, o Order, status string) (types.TransactWriteItem, error) {
	tenant, err := tenancy.Tenant(ctx)
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("order %s to %s: %w", o.ID, status, err)
	}
	return Advance(s.Table, tenant, o.ID, o.Version, map[string]types.AttributeValue{
		AttrStatus:    &types.AttributeValueMemberS{Value: status},
		AttrUpdatedAt: &types.AttributeValueMemberS{Value: envelope.FormatTime(s.now())},
	}), nil
}

// next returns o moved to status after a successful Emit, or the Emit's
// error with a refused version condition named as ErrStale.
func next(o Order, status string, err error) (Order, error) {
	var cw *eventstore.CallerWriteError
	switch {
	case errors.As(err, &cw) && cw.ConditionFailed():
		return o, fmt.Errorf("order %s to %s: version %d: %w", o.ID, status, o.Version, ErrStale)
	case err != nil:
		var pc *eventstore.PostCommitError
		if !errors.As(err, &pc) {
			return o, fmt.Errorf("order %s to %s: %w", o.ID, status, err)
		}
		// Committed; an INLINE subscription failed afterwards.
		o.Version++
		o.Status = status
		return o, fmt.Errorf("order %s to %s: %w", o.ID, status, err)
	}
	o.Version++
	o.Status = status
	return o, nil
}

func sortedKeys(m map[string]types.AttributeValue) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Validate refuses a placed order without lines or with a bad quantity or currency.
func (p PlacedV2) Validate() error {
	if len(p.Items) == 0 {
		return &envelope.FieldError{Field: "items", Reason: "is empty; an order has at least one line"}
	}
	for i, it := range p.Items {
		if it.Qty < 1 {
			return &envelope.FieldError{Field: fmt.Sprintf("items[%d].qty", i), Reason: fmt.Sprintf("is %d; at least 1", it.Qty)}
		}
	}
	if len(p.Currency) != 3 {
		return &envelope.FieldError{Field: "currency", Reason: fmt.Sprintf("%q is not an ISO 4217 code", p.Currency)}
	}
	return nil
}

// PutNew builds the transaction write that creates o at version 1 in the
// orders table, refused if the order already exists.
func PutNew(table, tenant string, o Order, now time.Time) types.TransactWriteItem {
	items := make([]types.AttributeValue, len(o.Items))
	for i, it := range o.Items {
		items[i] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"sku": &types.AttributeValueMemberS{Value: it.SKU},
			"qty": &types.AttributeValueMemberN{Value: strconv.Itoa(it.Qty)},
		}}
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			AttrTenant:        &types.AttributeValueMemberS{Value: tenant},
			AttrID:            &types.AttributeValueMemberS{Value: o.ID},
			keys.AttrVersion:  &types.AttributeValueMemberN{Value: "1"},
			AttrStatus:        &types.AttributeValueMemberS{Value: o.Status},
			AttrCustomerEmail: &types.AttributeValueMemberS{Value: o.CustomerEmail},
			AttrTotalCents:    &types.AttributeValueMemberN{Value: strconv.FormatInt(o.TotalCents, 10)},
			AttrCurrency:      &types.AttributeValueMemberS{Value: o.Currency},
			"items":           &types.AttributeValueMemberL{Value: items},
			AttrUpdatedAt:     &types.AttributeValueMemberS{Value: envelope.FormatTime(now)},
		},
		ConditionExpression:      aws.String("attribute_not_exists(#id)"),
		ExpressionAttributeNames: map[string]string{"#id": AttrID},
	}}
}

// Advance builds the transaction write that moves an order from version
// fromVersion to fromVersion+1, setting the given attributes. It is refused
// (ConditionalCheckFailed on the caller's write) if the order is absent or
// its version moved: optimistic concurrency on the version.
func Advance(table, tenant, orderID string, fromVersion int64, set map[string]types.AttributeValue) types.TransactWriteItem {
	names := map[string]string{"#v": keys.AttrVersion}
	values := map[string]types.AttributeValue{
		":from": &types.AttributeValueMemberN{Value: strconv.FormatInt(fromVersion, 10)},
		":next": &types.AttributeValueMemberN{Value: strconv.FormatInt(fromVersion+1, 10)},
	}
	expr := "SET #v = :next"
	i := 0
	for _, name := range sortedKeys(set) {
		i++
		n, v := "#a"+strconv.Itoa(i), ":a"+strconv.Itoa(i)
		names[n], values[v] = name, set[name]
		expr += ", " + n + " = " + v
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(table),
		Key: map[string]types.AttributeValue{
			AttrTenant: &types.AttributeValueMemberS{Value: tenant},
			AttrID:     &types.AttributeValueMemberS{Value: orderID},
		},
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String("#v = :from"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}}
}

// Delete builds the transaction write that deletes an order at version
// fromVersion (the change feed turns it into a record.deleted.ORDER tombstone).
func Delete(table, tenant, orderID string, fromVersion int64) types.TransactWriteItem {
	return types.TransactWriteItem{Delete: &types.Delete{
		TableName: aws.String(table),
		Key: map[string]types.AttributeValue{
			AttrTenant: &types.AttributeValueMemberS{Value: tenant},
			AttrID:     &types.AttributeValueMemberS{Value: orderID},
		},
		ConditionExpression:       aws.String("#v = :from"),
		ExpressionAttributeNames:  map[string]string{"#v": keys.AttrVersion},
		ExpressionAttributeValues: map[string]types.AttributeValue{":from": &types.AttributeValueMemberN{Value: strconv.FormatInt(fromVersion, 10)}},
	}}
}

// Get reads an order.
func Get(ctx context.Context, db interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}, table, tenant, orderID string) (Order, bool, error) {
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			AttrTenant: &types.AttributeValueMemberS{Value: tenant},
			AttrID:     &types.AttributeValueMemberS{Value: orderID},
		},
	})
	if err != nil {
		return Order{}, false, fmt.Errorf("read order %s: %w", orderID, err)
	}
	if out.Item == nil {
		return Order{}, false, nil
	}
	o := Order{ID: orderID}
	if v, ok := out.Item[keys.AttrVersion].(*types.AttributeValueMemberN); ok {
		o.Version, _ = strconv.ParseInt(v.Value, 10, 64)
	}
	if v, ok := out.Item[AttrStatus].(*types.AttributeValueMemberS); ok {
		o.Status = v.Value
	}
	if v, ok := out.Item[AttrCustomerEmail].(*types.AttributeValueMemberS); ok {
		o.CustomerEmail = v.Value
	}
	return o, true, nil
}
