package effect

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// DynamoDB is the part of the DynamoDB API DynamoStore uses.
type DynamoDB interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// DynamoStore keeps effect records in the state table (layout in pkg/keys,
// "effect records").
type DynamoStore struct {
	db    DynamoDB
	table string
}

var _ Store = (*DynamoStore)(nil)

// NewDynamoStore returns a Store on the state table named table.
func NewDynamoStore(db DynamoDB, table string) *DynamoStore {
	return &DynamoStore{db: db, table: table}
}

type av = types.AttributeValue

func str(v string) av      { return &types.AttributeValueMemberS{Value: v} }
func num(v int64) av       { return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)} }
func stamp(t time.Time) av { return str(t.UTC().Format(time.RFC3339Nano)) }

func (d *DynamoStore) key(k Key) map[string]av {
	return map[string]av{keys.AttrPK: str(keys.StateEffectPrefix + k.String()), keys.AttrSK: str(keys.StateEffectSK)}
}

// Names and values every expression below draws from.
var names = map[string]string{
	"#pk": keys.AttrPK, "#st": keys.AttrStatus, "#tok": keys.AttrLeaseToken, "#ten": keys.AttrTenant, "#seq": keys.AttrSeq,
	"#id": keys.AttrID, "#sub": keys.AttrSubscription, "#eff": keys.AttrEffect, "#n": keys.AttrAttempts,
	"#at": keys.AttrUpdatedAt, "#exp": keys.AttrExpiresAt,
}

func pick(all map[string]string, ks ...string) map[string]string {
	out := make(map[string]string, len(ks))
	for _, k := range ks {
		out[k] = all[k]
	}
	return out
}

// Start implements Store: one UpdateItem, conditioned on the record's
// state, answering the record as it was before (ALL_OLD) whether it wrote
// or not.
func (d *DynamoStore) Start(ctx context.Context, r Record, takeover bool) (Record, bool, error) {
	cond := "attribute_not_exists(#pk) OR #st = :redo OR (#st = :started AND #tok = :tok)"
	if takeover {
		cond = "attribute_not_exists(#pk) OR #st = :redo OR #st = :started"
	}
	out, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(d.table),
		Key:       d.key(r.Key),
		UpdateExpression: aws.String("SET #st = :started, #tok = :tok, #ten = :ten, #seq = :seq, #id = :id, #sub = :sub, #eff = :eff, " +
			"#n = if_not_exists(#n, :zero) + :one, #at = :at, #exp = :exp"),
		ConditionExpression:      aws.String(cond),
		ExpressionAttributeNames: pick(names, "#pk", "#st", "#tok", "#ten", "#seq", "#id", "#sub", "#eff", "#n", "#at", "#exp"),
		ExpressionAttributeValues: map[string]av{
			":started": str(string(StatusStarted)), ":redo": str(string(StatusRedo)), ":tok": str(r.Token),
			":ten": str(r.Tenant), ":seq": num(r.Seq), ":id": str(r.EventID), ":sub": str(r.Subscription), ":eff": str(r.Name),
			":zero": num(0), ":one": num(1), ":at": stamp(r.UpdatedAt), ":exp": num(r.ExpiresAt.Unix()),
		},
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		rec, err := decode(r.Key, ccf.Item)
		return rec, false, err
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("start effect %s: %w", r.Key, err)
	}
	prev, err := decode(r.Key, out.Attributes)
	return prev, true, err
}

// Done implements Store. Done again under the same token is allowed, so a
// resent request whose first attempt committed succeeds.
func (d *DynamoStore) Done(ctx context.Context, k Key, token string, now, expiresAt time.Time) error {
	_, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(d.table),
		Key:                      d.key(k),
		UpdateExpression:         aws.String("SET #st = :done, #at = :at, #exp = :exp"),
		ConditionExpression:      aws.String("#tok = :tok AND (#st = :started OR #st = :done)"),
		ExpressionAttributeNames: pick(names, "#st", "#tok", "#at", "#exp"),
		ExpressionAttributeValues: map[string]av{":done": str(string(StatusDone)), ":started": str(string(StatusStarted)),
			":tok": str(token), ":at": stamp(now), ":exp": num(expiresAt.Unix())},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("effect %s done: %w", k, ErrNotHeld)
	}
	if err != nil {
		return fmt.Errorf("record effect %s done: %w", k, err)
	}
	return nil
}

