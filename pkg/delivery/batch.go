package delivery

// Batched claims: how a consumer that holds a batch of messages saves writes.
//
// Cost of one (event, subscription) in the common path is two writes: the
// claim (a conditional UpdateItem) and the completion (a conditional
// UpdateItem on the lease token). Neither can be merged across a batch
// without changing what it costs or what it tells us:
//
//   - BatchWriteItem takes no conditions, and a claim is nothing but its
//     condition.
//   - TransactWriteItems takes up to 100 conditional claims in one request,
//     but DynamoDB bills a transactional write at 2 WCU per KB instead of 1
//     (so the batch doubles the claim's cost), one condition that fails (an
//     already-completed claim on a redelivery, a held lease) cancels all of
//     them and forces a per-item retry, and a transaction cannot return the
//     old item (ReturnValues ALL_OLD), so a takeover of an expired lease would
//     go unnoticed. Measured in batch_test.go (TestClaimStrategyCost).
//
// What does batch well is reading. A message comes back after a partial
// batch failure, a timeout or a redrive with most of its subscriptions
// already completed; claiming those again costs a write each even though the
// condition fails (DynamoDB charges a refused conditional write like a
// successful one). Prefetch reads the claims of a whole batch with
// BatchGetItem (100 keys a request, eventually consistent: half a read unit
// per claim, a tenth of a write's price) and Deliver then skips completed and
// dead claims without writing. A stale read is harmless: it can only show an
// older state (absent or pending where the claim has moved on), and those go
// to the conditional claim, which is authoritative; completed is final, and a
// claim read as dead is parked for Replay either way.
//
// Measured (TestClaimStrategyCost, warm, 2 shared cores, on AWS's
// downloadable DynamoDB jar the project used before its own): claiming the
// 30 (event, subscription) pairs of a 10-message batch, with capacity
// modelled on DynamoDB billing (1 KB items; 2 WCU per transactional item):
//
//	strategy                          scenario               requests  WCU  RCU  time
//	per-item UpdateItem               first delivery               30   30    0  54 ms
//	per-item UpdateItem               redelivery, completed        30   30    0  36 ms
//	TransactWriteItems, per-item      first delivery                1   60    0  33 ms
//	  fallback on cancellation        redelivery, completed        31   90    0  102 ms
//	BatchGetItem + per-item claims    first delivery               31   30   15  42 ms
//	BatchGetItem + per-item claims    redelivery, completed         1    0   15  6 ms
//
// The transaction saves round trips on a first delivery at twice the write
// cost and loses on every redelivery; the prefetch costs a tenth of a
// write's price per pair on a first delivery and saves every claim write on
// a redelivery. So Deliver keeps per-item claims, and consumers prefetch.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// ErrNoBatchRead: the store cannot read claims in batches (its DynamoDB
// client has no BatchGetItem). Prefetch then reads nothing and delivery
// claims each subscription as usual.
var ErrNoBatchRead = errors.New("store cannot read claims in batches")

// maxBatchGet is BatchGetItem's limit of keys per request.
const maxBatchGet = 100

// ClaimReader reads many claims at once. A claim absent from the answer was
// not found (or not read: the caller must treat both the same, by claiming).
type ClaimReader interface {
	GetClaims(ctx context.Context, ks []Key) (map[Key]ClaimRecord, error)
}

