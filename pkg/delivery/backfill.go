package delivery

// Backfill cursors and the quarantine list (layout in pkg/keys). A backfill
// (pkg/repair) delivers a subscription's history before its start, one
// tenant at a time, saving its position here so that a later run resumes
// where this one stopped; the quarantine names events set aside for one
// subscription, which a backfill passes over.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Backfill is the saved cursor of one (tenant, subscription) backfill.
type Backfill struct {
	Tenant       string
	Subscription string
	From, To     int64 // the range of seqs it delivers
	Position     int64 // the last seq done (From-1 before the first)
	Delivered    int   // events it ran the handler for
	Skipped      int   // quarantined events it passed over
	Status       string
	UpdatedAt    time.Time
}

// Done reports whether the backfill reached its end.
func (b Backfill) Done() bool { return b.Status == keys.BackfillDone }

// Quarantined is an event set aside for one subscription.
type Quarantined struct {
	Tenant       string
	Subscription string
	EventID      string
	Seq          int64
	Reason       string
	At           time.Time
}

// BackfillStore keeps backfill cursors and the quarantine list.
type BackfillStore interface {
	// SaveBackfill writes b unless the saved cursor is further along
	// (another run moved it): ErrBackfillMoved.
	SaveBackfill(ctx context.Context, b Backfill) error
	// Backfills returns a tenant's backfill cursors by subscription.
	Backfills(ctx context.Context, tenant string) (map[string]Backfill, error)
	// Quarantine sets an event aside for a subscription.
	Quarantine(ctx context.Context, q Quarantined) error
	// QuarantineList returns the events set aside for (tenant, sub), by
	// event id.
	QuarantineList(ctx context.Context, tenant, sub string) (map[string]Quarantined, error)
}

// ErrBackfillMoved: another run saved the backfill further along.
var ErrBackfillMoved = errors.New("the backfill's saved position is further along: another run is moving it")

func backfillKey(tenant, sub string) map[string]av {
	return map[string]av{keys.AttrPK: s(keys.StateBackfillPrefix + tenant), keys.AttrSK: s(sub)}
}

// SaveBackfill is one conditional UpdateItem.
func (d *DynamoStore) SaveBackfill(ctx context.Context, b Backfill) error {
	_, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(d.table),
		Key:              backfillKey(b.Tenant, b.Subscription),
		UpdateExpression: aws.String("SET #tn = :tn, #sub = :sub, #from = :from, #to = :to, #seq = :seq, #dl = :dl, #sk = :sk, #st = :st, #up = :up"),
		// A new range (other From or To) starts over; the same range only moves forward.
		ConditionExpression: aws.String("attribute_not_exists(#seq) OR #from <> :from OR #to <> :to OR #seq <= :seq"),
		ExpressionAttributeNames: map[string]string{"#tn": keys.AttrTenant, "#sub": keys.AttrSubscription, "#from": keys.AttrFromSeq, "#to": keys.AttrToSeq,
			"#seq": keys.AttrSeq, "#dl": keys.AttrDelivered, "#sk": keys.AttrSkipped, "#st": keys.AttrStatus, "#up": keys.AttrUpdatedAt},
		ExpressionAttributeValues: map[string]av{":tn": s(b.Tenant), ":sub": s(b.Subscription), ":from": n(b.From), ":to": n(b.To), ":seq": n(b.Position),
			":dl": n(int64(b.Delivered)), ":sk": n(int64(b.Skipped)), ":st": s(b.Status), ":up": ts(b.UpdatedAt)},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return fmt.Errorf("save the backfill of %s/%s at %d: %w", b.Tenant, b.Subscription, b.Position, ErrBackfillMoved)
	case err != nil:
		return fmt.Errorf("save the backfill of %s/%s at %d: %w", b.Tenant, b.Subscription, b.Position, err)
	}
	return nil
}

