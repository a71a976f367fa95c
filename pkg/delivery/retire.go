package delivery

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Undeclared is a subscription the application no longer declares, as
// dlq-repair recorded it (keys.StateSubRetirePK).
type Undeclared struct {
	Subscription string
	Since        time.Time // first found undeclared
	RetiredAt    time.Time // zero until every tenant's state was removed
}

// Retired is what RetireTenant removed of one tenant's state of a
// subscription.
type Retired struct {
	Watermark   bool
	Backfill    bool
	Quarantined int
	DeadLetters int
}

// Any is whether anything was removed.
func (r Retired) Any() bool {
	return r.Watermark || r.Backfill || r.Quarantined > 0 || r.DeadLetters > 0
}

func (r Retired) String() string {
	var parts []string
	if r.Watermark {
		parts = append(parts, "watermark")
	}
	if r.Backfill {
		parts = append(parts, "backfill cursor")
	}
	if r.Quarantined > 0 {
		parts = append(parts, fmt.Sprintf("%d quarantined", r.Quarantined))
	}
	if r.DeadLetters > 0 {
		parts = append(parts, fmt.Sprintf("%d dead letters resolved as %s", r.DeadLetters, keys.ResolvedRetired))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

func retireKey(sub string) map[string]av {
	return map[string]av{keys.AttrPK: s(keys.StateSubRetirePK), keys.AttrSK: s(sub)}
}

// Undeclared lists the subscriptions recorded undeclared: one Query.
func (d *DynamoStore) Undeclared(ctx context.Context) (map[string]Undeclared, error) {
	out := map[string]Undeclared{}
	err := d.queryAll(ctx, keys.StateSubRetirePK, "", func(it map[string]av) {
		u := Undeclared{Subscription: str(it, keys.AttrSK), Since: when(it, keys.AttrUndeclaredSince), RetiredAt: when(it, keys.AttrRetiredAt)}
		out[u.Subscription] = u
	})
	if err != nil {
		return nil, fmt.Errorf("read the undeclared subscriptions: %w", err)
	}
	return out, nil
}

// MarkUndeclared records that sub is not declared, at now unless it was
// already recorded (then the first time stands), and returns the row.
func (d *DynamoStore) MarkUndeclared(ctx context.Context, sub string, now time.Time) (Undeclared, error) {
	out, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(d.table), Key: retireKey(sub),
		UpdateExpression:          aws.String("SET #sub = :sub, #since = if_not_exists(#since, :now)"),
		ExpressionAttributeNames:  map[string]string{"#sub": keys.AttrSubscription, "#since": keys.AttrUndeclaredSince},
		ExpressionAttributeValues: map[string]av{":sub": s(sub), ":now": ts(now)},
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		return Undeclared{}, fmt.Errorf("record subscription %s undeclared: %w", sub, err)
	}
	return Undeclared{Subscription: sub, Since: when(out.Attributes, keys.AttrUndeclaredSince), RetiredAt: when(out.Attributes, keys.AttrRetiredAt)}, nil
}

// Redeclared deletes sub's undeclared row: it is declared again (a
// rollback), and a later removal starts a new grace period.
func (d *DynamoStore) Redeclared(ctx context.Context, sub string) error {
	if _, err := d.deleteItem(ctx, retireKey(sub)); err != nil {
		return fmt.Errorf("forget that subscription %s was undeclared: %w", sub, err)
	}
	return nil
}

// RetireTenant removes tenant's state of sub: its watermark, backfill
// cursor and quarantine rows are deleted, and its open dead letters (at
// most limit of them; done is false when more remain) are resolved into
// the history as keys.ResolvedRetired, each in one transaction with its
// deletion. Idempotent: what is already gone is skipped.
func (d *DynamoStore) RetireTenant(ctx context.Context, tenant, sub string, now time.Time, limit int) (r Retired, done bool, err error) {
	del := func(key map[string]av) (bool, error) { return d.deleteItem(ctx, key) }
	what := fmt.Sprintf("retire subscription %s of tenant %s", sub, tenant)
	if r.Watermark, err = del(map[string]av{keys.AttrPK: s(keys.StateWatermarkPrefix + tenant), keys.AttrSK: s(sub)}); err != nil {
		return r, false, fmt.Errorf("%s: delete its watermark: %w", what, err)
	}
	if r.Backfill, err = del(backfillKey(tenant, sub)); err != nil {
		return r, false, fmt.Errorf("%s: delete its backfill cursor: %w", what, err)
	}
	q, err := d.QuarantineList(ctx, tenant, sub)
	if err != nil {
		return r, false, fmt.Errorf("%s: %w", what, err)
	}
	for id := range q {
		if _, err := del(quarantineKey(tenant, sub, id)); err != nil {
			return r, false, fmt.Errorf("%s: delete the quarantine of %s: %w", what, id, err)
		}
		r.Quarantined++
	}
	cursor := ""
	for {
		dls, next, err := d.DeadLetters(ctx, tenant, cursor, 100)
		if err != nil {
			return r, false, fmt.Errorf("%s: %w", what, err)
		}
		for _, dl := range dls {
			if dl.Subscription != sub {
				continue
			}
			if r.DeadLetters >= limit {
				return r, false, nil
			}
			err := d.transact(ctx,
				types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(d.table), Key: deadKey(tenant, dl.Key()),
					ConditionExpression: aws.String("attribute_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": keys.AttrPK}}},
				types.TransactWriteItem{Put: &types.Put{TableName: aws.String(d.table), Item: resolvedItem(dl, d.resolver(), keys.ResolvedRetired, now)}})
			if err != nil {
				return r, false, fmt.Errorf("%s: resolve the dead letter of %s: %w", what, dl.EventID, err)
			}
			r.DeadLetters++
		}
		if next == "" {
			return r, true, nil
		}
		cursor = next
	}
}

// RetireStart deletes sub's start row and records the subscription retired
// (every tenant's state removed). A subscription declared again later
// starts anew: from when it then goes live.
func (d *DynamoStore) RetireStart(ctx context.Context, sub string, now time.Time) error {
	if _, err := d.deleteItem(ctx, subStartKey(sub)); err != nil {
		return fmt.Errorf("retire subscription %s: delete its start: %w", sub, err)
	}
	_, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(d.table), Key: retireKey(sub),
		UpdateExpression:          aws.String("SET #at = :now"),
		ConditionExpression:       aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames:  map[string]string{"#at": keys.AttrRetiredAt, "#pk": keys.AttrPK},
		ExpressionAttributeValues: map[string]av{":now": ts(now)},
	})
	if err != nil {
		return fmt.Errorf("retire subscription %s: record it retired: %w", sub, err)
	}
	return nil
}

// deleteItem deletes the item at key if it exists, and says whether it did.
func (d *DynamoStore) deleteItem(ctx context.Context, key map[string]av) (bool, error) {
	out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		return false, err
	}
	return true, d.transact(ctx, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(d.table), Key: key}})
}
