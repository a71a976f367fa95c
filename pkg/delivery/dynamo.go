package delivery

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// DynamoDB is the part of the DynamoDB API DynamoStore uses.
type DynamoDB interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// DynamoStore keeps claims and dead letters in the state table (layout in
// pkg/keys: claim#<event_id>:<subscription> / claim, and dead#<tenant> /
// <event_id>:<subscription>).
type DynamoStore struct {
	db    DynamoDB
	table string
	log   string // the events table, when WithLog set it
}

var _ Store = (*DynamoStore)(nil)

// NewDynamoStore returns a Store on the state table named table.
func NewDynamoStore(db DynamoDB, table string) *DynamoStore {
	return &DynamoStore{db: db, table: table}
}

type av = types.AttributeValue

func s(v string) av     { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) av      { return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)} }
func ms(t time.Time) av { return n(t.UnixMilli()) }
func ts(t time.Time) av { return s(t.UTC().Format(time.RFC3339Nano)) }

func claimKey(k Key) map[string]av {
	return map[string]av{keys.AttrPK: s(keys.StateClaimPrefix + k.String()), keys.AttrSK: s(keys.StateClaimSK)}
}

func deadKey(tenant string, k Key) map[string]av {
	return map[string]av{keys.AttrPK: s(keys.StateDeadPrefix + tenant), keys.AttrSK: s(k.String())}
}

// claimNames are the attribute names every claim expression uses.
var claimNames = map[string]string{
	"#pk": keys.AttrPK, "#st": keys.AttrStatus, "#lu": keys.AttrLeaseUntil, "#lt": keys.AttrLeaseToken,
	"#att": keys.AttrAttempts, "#tn": keys.AttrTenant, "#id": keys.AttrID, "#sub": keys.AttrSubscription,
	"#ty": keys.AttrType, "#seq": keys.AttrSeq, "#sv": keys.AttrSchemaVersion, "#exp": keys.AttrExpiresAt, "#up": keys.AttrUpdatedAt,
}

func (d *DynamoStore) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	return d.claim(ctx, req, "attribute_not_exists(#pk) OR (#st = :pending AND #lu < :now)", nil)
}

func (d *DynamoStore) ClaimDead(ctx context.Context, req ClaimRequest) (Claim, error) {
	c, err := d.claim(ctx, req, "attribute_exists(#pk) AND (#st = :dead OR (#st = :pending AND #lu < :now))", map[string]av{":dead": s(keys.ClaimDead)})
	if err == nil && !c.Acquired && c.Status == "" {
		return c, fmt.Errorf("replay %s: %w", req.Key, ErrNotDead)
	}
	return c, err
}

// claim takes the claim when cond holds, in one UpdateItem; on a failed
// condition DynamoDB returns the item as it was, so telling completed, dead
// and held apart costs no extra read.
func (d *DynamoStore) claim(ctx context.Context, req ClaimRequest, cond string, extra map[string]av) (Claim, error) {
	values := map[string]av{
		":pending": s(keys.ClaimPending), ":now": ms(req.Now), ":lu": ms(req.LeaseUntil), ":tok": s(req.Token),
		":zero": n(0), ":one": n(1), ":tn": s(req.Tenant), ":id": s(req.EventID), ":sub": s(req.Subscription),
		":ty": s(req.Type), ":seq": n(req.Seq), ":sv": n(int64(req.SchemaVersion)), ":exp": n(req.ExpiresAt.Unix()), ":up": ts(req.Now),
	}
	for k, v := range extra {
		values[k] = v
	}
	out, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(d.table),
		Key:       claimKey(req.Key),
		UpdateExpression: aws.String("SET #st = :pending, #lu = :lu, #lt = :tok, #att = if_not_exists(#att, :zero) + :one, " +
			"#tn = :tn, #id = :id, #sub = :sub, #ty = :ty, #seq = :seq, #sv = :sv, #exp = :exp, #up = :up"),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            claimNames,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		if ccf.Item == nil {
			return Claim{}, nil // absent (only ClaimDead's condition fails on an absent claim)
		}
		r := decodeClaim(ccf.Item)
		return Claim{Status: r.Status, LeaseUntil: r.LeaseUntil, Attempts: r.Attempts}, nil
	case err != nil:
		return Claim{}, fmt.Errorf("claim %s: %w", req.Key, err)
	}
	old := decodeClaim(out.Attributes) // zero when the claim was absent
	return Claim{Acquired: true, TakenOver: old.Status == StatusPending, Status: StatusPending, LeaseUntil: req.LeaseUntil, Attempts: old.Attempts + 1}, nil
}

