package eventstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// The idempotency row of an emit with EmitInput.IdempotencyKey lives in the
// tenant's partition of the events table, written in the emit's transaction
// with the condition "absent". Its sort key is negative (see idemSeq), so it
// can never be an event (seq >= 1) or the head (seq 0), and every read of the
// log (seq > after, seq = 0, kind = event) passes it by. Like every row of the
// log it is insert-only and never expires: a key holds for as long as the log.
//
// Cost, measured by TestIdempotencyKeyCost against twin/ddb with
// ReturnConsumedCapacity (transactional writes: 2 WCU per KB per item; a
// small order payload): a lone emit consumes 4.0 WCU (head + event) and 6.0
// WCU with a key (one more item under 1 KB): +50 %. Under group commit (16
// writers x 10, the head shared by each batch): 2.29 WCU per event without a
// key, 4.31 with: the key row is the one cost a batch does not share. A
// repeat with a used key is cancelled, writes nothing, and costs two strongly
// consistent reads (the key row, then the event) to answer with the first
// result.
const (
	kindIdem     = keys.KindIdempotency // keys.AttrKind of an idempotency row
	attrIdemKey  = "idempotency_key"    // S: the caller's key, verbatim
	attrEventID  = "event_id"           // S: the id of the event the key committed
	attrEventSeq = "event_seq"          // N: its seq
	maxIdemKey   = 512                  // bytes
	idemRowBytes = 160                  // the row without the key, generously
)

// ErrBadIdempotencyKey: the key is longer than 512 bytes.
var ErrBadIdempotencyKey = errors.New("idempotency key longer than 512 bytes")

func checkIdemKey(k string) error {
	if len(k) > maxIdemKey {
		return fmt.Errorf("%w (%d bytes)", ErrBadIdempotencyKey, len(k))
	}
	return nil
}

// idemSeq is the sort key of key's row: minus one minus 120 bits of a
// domain-separated SHA-256 of the key (at most 37 digits, inside DynamoDB's 38
// digits of precision). Two keys of one tenant sharing a row would need a
// 120-bit collision; idemEvent still compares the stored key and says so.
func idemSeq(key string) string {
	h := sha256.Sum256(append([]byte("fourlanes idempotency key v1\x00"), key...))
	n := new(big.Int).SetBytes(h[:15])
	n.Add(n, big.NewInt(1))
	return n.Neg(n).String()
}

func idemKey(tenant, key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		keys.AttrTenant: &types.AttributeValueMemberS{Value: tenant},
		keys.AttrSeq:    &types.AttributeValueMemberN{Value: idemSeq(key)},
	}
}

// idemPut claims key for the event e, in e's transaction.
func (s *Store) idemPut(tenant, key string, e envelope.Envelope) *types.Put {
	item := idemKey(tenant, key)
	item[keys.AttrKind] = &types.AttributeValueMemberS{Value: kindIdem}
	item[attrIdemKey] = &types.AttributeValueMemberS{Value: key}
	item[attrEventID] = &types.AttributeValueMemberS{Value: e.ID}
	item[attrEventSeq] = &types.AttributeValueMemberN{Value: strconv.FormatInt(e.Seq, 10)}
	return &types.Put{
		TableName:                aws.String(s.cfg.Table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#t)"),
		ExpressionAttributeNames: map[string]string{"#t": keys.AttrTenant},
	}
}

// idemEvent returns the event that key committed for tenant.
func (s *Store) idemEvent(ctx context.Context, tenant, key string) (envelope.Envelope, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.cfg.Table),
		ConsistentRead: aws.Bool(true),
		Key:            idemKey(tenant, key),
	})
	if err != nil {
		return envelope.Envelope{}, fmt.Errorf("read idempotency key %q of tenant %q: %w", key, tenant, err)
	}
	if out.Item == nil {
		return envelope.Envelope{}, fmt.Errorf("idempotency key %q of tenant %q: refused as used, but no row", key, tenant)
	}
	stored, _ := out.Item[attrIdemKey].(*types.AttributeValueMemberS)
	id, _ := out.Item[attrEventID].(*types.AttributeValueMemberS)
	n, _ := out.Item[attrEventSeq].(*types.AttributeValueMemberN)
	if stored == nil || id == nil || n == nil {
		return envelope.Envelope{}, fmt.Errorf("idempotency row of key %q, tenant %q: missing %s, %s or %s", key, tenant, attrIdemKey, attrEventID, attrEventSeq)
	}
	if stored.Value != key {
		return envelope.Envelope{}, fmt.Errorf("idempotency key %q of tenant %q shares its row with key %q (hash collision): choose another key", key, tenant, stored.Value)
	}
	seq, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return envelope.Envelope{}, fmt.Errorf("idempotency row of key %q, tenant %q: %s %q: %w", key, tenant, attrEventSeq, n.Value, err)
	}
	e, err := s.eventAt(ctx, tenant, seq)
	if err != nil {
		return envelope.Envelope{}, err
	}
	if e == nil || e.ID != id.Value {
		return envelope.Envelope{}, fmt.Errorf("idempotency key %q of tenant %q names event %s at seq %d, which the log does not hold: %w", key, tenant, id.Value, seq, ErrLogAhead)
	}
	return *e, nil
}

// eventAt reads the event row at seq (consistent read); nil when absent.
func (s *Store) eventAt(ctx context.Context, tenant string, seq int64) (*envelope.Envelope, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.cfg.Table),
		ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			keys.AttrTenant: &types.AttributeValueMemberS{Value: tenant},
			keys.AttrSeq:    &types.AttributeValueMemberN{Value: strconv.FormatInt(seq, 10)},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("read seq %d of tenant %q: %w", seq, tenant, err)
	}
	if out.Item == nil {
		return nil, nil
	}
	e, err := envelope.FromItem(out.Item)
	if err != nil {
		return nil, fmt.Errorf("seq %d of tenant %q: %w", seq, tenant, err)
	}
	return &e, nil
}