// Release implements Store. A refused delete means the record is not this
// token's started one (gone already, when a resend follows a delete that
// committed): nothing to release.
func (d *DynamoStore) Release(ctx context.Context, k Key, token string) error {
	_, err := d.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(d.table),
		Key:                       d.key(k),
		ConditionExpression:       aws.String("#tok = :tok AND #st = :started"),
		ExpressionAttributeNames:  pick(names, "#st", "#tok"),
		ExpressionAttributeValues: map[string]av{":started": str(string(StatusStarted)), ":tok": str(token)},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("release effect %s: %w", k, err)
	}
	return nil
}

// MarkUnknown implements Store.
func (d *DynamoStore) MarkUnknown(ctx context.Context, k Key, token string, now time.Time) error {
	_, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(d.table),
		Key:                      d.key(k),
		UpdateExpression:         aws.String("SET #st = :unknown, #at = :at REMOVE #exp"),
		ConditionExpression:      aws.String("#tok = :tok AND (#st = :started OR #st = :unknown)"),
		ExpressionAttributeNames: pick(names, "#st", "#tok", "#at", "#exp"),
		ExpressionAttributeValues: map[string]av{":unknown": str(string(StatusUnknown)), ":started": str(string(StatusStarted)),
			":tok": str(token), ":at": stamp(now)},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("effect %s unknown: %w", k, ErrNotHeld)
	}
	if err != nil {
		return fmt.Errorf("mark effect %s unknown: %w", k, err)
	}
	return nil
}

// Decide implements Store.
func (d *DynamoStore) Decide(ctx context.Context, k Key, to Status, now, expiresAt time.Time) (Record, error) {
	if err := checkDecision(k, to); err != nil {
		return Record{}, err
	}
	update, values := "SET #st = :to, #at = :at", map[string]av{":to": str(string(to)), ":unknown": str(string(StatusUnknown)), ":at": stamp(now)}
	nm := pick(names, "#st", "#at")
	if to == StatusDone {
		update += ", #exp = :exp"
		values[":exp"] = num(expiresAt.Unix())
		nm["#exp"] = keys.AttrExpiresAt
	}
	out, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(d.table),
		Key:                                 d.key(k),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String("#st = :unknown"),
		ExpressionAttributeNames:            nm,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		r, derr := decode(k, ccf.Item)
		if derr != nil {
			return r, derr
		}
		return r, notUnknown(k, r)
	}
	if err != nil {
		return Record{}, fmt.Errorf("decide effect %s: %w", k, err)
	}
	return decode(k, out.Attributes)
}

// Get implements Store.
func (d *DynamoStore) Get(ctx context.Context, k Key) (Record, bool, error) {
	out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: d.key(k), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Record{}, false, fmt.Errorf("read effect %s: %w", k, err)
	}
	r, err := decode(k, out.Item)
	return r, r.Found(), err
}

// decode reads a record item; an empty item is an absent record.
func decode(k Key, item map[string]av) (Record, error) {
	r := Record{Key: k}
	if len(item) == 0 {
		return r, nil
	}
	sv := func(name string) string {
		v, _ := item[name].(*types.AttributeValueMemberS)
		if v == nil {
			return ""
		}
		return v.Value
	}
	nv := func(name string) (int64, error) {
		v, ok := item[name].(*types.AttributeValueMemberN)
		if !ok {
			return 0, nil
		}
		return strconv.ParseInt(v.Value, 10, 64)
	}
	r.Status, r.Token, r.Tenant = Status(sv(keys.AttrStatus)), sv(keys.AttrLeaseToken), sv(keys.AttrTenant)
	var err error
	if r.Seq, err = nv(keys.AttrSeq); err != nil {
		return r, fmt.Errorf("effect %s: %s: %w", k, keys.AttrSeq, err)
	}
	n, err := nv(keys.AttrAttempts)
	if err != nil {
		return r, fmt.Errorf("effect %s: %s: %w", k, keys.AttrAttempts, err)
	}
	r.Attempts = int(n)
	if at := sv(keys.AttrUpdatedAt); at != "" {
		if r.UpdatedAt, err = time.Parse(time.RFC3339Nano, at); err != nil {
			return r, fmt.Errorf("effect %s: %s: %w", k, keys.AttrUpdatedAt, err)
		}
	}
	exp, err := nv(keys.AttrExpiresAt)
	if err != nil {
		return r, fmt.Errorf("effect %s: %s: %w", k, keys.AttrExpiresAt, err)
	}
	if exp > 0 {
		r.ExpiresAt = time.Unix(exp, 0)
	}
	if r.Status == "" {
		return r, fmt.Errorf("effect %s: record without %s", k, keys.AttrStatus)
	}
	return r, nil
}
