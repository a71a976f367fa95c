package eventstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
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
// result, or with an *IdempotencyKeyMismatchError when its content differs.
// The digest of the extra writes the row keeps for that (about 50 bytes)
// leaves it under 1 KB: the same WCU as before it was kept.
const (
	kindIdem     = keys.KindIdempotency // keys.AttrKind of an idempotency row
	attrIdemKey  = "idempotency_key"    // S: the caller's key, verbatim
	attrEventID  = "event_id"           // S: the id of the event the key committed
	attrEventSeq = "event_seq"          // N: its seq
	// The emit's extra writes, compared when the key is used again (keys
	// recorded before these were kept have neither: see idemFirst).
	attrWrites       = "writes"        // N: how many
	attrWritesDigest = "writes_digest" // S: writesDigest of them
	maxIdemKey       = 512             // bytes
	idemRowBytes     = 224             // the row without the key, generously
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

// idemPut claims r's key for its event, in the event's transaction, with
// the digest of r's extra writes: a later emit with the key is compared
// with this one (idemFirst).
func (s *Store) idemPut(tenant string, r *request) *types.Put {
	item := idemKey(tenant, r.idemKey)
	item[keys.AttrKind] = &types.AttributeValueMemberS{Value: kindIdem}
	item[attrIdemKey] = &types.AttributeValueMemberS{Value: r.idemKey}
	item[attrEventID] = &types.AttributeValueMemberS{Value: r.env.ID}
	item[attrEventSeq] = &types.AttributeValueMemberN{Value: strconv.FormatInt(r.env.Seq, 10)}
	item[attrWrites] = &types.AttributeValueMemberN{Value: strconv.Itoa(len(r.extra))}
	item[attrWritesDigest] = &types.AttributeValueMemberS{Value: writesDigest(r.extra)}
	return &types.Put{
		TableName:                aws.String(s.cfg.Table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#t)"),
		ExpressionAttributeNames: map[string]string{"#t": keys.AttrTenant},
	}
}

// idemFirst answers an emit refused because its key was used: with the
// event the key committed, when that is this very emit (an earlier copy of
// its request committed it) or an earlier emit of the same content (type,
// schema version, payload and extra writes); otherwise with an
// *IdempotencyKeyMismatchError. Keys recorded before the row kept a digest
// of the extra writes are compared on type, version and payload only.
func (s *Store) idemFirst(ctx context.Context, tenant string, r *request) (envelope.Envelope, error) {
	first, row, err := s.idemEvent(ctx, tenant, r.idemKey)
	if err != nil || first.ID == r.env.ID {
		return first, err
	}
	var differs []string
	if first.Type != r.env.Type {
		differs = append(differs, fmt.Sprintf("type (first %s, now %s)", first.Type, r.env.Type))
	}
	if first.SchemaVersion != r.env.SchemaVersion {
		differs = append(differs, fmt.Sprintf("schema version (first %d, now %d)", first.SchemaVersion, r.env.SchemaVersion))
	}
	if at := payloadDiff("payload", first.Payload, r.env.Payload); at != "" {
		differs = append(differs, "payload (at "+at+")")
	}
	n, _ := row[attrWrites].(*types.AttributeValueMemberN)
	d, _ := row[attrWritesDigest].(*types.AttributeValueMemberS)
	if n != nil && d != nil {
		switch {
		case n.Value != strconv.Itoa(len(r.extra)):
			differs = append(differs, fmt.Sprintf("extra writes (first %s, now %d)", n.Value, len(r.extra)))
		case d.Value != writesDigest(r.extra):
			differs = append(differs, "extra writes (as many, other content)")
		}
	}
	if len(differs) > 0 {
		return envelope.Envelope{}, &IdempotencyKeyMismatchError{Tenant: tenant, Key: r.idemKey, EventID: first.ID, Seq: first.Seq, Differs: differs}
	}
	return first, nil
}

// payloadDiff returns the path of the first value (in key order) where a
// and b, payloads in envelope form, differ; "" when they are equal. It names
// the field, never a value: payloads may hold personal data.
func payloadDiff(path string, a, b any) string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return path
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if _, ok := y[k]; !ok {
				return path + "." + k
			}
			if at := payloadDiff(path+"."+k, x[k], y[k]); at != "" {
				return at
			}
		}
		for _, k := range slices.Sorted(maps.Keys(y)) {
			if _, ok := x[k]; !ok {
				return path + "." + k
			}
		}
		return ""
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return path
		}
		for i := range x {
			if at := payloadDiff(path+"["+strconv.Itoa(i)+"]", x[i], y[i]); at != "" {
				return at
			}
		}
		return ""
	}
	if a != b {
		return path
	}
	return ""
}

