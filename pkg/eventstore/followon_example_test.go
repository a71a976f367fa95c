package eventstore_test

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
)

// A DURABLE handler reacting to order.placed records the reservation and
// announces stock.reserved in one transaction. The follow-on is caused by
// the order's event, lands in its tenant, and is appended once however
// often the handler runs for that event.
func ExampleEmitterFrom() {
	onOrderPlaced := func(ctx context.Context, e envelope.Envelope) error {
		em, err := eventstore.EmitterFrom(ctx)
		if err != nil {
			return err // not run by a DURABLE delivery: dead-lettered at once
		}
		reservation := types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String("reservations"),
			Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: em.Tenant() + "#" + e.ID},
			},
		}}
		_, err = em.Emit(ctx, "stock.reserved", map[string]any{"order_event": e.ID}, reservation)
		return err
	}
	_ = onOrderPlaced
}