// Backfills is one consistent Query.
func (d *DynamoStore) Backfills(ctx context.Context, tenant string) (map[string]Backfill, error) {
	out := map[string]Backfill{}
	err := d.queryAll(ctx, keys.StateBackfillPrefix+tenant, "", func(it map[string]av) {
		b := Backfill{Tenant: tenant, Subscription: str(it, keys.AttrSK), From: num(it, keys.AttrFromSeq), To: num(it, keys.AttrToSeq),
			Position: num(it, keys.AttrSeq), Delivered: int(num(it, keys.AttrDelivered)), Skipped: int(num(it, keys.AttrSkipped)),
			Status: str(it, keys.AttrStatus), UpdatedAt: when(it, keys.AttrUpdatedAt)}
		out[b.Subscription] = b
	})
	if err != nil {
		return nil, fmt.Errorf("read the backfills of tenant %q: %w", tenant, err)
	}
	return out, nil
}

func quarantineKey(tenant, sub, eventID string) map[string]av {
	return map[string]av{keys.AttrPK: s(keys.StateQuarantinePrefix + tenant), keys.AttrSK: s(sub + "#" + eventID)}
}

// Quarantine is one UpdateItem.
func (d *DynamoStore) Quarantine(ctx context.Context, q Quarantined) error {
	_, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(d.table),
		Key:              quarantineKey(q.Tenant, q.Subscription, q.EventID),
		UpdateExpression: aws.String("SET #tn = :tn, #sub = :sub, #id = :id, #seq = :seq, #why = :why, #up = :up"),
		ExpressionAttributeNames: map[string]string{"#tn": keys.AttrTenant, "#sub": keys.AttrSubscription, "#id": keys.AttrID, "#seq": keys.AttrSeq,
			"#why": keys.AttrReason, "#up": keys.AttrUpdatedAt},
		ExpressionAttributeValues: map[string]av{":tn": s(q.Tenant), ":sub": s(q.Subscription), ":id": s(q.EventID), ":seq": n(q.Seq),
			":why": s(q.Reason), ":up": ts(q.At)},
	})
	if err != nil {
		return fmt.Errorf("quarantine %s of tenant %s for %s: %w", q.EventID, q.Tenant, q.Subscription, err)
	}
	return nil
}

// QuarantineList is one consistent Query of the subscription's prefix.
func (d *DynamoStore) QuarantineList(ctx context.Context, tenant, sub string) (map[string]Quarantined, error) {
	out := map[string]Quarantined{}
	err := d.queryAll(ctx, keys.StateQuarantinePrefix+tenant, sub+"#", func(it map[string]av) {
		q := Quarantined{Tenant: tenant, Subscription: sub, EventID: str(it, keys.AttrID), Seq: num(it, keys.AttrSeq),
			Reason: str(it, keys.AttrReason), At: when(it, keys.AttrUpdatedAt)}
		out[q.EventID] = q
	})
	if err != nil {
		return nil, fmt.Errorf("read the quarantine of tenant %q for %s: %w", tenant, sub, err)
	}
	return out, nil
}

// queryAll reads every item of partition pk (whose sort key begins with
// prefix, when set), consistently, page by page.
func (d *DynamoStore) queryAll(ctx context.Context, pk, prefix string, each func(map[string]av)) error {
	cond := "#pk = :pk"
	names := map[string]string{"#pk": keys.AttrPK}
	values := map[string]av{":pk": s(pk)}
	if prefix != "" {
		cond += " AND begins_with(#sk, :pre)"
		names["#sk"] = keys.AttrSK
		values[":pre"] = s(prefix)
	}
	var start map[string]av
	for {
		res, err := d.db.Query(ctx, &dynamodb.QueryInput{
			TableName: aws.String(d.table), ConsistentRead: aws.Bool(true), KeyConditionExpression: aws.String(cond),
			ExpressionAttributeNames: names, ExpressionAttributeValues: values, ExclusiveStartKey: start,
		})
		if err != nil {
			return err
		}
		for _, it := range res.Items {
			each(it)
		}
		if len(res.LastEvaluatedKey) == 0 {
			return nil
		}
		start = res.LastEvaluatedKey
	}
}

// SaveBackfill is the fake's SaveBackfill.
func (m *MemoryStore) SaveBackfill(_ context.Context, b Backfill) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.backfills == nil {
		m.backfills = map[[2]string]Backfill{}
	}
	k := [2]string{b.Tenant, b.Subscription}
	if old, ok := m.backfills[k]; ok && old.From == b.From && old.To == b.To && old.Position > b.Position {
		return fmt.Errorf("save the backfill of %s/%s at %d: %w", b.Tenant, b.Subscription, b.Position, ErrBackfillMoved)
	}
	m.backfills[k] = b
	return nil
}