func (d *DynamoStore) Complete(ctx context.Context, k Key, token string, now, expiresAt time.Time) error {
	_, err := d.db.UpdateItem(ctx, d.completeUpdate(k, token, now, expiresAt).toInput())
	return leaseErr(err, "complete "+k.String())
}

type update struct {
	table, expr, cond string
	key               map[string]av
	names             map[string]string
	values            map[string]av
}

func (u update) condition() *string {
	if u.cond == "" {
		return nil
	}
	return aws.String(u.cond)
}

func (u update) toInput() *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{TableName: aws.String(u.table), Key: u.key, UpdateExpression: aws.String(u.expr),
		ConditionExpression: u.condition(), ExpressionAttributeNames: u.names, ExpressionAttributeValues: u.values}
}

func (u update) toTransact() types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{TableName: aws.String(u.table), Key: u.key, UpdateExpression: aws.String(u.expr),
		ConditionExpression: u.condition(), ExpressionAttributeNames: u.names, ExpressionAttributeValues: u.values}}
}

func (d *DynamoStore) completeUpdate(k Key, token string, now, expiresAt time.Time) update {
	return update{
		table: d.table, key: claimKey(k),
		expr:  "SET #st = :completed, #exp = :exp, #up = :up REMOVE #lt",
		cond:  "#st = :pending AND #lt = :tok",
		names: map[string]string{"#st": keys.AttrStatus, "#lt": keys.AttrLeaseToken, "#exp": keys.AttrExpiresAt, "#up": keys.AttrUpdatedAt},
		values: map[string]av{":completed": s(keys.ClaimCompleted), ":pending": s(keys.ClaimPending), ":tok": s(token),
			":exp": n(expiresAt.Unix()), ":up": ts(now)},
	}
}

func (d *DynamoStore) Kill(ctx context.Context, k Key, token string, dl DeadLetter, replay bool) error {
	inc := int64(0)
	if replay {
		inc = 1
	}
	claim := update{
		table: d.table, key: claimKey(k),
		expr:  "SET #st = :dead, #err = :err, #up = :up REMOVE #lt, #exp",
		cond:  "#st = :pending AND #lt = :tok",
		names: map[string]string{"#st": keys.AttrStatus, "#lt": keys.AttrLeaseToken, "#exp": keys.AttrExpiresAt, "#up": keys.AttrUpdatedAt, "#err": keys.AttrError},
		values: map[string]av{":dead": s(keys.ClaimDead), ":pending": s(keys.ClaimPending), ":tok": s(token),
			":err": s(dl.Error), ":up": ts(dl.DeadAt)},
	}
	letter := update{
		table: d.table, key: deadKey(dl.Tenant, k),
		expr: "SET #tn = :tn, #id = :id, #sub = :sub, #ty = :ty, #seq = :seq, #sv = :sv, #err = :err, #att = :att, " +
			"#da = :da, #rp = if_not_exists(#rp, :zero) + :inc",
		names: map[string]string{"#tn": keys.AttrTenant, "#id": keys.AttrID, "#sub": keys.AttrSubscription, "#ty": keys.AttrType,
			"#seq": keys.AttrSeq, "#sv": keys.AttrSchemaVersion, "#err": keys.AttrError, "#att": keys.AttrAttempts, "#da": keys.AttrDeadAt, "#rp": keys.AttrReplays},
		values: map[string]av{":tn": s(dl.Tenant), ":id": s(dl.EventID), ":sub": s(dl.Subscription), ":ty": s(dl.Type),
			":seq": n(dl.Seq), ":sv": n(int64(dl.SchemaVersion)), ":err": s(dl.Error), ":att": n(int64(dl.Attempts)),
			":da": ts(dl.DeadAt), ":zero": n(0), ":inc": n(inc)},
	}
	_, err := d.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{claim.toTransact(), letter.toTransact()},
	})
	return leaseErr(err, "dead-letter "+k.String())
}

func (d *DynamoStore) Resolve(ctx context.Context, k Key, tenant, token string, now, expiresAt time.Time) error {
	_, err := d.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{
			d.completeUpdate(k, token, now, expiresAt).toTransact(),
			{Delete: &types.Delete{TableName: aws.String(d.table), Key: deadKey(tenant, k)}},
		},
	})
	return leaseErr(err, "resolve "+k.String())
}