// writesDigest is a digest of the caller's extra writes, in order: 128 bits
// of a domain-separated SHA-256 of an unambiguous encoding of each (its
// action, table, item or key, expressions, names and values; map members
// and set elements sorted, since DynamoDB does not order them).
func writesDigest(extra []types.TransactWriteItem) string {
	h := sha256.New()
	h.Write([]byte("fourlanes idempotency writes v1\x00"))
	var b []byte
	for _, w := range extra {
		b = appendWrite(b[:0], w)
		h.Write(b)
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

func appendWrite(b []byte, w types.TransactWriteItem) []byte {
	op := func(code byte, table *string, item map[string]types.AttributeValue, exprs []*string,
		names map[string]string, values map[string]types.AttributeValue, rv string) []byte {
		b = append(b, code)
		b = appendStr(b, aws.ToString(table))
		b = appendAV(b, &types.AttributeValueMemberM{Value: item})
		for _, e := range exprs {
			b = appendStr(b, aws.ToString(e))
		}
		b = binary.AppendUvarint(b, uint64(len(names)))
		for _, k := range slices.Sorted(maps.Keys(names)) {
			b = appendStr(appendStr(b, k), names[k])
		}
		b = appendAV(b, &types.AttributeValueMemberM{Value: values})
		return appendStr(b, rv)
	}
	switch {
	case w.Put != nil:
		p := w.Put
		return op('P', p.TableName, p.Item, []*string{p.ConditionExpression}, p.ExpressionAttributeNames, p.ExpressionAttributeValues, string(p.ReturnValuesOnConditionCheckFailure))
	case w.Update != nil:
		u := w.Update
		return op('U', u.TableName, u.Key, []*string{u.UpdateExpression, u.ConditionExpression}, u.ExpressionAttributeNames, u.ExpressionAttributeValues, string(u.ReturnValuesOnConditionCheckFailure))
	case w.Delete != nil:
		d := w.Delete
		return op('D', d.TableName, d.Key, []*string{d.ConditionExpression}, d.ExpressionAttributeNames, d.ExpressionAttributeValues, string(d.ReturnValuesOnConditionCheckFailure))
	case w.ConditionCheck != nil:
		c := w.ConditionCheck
		return op('C', c.TableName, c.Key, []*string{c.ConditionExpression}, c.ExpressionAttributeNames, c.ExpressionAttributeValues, string(c.ReturnValuesOnConditionCheckFailure))
	}
	return append(b, '0') // no action: checkAlone refuses it before any digest is kept
}

func appendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendAV(b []byte, av types.AttributeValue) []byte {
	sorted := func(code byte, xs []string) []byte {
		b = append(b, code)
		b = binary.AppendUvarint(b, uint64(len(xs)))
		for _, x := range slices.Sorted(slices.Values(xs)) {
			b = appendStr(b, x)
		}
		return b
	}
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return appendStr(append(b, 'S'), v.Value)
	case *types.AttributeValueMemberN:
		return appendStr(append(b, 'N'), v.Value)
	case *types.AttributeValueMemberB:
		return appendStr(append(b, 'B'), string(v.Value))
	case *types.AttributeValueMemberBOOL:
		if v.Value {
			return append(b, 'T')
		}
		return append(b, 'F')
	case *types.AttributeValueMemberNULL:
		return append(b, '0')
	case *types.AttributeValueMemberL:
		b = binary.AppendUvarint(append(b, 'L'), uint64(len(v.Value)))
		for _, x := range v.Value {
			b = appendAV(b, x)
		}
		return b
	case *types.AttributeValueMemberM:
		b = binary.AppendUvarint(append(b, 'M'), uint64(len(v.Value)))
		for _, k := range slices.Sorted(maps.Keys(v.Value)) {
			b = appendAV(appendStr(b, k), v.Value[k])
		}
		return b
	case *types.AttributeValueMemberSS:
		return sorted('s', v.Value)
	case *types.AttributeValueMemberNS:
		return sorted('n', v.Value)
	case *types.AttributeValueMemberBS:
		xs := make([]string, len(v.Value))
		for i, x := range v.Value {
			xs[i] = string(x)
		}
		return sorted('b', xs)
	}
	return append(b, '?')
}

// idemEvent returns the event that key committed for tenant, and the key's row.
func (s *Store) idemEvent(ctx context.Context, tenant, key string) (envelope.Envelope, map[string]types.AttributeValue, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.cfg.Table),
		ConsistentRead: aws.Bool(true),
		Key:            idemKey(tenant, key),
	})
	if err != nil {
		return envelope.Envelope{}, nil, fmt.Errorf("read idempotency key %q of tenant %q: %w", key, tenant, err)
	}
	if out.Item == nil {
		return envelope.Envelope{}, nil, fmt.Errorf("idempotency key %q of tenant %q: refused as used, but no row", key, tenant)
	}
	stored, _ := out.Item[attrIdemKey].(*types.AttributeValueMemberS)
	id, _ := out.Item[attrEventID].(*types.AttributeValueMemberS)
	n, _ := out.Item[attrEventSeq].(*types.AttributeValueMemberN)
	if stored == nil || id == nil || n == nil {
		return envelope.Envelope{}, nil, fmt.Errorf("idempotency row of key %q, tenant %q: missing %s, %s or %s", key, tenant, attrIdemKey, attrEventID, attrEventSeq)
	}
	if stored.Value != key {
		return envelope.Envelope{}, nil, fmt.Errorf("idempotency key %q of tenant %q shares its row with key %q (hash collision): choose another key", key, tenant, stored.Value)
	}
	seq, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return envelope.Envelope{}, nil, fmt.Errorf("idempotency row of key %q, tenant %q: %s %q: %w", key, tenant, attrEventSeq, n.Value, err)
	}
	e, err := s.eventAt(ctx, tenant, seq)
	if err != nil {
		return envelope.Envelope{}, nil, err
	}
	if e == nil || e.ID != id.Value {
		return envelope.Envelope{}, nil, fmt.Errorf("idempotency key %q of tenant %q names event %s at seq %d, which the log does not hold: %w", key, tenant, id.Value, seq, ErrLogAhead)
	}
	return *e, out.Item, nil
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