// batchGetter is the call GetClaims needs beyond the DynamoDB interface.
type batchGetter interface {
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// GetClaims reads the claims ks with BatchGetItem, 100 keys a request,
// eventually consistent (see the note at the top of batch.go for why that is
// safe). Keys DynamoDB leaves unprocessed after a few retries are left out.
// ErrNoBatchRead if the client has no BatchGetItem.
func (d *DynamoStore) GetClaims(ctx context.Context, ks []Key) (map[Key]ClaimRecord, error) {
	bg, ok := d.db.(batchGetter)
	if !ok {
		return nil, ErrNoBatchRead
	}
	byPK := make(map[string]Key, len(ks))
	for _, k := range ks {
		byPK[keys.StateClaimPrefix+k.String()] = k
	}
	pks := make([]string, 0, len(byPK))
	for pk := range byPK {
		pks = append(pks, pk)
	}
	out := make(map[Key]ClaimRecord, len(ks))
	for len(pks) > 0 {
		n := min(len(pks), maxBatchGet)
		chunk := pks[:n]
		pks = pks[n:]
		req := make([]map[string]types.AttributeValue, len(chunk))
		for i, pk := range chunk {
			req[i] = map[string]types.AttributeValue{keys.AttrPK: s(pk), keys.AttrSK: s(keys.StateClaimSK)}
		}
		if err := d.batchGet(ctx, bg, req, func(it map[string]types.AttributeValue) {
			pk, _ := it[keys.AttrPK].(*types.AttributeValueMemberS)
			if pk == nil {
				return
			}
			if k, ok := byPK[pk.Value]; ok {
				out[k] = claimRecord(k, it)
			}
		}); err != nil {
			return out, err
		}
	}
	return out, nil
}

// batchGet reads keys (≤ 100) and retries unprocessed keys up to three times
// with a short backoff; what is still unprocessed then is left out.
func (d *DynamoStore) batchGet(ctx context.Context, bg batchGetter, ks []map[string]types.AttributeValue, found func(map[string]types.AttributeValue)) error {
	pause := 20 * time.Millisecond
	for attempt := 0; len(ks) > 0 && attempt < 4; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil // a prefetch is an optimisation: what was read stands
			}
			pause *= 2
		}
		res, err := bg.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			d.table: {
				Keys:                     ks,
				ProjectionExpression:     aws.String("#pk, #st, #lu, #att, #tn"),
				ExpressionAttributeNames: map[string]string{"#pk": keys.AttrPK, "#st": keys.AttrStatus, "#lu": keys.AttrLeaseUntil, "#att": keys.AttrAttempts, "#tn": keys.AttrTenant},
			},
		}})
		if err != nil {
			return fmt.Errorf("read %d claims: %w", len(ks), err)
		}
		for _, it := range res.Responses[d.table] {
			found(it)
		}
		ks = res.UnprocessedKeys[d.table].Keys
	}
	return nil
}

func claimRecord(k Key, it map[string]types.AttributeValue) ClaimRecord {
	r := ClaimRecord{Key: k}
	if v, ok := it[keys.AttrStatus].(*types.AttributeValueMemberS); ok {
		r.Status = Status(v.Value)
	}
	if v, ok := it[keys.AttrTenant].(*types.AttributeValueMemberS); ok {
		r.Tenant = v.Value
	}
	var lu, att int64
	if v, ok := it[keys.AttrLeaseUntil].(*types.AttributeValueMemberN); ok {
		_, _ = fmt.Sscan(v.Value, &lu)
	}
	if v, ok := it[keys.AttrAttempts].(*types.AttributeValueMemberN); ok {
		_, _ = fmt.Sscan(v.Value, &att)
	}
	if lu > 0 {
		r.LeaseUntil = time.UnixMilli(lu)
	}
	r.Attempts = int(att)
	return r
}

// GetClaims reads each claim with Get (the fake needs no batching).
func (m *MemoryStore) GetClaims(ctx context.Context, ks []Key) (map[Key]ClaimRecord, error) {
	out := make(map[Key]ClaimRecord, len(ks))
	for _, k := range ks {
		r, ok, err := m.Get(ctx, k)
		if err != nil {
			return out, err
		}
		if ok {
			out[k] = r
		}
	}
	return out, nil
}

// BatchedStore is a Store whose Claim first looks at the claims Prefetch
// bound to the context: a claim read as completed or dead is answered from
// there, with no write. Everything else goes to the wrapped store. Build a
// Deliverer on it to use Prefetch:
//
//	store := delivery.NewBatchedStore(delivery.NewDynamoStore(db, table))
//	d, err := delivery.New(reg, delivery.Config{Store: store})
type BatchedStore struct {
	Store
	reader ClaimReader
}

