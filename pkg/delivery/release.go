package delivery

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// ErrNotQuarantined: Release names an event that is not quarantined for
// the subscription.
var ErrNotQuarantined = errors.New("not quarantined")

// Released is what Release did.
type Released struct {
	Quarantined Quarantined
	// DeadLetter is whether the event has an open dead letter for the
	// subscription (its replays were reset); Replays is how many failed
	// replays it had.
	DeadLetter bool
	Replays    int
}

// Release takes an event off a subscription's quarantine list (an
// operator's decision: `fourlanes deadletters -release`) and, if it has an
// open dead letter for the subscription, resets its failed replays to 0:
// the next dlq-repair run replays it at once, and a failure then backs off
// from the first step again, up to the cap. One transaction, so a release
// never leaves the quarantine gone with the old count (which would
// quarantine it again at once). ErrNotQuarantined, with nothing written,
// when the event is not quarantined.
func (d *DynamoStore) Release(ctx context.Context, tenant, sub, eventID string) (Released, error) {
	what := fmt.Sprintf("release %s of tenant %s for %s", eventID, tenant, sub)
	qk := quarantineKey(tenant, sub, eventID)
	q, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: qk, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Released{}, fmt.Errorf("%s: read the quarantine: %w", what, err)
	}
	if q.Item == nil {
		return Released{}, fmt.Errorf("%s: %w", what, ErrNotQuarantined)
	}
	out := Released{Quarantined: Quarantined{Tenant: tenant, Subscription: sub, EventID: eventID, Seq: num(q.Item, keys.AttrSeq),
		Reason: str(q.Item, keys.AttrReason), At: when(q.Item, keys.AttrUpdatedAt)}}
	dk := deadKey(tenant, Key{EventID: eventID, Subscription: sub})
	dead, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: dk, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Released{}, fmt.Errorf("%s: read its dead letter: %w", what, err)
	}
	items := []types.TransactWriteItem{{Delete: &types.Delete{TableName: aws.String(d.table), Key: qk,
		ConditionExpression: aws.String("attribute_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": keys.AttrPK}}}}
	if dead.Item != nil {
		out.DeadLetter, out.Replays = true, int(num(dead.Item, keys.AttrReplays))
		items = append(items, types.TransactWriteItem{Update: &types.Update{TableName: aws.String(d.table), Key: dk,
			UpdateExpression:          aws.String("SET #rp = :zero"),
			ConditionExpression:       aws.String("attribute_exists(#pk)"),
			ExpressionAttributeNames:  map[string]string{"#rp": keys.AttrReplays, "#pk": keys.AttrPK},
			ExpressionAttributeValues: map[string]types.AttributeValue{":zero": n(0)}}})
	}
	if err := d.transact(ctx, items...); err != nil {
		var tc *types.TransactionCanceledException
		if errors.As(err, &tc) {
			return Released{}, fmt.Errorf("%s: the quarantine or the dead letter changed meanwhile (released or resolved by another run); list again: %w", what, err)
		}
		return Released{}, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}