// leaseErr maps a failed claim condition to ErrLeaseLost. In a transaction
// the claim is always the first action.
func leaseErr(err error, op string) error {
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("%s: %w", op, ErrLeaseLost)
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
		return fmt.Errorf("%s: %w", op, ErrLeaseLost)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func (d *DynamoStore) Get(ctx context.Context, k Key) (ClaimRecord, bool, error) {
	out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: claimKey(k), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return ClaimRecord{}, false, fmt.Errorf("read claim %s: %w", k, err)
	}
	if out.Item == nil {
		return ClaimRecord{}, false, nil
	}
	r := decodeClaim(out.Item)
	r.Key = k
	return r, true, nil
}

func (d *DynamoStore) DeadLetters(ctx context.Context, tenant, cursor string, limit int32) ([]DeadLetter, string, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(d.table),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": keys.AttrPK},
		ExpressionAttributeValues: map[string]av{":pk": s(keys.StateDeadPrefix + tenant)},
	}
	if limit > 0 {
		in.Limit = aws.Int32(limit)
	}
	if cursor != "" {
		in.ExclusiveStartKey = map[string]av{keys.AttrPK: s(keys.StateDeadPrefix + tenant), keys.AttrSK: s(cursor)}
	}
	out, err := d.db.Query(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("list dead letters of tenant %q: %w", tenant, err)
	}
	var dls []DeadLetter
	for _, it := range out.Items {
		dls = append(dls, decodeDead(it))
	}
	next := ""
	if sk, ok := out.LastEvaluatedKey[keys.AttrSK].(*types.AttributeValueMemberS); ok {
		next = sk.Value
	}
	return dls, next, nil
}

func (d *DynamoStore) CountDeadLetters(ctx context.Context, tenant string) (int, error) {
	total := 0
	var start map[string]av
	for {
		out, err := d.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(d.table),
			ConsistentRead:            aws.Bool(true),
			KeyConditionExpression:    aws.String("#pk = :pk"),
			ExpressionAttributeNames:  map[string]string{"#pk": keys.AttrPK},
			ExpressionAttributeValues: map[string]av{":pk": s(keys.StateDeadPrefix + tenant)},
			Select:                    types.SelectCount,
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return 0, fmt.Errorf("count dead letters of tenant %q: %w", tenant, err)
		}
		total += int(out.Count)
		if out.LastEvaluatedKey == nil {
			return total, nil
		}
		start = out.LastEvaluatedKey
	}
}

func str(it map[string]av, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func num(it map[string]av, name string) int64 {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		x, _ := strconv.ParseInt(v.Value, 10, 64)
		return x
	}
	return 0
}

func when(it map[string]av, name string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, str(it, name))
	return t
}

func decodeClaim(it map[string]av) ClaimRecord {
	r := ClaimRecord{
		Key:      Key{EventID: str(it, keys.AttrID), Subscription: str(it, keys.AttrSubscription)},
		Tenant:   str(it, keys.AttrTenant),
		Status:   Status(str(it, keys.AttrStatus)),
		Attempts: int(num(it, keys.AttrAttempts)),
		Error:    str(it, keys.AttrError),
	}
	if lu := num(it, keys.AttrLeaseUntil); lu > 0 {
		r.LeaseUntil = time.UnixMilli(lu)
	}
	if exp := num(it, keys.AttrExpiresAt); exp > 0 {
		r.ExpiresAt = time.Unix(exp, 0)
	}
	return r
}

func decodeDead(it map[string]av) DeadLetter {
	d := DeadLetter{
		Tenant:        str(it, keys.AttrTenant),
		EventID:       str(it, keys.AttrID),
		Subscription:  str(it, keys.AttrSubscription),
		Type:          str(it, keys.AttrType),
		Seq:           num(it, keys.AttrSeq),
		SchemaVersion: int(num(it, keys.AttrSchemaVersion)),
		Error:         str(it, keys.AttrError),
		Attempts:      int(num(it, keys.AttrAttempts)),
		Replays:       int(num(it, keys.AttrReplays)),
		DeadAt:        when(it, keys.AttrDeadAt),
	}
	if d.EventID == "" { // fall back on the sort key
		d.EventID, d.Subscription, _ = strings.Cut(str(it, keys.AttrSK), ":")
	}
	return d
}

// StateTableSchema is the state table as infra/ deploys it (pk, sk strings):
// claims, dead letters, sent logs, parked projections and reconcile
// checkpoints live there. For tests and local runs that create the table
// themselves.
func StateTableSchema(name string) *dynamodb.CreateTableInput {
	return keys.PKSKTable(name)
}