var _ Store = (*BatchedStore)(nil)

// NewBatchedStore wraps s, which must also be a ClaimReader (DynamoStore and
// MemoryStore are).
func NewBatchedStore(s Store) (*BatchedStore, error) {
	r, ok := s.(ClaimReader)
	if !ok {
		return nil, fmt.Errorf("batched store over %T: %w", s, ErrNoBatchRead)
	}
	return &BatchedStore{Store: s, reader: r}, nil
}

// GetClaims reads through to the wrapped store.
func (b *BatchedStore) GetClaims(ctx context.Context, ks []Key) (map[Key]ClaimRecord, error) {
	return b.reader.GetClaims(ctx, ks)
}

// Claim answers a claim that Prefetch read as completed or dead without a
// write; otherwise it claims in the wrapped store.
func (b *BatchedStore) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	if p, ok := ctx.Value(prefetchKey{}).(*prefetched); ok {
		if r, found := p.claims[req.Key]; found && (r.Status == StatusCompleted || r.Status == StatusDead) {
			p.skipped.Add(1)
			return Claim{Status: r.Status, LeaseUntil: r.LeaseUntil, Attempts: r.Attempts}, nil
		}
	}
	return b.Store.Claim(ctx, req)
}

type prefetchKey struct{}

type prefetched struct {
	claims  map[Key]ClaimRecord
	skipped atomic.Int64
}

// PrefetchStats says what a Prefetch read.
type PrefetchStats struct {
	Keys  int // claims asked for: one per (event, bound DURABLE subscription)
	Found int // claims that exist
	Final int // of those, completed or dead: Deliver will skip them without a write
}

// Prefetch reads, in batches, the claims of every DURABLE subscription that
// the events envs would be delivered to, and returns ctx carrying them;
// Deliver(ctx, e) then skips completed and dead claims without writing. It
// needs a Deliverer built on a BatchedStore (ErrNoBatchRead otherwise). On an
// error it returns ctx unchanged (or with what it read): the prefetch is an
// optimisation and delivery is correct without it.
func (d *Deliverer) Prefetch(ctx context.Context, envs []envelope.Envelope) (context.Context, PrefetchStats, error) {
	var st PrefetchStats
	b, ok := d.cfg.Store.(*BatchedStore)
	if !ok {
		return ctx, st, fmt.Errorf("prefetch claims: Deliverer store %T is not a *BatchedStore: %w", d.cfg.Store, ErrNoBatchRead)
	}
	var ks []Key
	seen := map[Key]bool{}
	for _, e := range envs {
		for _, bd := range d.reg.Route(e.Type, catalog.Durable).Bound {
			k := Key{EventID: e.ID, Subscription: bd.Name}
			if !seen[k] {
				seen[k] = true
				ks = append(ks, k)
			}
		}
	}
	st.Keys = len(ks)
	if len(ks) == 0 {
		return ctx, st, nil
	}
	claims, err := b.reader.GetClaims(ctx, ks)
	st.Found = len(claims)
	for _, r := range claims {
		if r.Status == StatusCompleted || r.Status == StatusDead {
			st.Final++
		}
	}
	if len(claims) > 0 {
		ctx = context.WithValue(ctx, prefetchKey{}, &prefetched{claims: claims})
	}
	if err != nil {
		return ctx, st, fmt.Errorf("prefetch claims: %w", err)
	}
	return ctx, st, nil
}

// PrefetchSkipped reports how many claims Deliver answered from the prefetch
// bound to ctx (without a write) so far.
func PrefetchSkipped(ctx context.Context) int {
	if p, ok := ctx.Value(prefetchKey{}).(*prefetched); ok {
		return int(p.skipped.Load())
	}
	return 0
}