// Backfills is the fake's Backfills.
func (m *MemoryStore) Backfills(_ context.Context, tenant string) (map[string]Backfill, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]Backfill{}
	for k, b := range m.backfills {
		if k[0] == tenant {
			out[k[1]] = b
		}
	}
	return out, nil
}

// Quarantine is the fake's Quarantine.
func (m *MemoryStore) Quarantine(_ context.Context, q Quarantined) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.quarantine == nil {
		m.quarantine = map[[3]string]Quarantined{}
	}
	m.quarantine[[3]string{q.Tenant, q.Subscription, q.EventID}] = q
	return nil
}

// QuarantineList is the fake's QuarantineList.
func (m *MemoryStore) QuarantineList(_ context.Context, tenant, sub string) (map[string]Quarantined, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]Quarantined{}
	for k, q := range m.quarantine {
		if k[0] == tenant && k[1] == sub {
			out[k[2]] = q
		}
	}
	return out, nil
}

var (
	_ BackfillStore = (*DynamoStore)(nil)
	_ BackfillStore = (*MemoryStore)(nil)
)

// Cursors: the saved position of a long read that may span runs (a table
// scan of dlq-repair's table fallback), in the state table.
//
//	cursor   pk cursor#<name>   sk "cursor"
//
// Attributes: AttrSeq unused; "key" (M: the ExclusiveStartKey to go on
// from; absent when cleared), AttrUpdatedAt, AttrExpiresAt (a week: a read
// nobody resumes is forgotten, and starts over).
const cursorKeyAttr = "key"

func cursorKey(name string) map[string]av {
	return map[string]av{keys.AttrPK: s("cursor#" + name), keys.AttrSK: s("cursor")}
}

// SaveCursor saves where the read called name goes on from; a nil key
// clears it (the read finished).
func (d *DynamoStore) SaveCursor(ctx context.Context, name string, key map[string]av, now time.Time) error {
	in := &dynamodb.UpdateItemInput{TableName: aws.String(d.table), Key: cursorKey(name),
		UpdateExpression:          aws.String("SET #up = :up, #exp = :exp REMOVE #k"),
		ExpressionAttributeNames:  map[string]string{"#up": keys.AttrUpdatedAt, "#exp": keys.AttrExpiresAt, "#k": cursorKeyAttr},
		ExpressionAttributeValues: map[string]av{":up": ts(now), ":exp": n(now.Add(7 * 24 * time.Hour).Unix())}}
	if key != nil {
		in.UpdateExpression = aws.String("SET #up = :up, #exp = :exp, #k = :k")
		in.ExpressionAttributeValues[":k"] = &types.AttributeValueMemberM{Value: key}
	}
	if _, err := d.db.UpdateItem(ctx, in); err != nil {
		return fmt.Errorf("save the cursor of %s: %w", name, err)
	}
	return nil
}

// Cursor reads where the read called name goes on from (nil: from the
// start).
func (d *DynamoStore) Cursor(ctx context.Context, name string) (map[string]av, error) {
	out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: cursorKey(name), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read the cursor of %s: %w", name, err)
	}
	if m, ok := out.Item[cursorKeyAttr].(*types.AttributeValueMemberM); ok && len(m.Value) > 0 {
		return m.Value, nil
	}
	return nil, nil
}

// IndexDeadLetter puts the dead letter at (tenant, sk) into the
// dead-letter index (a dead letter written before the index existed); an
// absent one is left absent.
func (d *DynamoStore) IndexDeadLetter(ctx context.Context, tenant, sk string) error {
	_, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(d.table),
		Key:                       map[string]av{keys.AttrPK: s(keys.StateDeadPrefix + tenant), keys.AttrSK: s(sk)},
		UpdateExpression:          aws.String("SET #ix = :ix, #tn = :tn"),
		ConditionExpression:       aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames:  map[string]string{"#ix": keys.AttrDeadIndex, "#tn": keys.AttrTenant, "#pk": keys.AttrPK},
		ExpressionAttributeValues: map[string]av{":ix": s(keys.DeadIndexValue), ":tn": s(tenant)},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("index the dead letter %s of tenant %s: %w", sk, tenant, err)
	}
	return nil
}
