package delivery

// Batched claims: how a consumer that holds a batch of messages saves writes.
//
// Writes are saved per event, not across a batch. An event's DURABLE
// subscriptions share one claim item, claimed for all of them in one
// conditional UpdateItem (each subscription conditioned on its own entry),
// and each completion is one conditional UpdateItem on the delivery's token:
// 1 + N writes for N subscriptions. Merging across events does not pay:
//
//   - BatchWriteItem takes no conditions, and a claim is nothing but its
//     condition.
//   - TransactWriteItems takes up to 100 conditional claims in one request,
//     but DynamoDB bills a transactional write at 2 WCU per KB instead of 1
//     (so the batch doubles the claim's cost), one condition that fails (an
//     already-completed claim on a redelivery, a held lease) cancels all of
//     them and forces a per-item retry, and a transaction cannot return the
//     old item (ReturnValues ALL_OLD), so a takeover of an expired lease would
//     go unnoticed. Measured in batch_test.go (TestClaimStrategyCost, on the
//     per-pair layout this package used before the claim item).
//
// What does batch well is reading. A message comes back after a partial
// batch failure, a timeout or a redrive with most of its subscriptions
// already completed; claiming those again would cost a refused write (billed
// like a successful one). Prefetch reads the claims of a whole batch with
// BatchGetItem (100 keys a request, eventually consistent: half a read unit
// per item): each event's claim item and, for the upgrade, each pair's
// legacy per-pair claim. DeliverWith then skips completed and dead claims
// without writing, and hands the rest of what it read to the claim, which
// conditions its write on it. A stale read is harmless: it can only show an
// older state (absent or pending where the claim has moved on), and the
// conditional write refuses it and returns the item as it is (ALL_OLD), one
// refused write and no extra read; completed is final, and a claim read as
// dead is parked for Replay either way. Without a prefetch (dlq-repair's
// Deliver), the claim reads the same keys itself, strongly consistent, one
// BatchGetItem: a redelivery of a settled event costs no write there either.
//
// Measured by `make bench` (bench/RESULTS.md, section 4) against a copy of
// the per-pair store, 10 events a batch: 2.00, 4.00 and 11.00 writes per
// event for 1, 3 and 10 subscriptions (per-pair: 2, 6 and 20), none on a
// prefetched redelivery.

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
	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// ErrNoBatchRead: the store cannot read claims in batches (its DynamoDB
// client has no BatchGetItem). Prefetch then reads nothing and delivery
// claims each subscription as usual.
var ErrNoBatchRead = errors.New("store cannot read claims in batches")

// maxBatchGet is BatchGetItem's limit of keys per request.
const maxBatchGet = 100

// ClaimReader reads many claims at once.
type ClaimReader interface {
	// GetClaims reads the claims ks. A pair it read is in the answer, found
	// or not (ClaimRecord.Found); a pair left out was not read, and the
	// claim reads it itself.
	GetClaims(ctx context.Context, ks []Key) (map[Key]ClaimRecord, error)
}

// batchGetter is the call GetClaims needs beyond the DynamoDB interface.
type batchGetter interface {
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// GetClaims reads the claims ks with BatchGetItem, 100 keys a request,
// eventually consistent (see the note at the top of batch.go for why that is
// safe): each event's claim item and, for the upgrade, each pair's legacy
// claim. Pairs DynamoDB leaves unprocessed after a few retries are left out.
// ErrNoBatchRead if the client has no BatchGetItem.
func (d *DynamoStore) GetClaims(ctx context.Context, ks []Key) (map[Key]ClaimRecord, error) {
	claims, _, err := d.ReadBatch(ctx, ks, nil)
	return claims, err
}

// ReadBatch reads the claims ks (as GetClaims) and, when the store has an
// events table (WithLog), the event rows evs, in the same BatchGetItem
// requests (100 keys a request across both tables), eventually consistent.
// Event rows not found (or left unprocessed) are absent from the answer.
func (d *DynamoStore) ReadBatch(ctx context.Context, ks []Key, evs []EventRef) (map[Key]ClaimRecord, map[EventRef]LoggedEvent, error) {
	return d.readBatch(ctx, ks, evs, false)
}

// readBatch is ReadBatch, strongly consistent when consistent is set (the
// watermark walk of dlq-repair, watermark.go).
func (d *DynamoStore) readBatch(ctx context.Context, ks []Key, evs []EventRef, consistent bool) (map[Key]ClaimRecord, map[EventRef]LoggedEvent, error) {
	bg, ok := d.db.(batchGetter)
	if !ok {
		return nil, nil, ErrNoBatchRead
	}
	if d.log == "" {
		evs = nil
	}
	type want struct {
		table string
		key   map[string]types.AttributeValue
	}
	var wants []want
	seenPK := map[string]bool{}
	addState := func(k map[string]types.AttributeValue) {
		pk := str(k, keys.AttrPK)
		if !seenPK[pk] {
			seenPK[pk] = true
			wants = append(wants, want{d.table, k})
		}
	}
	for _, k := range ks {
		addState(eventClaimKey(k.EventID))
		if !d.perPairGone {
			addState(legacyClaimKey(k))
		}
	}
	seenEv := map[EventRef]bool{}
	for _, e := range evs {
		if !seenEv[e] {
			seenEv[e] = true
			wants = append(wants, want{d.log, eventKey(e)})
		}
	}
	items := map[string]map[string]types.AttributeValue{} // state items found, by pk
	read := map[string]bool{}                             // state pks read, found or not
	logged := make(map[EventRef]LoggedEvent, len(evs))
	var err error
	for len(wants) > 0 && err == nil {
		n := min(len(wants), maxBatchGet)
		req := map[string][]map[string]types.AttributeValue{}
		for _, w := range wants[:n] {
			req[w.table] = append(req[w.table], w.key)
		}
		wants = wants[n:]
		_, err = d.batchGet(ctx, bg, req, consistent, func(table string, it map[string]types.AttributeValue) {
			if table == d.table {
				if pk := str(it, keys.AttrPK); pk != "" {
					items[pk] = it
				}
				return
			}
			ref := EventRef{Tenant: str(it, keys.AttrTenant), Seq: num(it, keys.AttrSeq)}
			switch str(it, keys.AttrKind) {
			case keys.KindEvent:
				logged[ref] = LoggedEvent{ID: str(it, keys.AttrID), Hash: str(it, keys.AttrHash)}
			case keys.KindHead:
				if ref.Seq == keys.HeadSeq {
					logged[ref] = LoggedEvent{LastSeq: num(it, keys.AttrLastSeq), Head: true}
				}
			}
		}, func(table string, k map[string]types.AttributeValue) {
			if table != d.table {
				return
			}
			read[str(k, keys.AttrPK)] = true
		})
	}
	claims := make(map[Key]ClaimRecord, len(ks))
	decoded := map[string]eventItem{}
	for _, k := range ks {
		evPK, legPK := keys.StateEventClaimPrefix+k.EventID, keys.StateClaimPrefix+k.String()
		if !read[evPK] || (!d.perPairGone && !read[legPK]) {
			continue
		}
		ei, ok := decoded[k.EventID]
		if !ok {
			ei = decodeEventItem(k.EventID, items[evPK])
			decoded[k.EventID] = ei
		}
		switch e, found := ei.entries[k.Subscription]; {
		case found:
			claims[k] = e.ClaimRecord
		case items[legPK] != nil:
			r := decodeClaim(items[legPK])
			r.Key, r.Legacy = k, true
			claims[k] = r
		default:
			claims[k] = ClaimRecord{Key: k}
		}
	}
	return claims, logged, err
}

// batchGet reads keys by table (≤ 100 in all) and retries unprocessed keys
// up to three times with a short backoff; what is still unprocessed then is
// returned. found is called with each item found, read (when not nil) with
// each key answered, found or not.
func (d *DynamoStore) batchGet(ctx context.Context, bg batchGetter, ks map[string][]map[string]types.AttributeValue, consistent bool,
	found func(string, map[string]types.AttributeValue), read func(string, map[string]types.AttributeValue)) (map[string][]map[string]types.AttributeValue, error) {
	pause := 20 * time.Millisecond
	for attempt := 0; len(ks) > 0 && attempt < 4; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ks, nil // a prefetch is an optimisation: what was read stands
			}
			pause *= 2
		}
		items := map[string]types.KeysAndAttributes{}
		for table, tk := range ks {
			if table == d.table {
				items[table] = types.KeysAndAttributes{Keys: tk, ConsistentRead: aws.Bool(consistent)}
				continue
			}
			items[table] = types.KeysAndAttributes{
				Keys:                 tk,
				ConsistentRead:       aws.Bool(consistent),
				ProjectionExpression: aws.String("#tn, #seq, #k, #id, #h, #ls"),
				ExpressionAttributeNames: map[string]string{"#tn": keys.AttrTenant, "#seq": keys.AttrSeq, "#k": keys.AttrKind,
					"#id": keys.AttrID, "#h": keys.AttrHash, "#ls": keys.AttrLastSeq},
			}
		}
		res, err := bg.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: items, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		if err != nil {
			return ks, fmt.Errorf("read a batch of claims and events: %w", err)
		}
		for table, its := range res.Responses {
			for _, it := range its {
				found(table, it)
			}
		}
		left := map[string][]map[string]types.AttributeValue{}
		for table, u := range res.UnprocessedKeys {
			if len(u.Keys) > 0 {
				left[table] = u.Keys
			}
		}
		if read != nil {
			for table, tk := range ks {
				if len(left[table]) == 0 { // the common case: every key answered
					for _, k := range tk {
						read(table, k)
					}
					continue
				}
				unread := map[string]bool{}
				for _, k := range left[table] {
					unread[keys.KeyString(k)] = true
				}
				for _, k := range tk {
					if !unread[keys.KeyString(k)] {
						read(table, k)
					}
				}
			}
		}
		ks = left
	}
	return ks, nil
}

// GetClaims reads each claim with Get (the fake needs no batching); every
// pair is read, so every pair is in the answer.
func (m *MemoryStore) GetClaims(ctx context.Context, ks []Key) (map[Key]ClaimRecord, error) {
	out := make(map[Key]ClaimRecord, len(ks))
	for _, k := range ks {
		r, ok, err := m.Get(ctx, k)
		if err != nil {
			return out, err
		}
		if !ok {
			r = ClaimRecord{Key: k}
		}
		out[k] = r
	}
	return out, nil
}

// BatchedStore is a Store that can also read claims in batches, which
// Prefetch needs. Build a Deliverer on it to use Prefetch:
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

// Prefetched is what Prefetch read for a batch: its claims and, for the
// in-log check, its event rows. DeliverWith answers a claim read as
// completed or dead from here, without a write. A nil *Prefetched holds
// nothing. It is safe for concurrent use (the consumer delivers tenants in
// parallel).
type Prefetched struct {
	claims  map[Key]ClaimRecord
	logged  map[EventRef]LoggedEvent // event rows read for the in-log check
	skipped atomic.Int64
}

// final returns the claim of k when it was read as completed or dead, and
// counts it as answered without a write.
func (p *Prefetched) final(k Key) (Claim, bool) {
	if p == nil {
		return Claim{}, false
	}
	r, found := p.claims[k]
	if !found || (r.Status != StatusCompleted && r.Status != StatusDead) {
		return Claim{}, false
	}
	p.skipped.Add(1)
	return Claim{Status: r.Status, LeaseUntil: r.LeaseUntil, Attempts: r.Attempts}, true
}

// record returns the claim of k as read, when it was read (found or not).
func (p *Prefetched) record(k Key) (ClaimRecord, bool) {
	if p == nil {
		return ClaimRecord{}, false
	}
	r, read := p.claims[k]
	return r, read
}

// loggedEvent returns the event row read at ref, if it was read.
func (p *Prefetched) loggedEvent(ref EventRef) (LoggedEvent, bool) {
	if p == nil {
		return LoggedEvent{}, false
	}
	got, found := p.logged[ref]
	return got, found
}

// Skipped reports how many claims DeliverWith answered from p (without a
// write) so far.
func (p *Prefetched) Skipped() int {
	if p == nil {
		return 0
	}
	return int(p.skipped.Load())
}

// batchReader reads claims and event rows together (*DynamoStore).
type batchReader interface {
	readBatch(ctx context.Context, ks []Key, evs []EventRef, consistent bool) (map[Key]ClaimRecord, map[EventRef]LoggedEvent, error)
}

// PrefetchStats says what a Prefetch read.
type PrefetchStats struct {
	Keys  int // claims asked for: one per (event, bound DURABLE subscription)
	Found int // claims that exist (in the event's claim item, or legacy per-pair claims)
	Final int // of those, completed or dead: Deliver will skip them without a write
	// Events and Logged: rows of the log asked for and found, for the
	// in-log and coverage checks (Config.Log with a store that reads the
	// log, DynamoStore.WithLog): each event's row, the row before it and
	// its chain's head, each once.
	Events int
	Logged int
}

// Prefetch reads, in batches, the claims of every DURABLE subscription that
// the events envs would be delivered to; DeliverWith(ctx, e, p) then skips
// completed and dead claims without writing. It needs a Deliverer built on a
// BatchedStore (ErrNoBatchRead otherwise). It never returns a nil
// *Prefetched: on an error it holds what was read, if anything (the
// prefetch is an optimisation and delivery is correct without it).
func (d *Deliverer) Prefetch(ctx context.Context, envs []envelope.Envelope) (*Prefetched, PrefetchStats, error) {
	var st PrefetchStats
	p := &Prefetched{}
	b, ok := d.cfg.Store.(*BatchedStore)
	if !ok {
		return p, st, fmt.Errorf("prefetch claims: Deliverer store %T is not a *BatchedStore: %w", d.cfg.Store, ErrNoBatchRead)
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
	var evs []EventRef
	br, both := b.Store.(batchReader)
	if both && d.cfg.Log != nil {
		// Each event's row (in the log), the row before it and its chain's
		// head (covered by the chain): consecutive events of a tenant share
		// most of these, so a batch adds about one key per tenant.
		seen := map[EventRef]bool{}
		add := func(ref EventRef) {
			if !seen[ref] {
				seen[ref] = true
				evs = append(evs, ref)
			}
		}
		for _, e := range envs {
			add(EventRef{Tenant: e.TenantID, Seq: e.Seq})
			add(EventRef{Tenant: e.TenantID, Seq: keys.HeadSeq})
			if e.Seq > 1 {
				add(EventRef{Tenant: e.TenantID, Seq: e.Seq - 1})
			}
		}
	}
	if len(ks) == 0 && len(evs) == 0 {
		return p, st, nil
	}
	var err error
	if len(evs) > 0 {
		p.claims, p.logged, err = br.readBatch(ctx, ks, evs, false)
		st.Events, st.Logged = len(evs), len(p.logged)
	} else {
		p.claims, err = b.reader.GetClaims(ctx, ks)
	}
	for _, r := range p.claims {
		if r.Found() {
			st.Found++
		}
		if r.Status == StatusCompleted || r.Status == StatusDead {
			st.Final++
		}
	}
	if err != nil {
		return p, st, fmt.Errorf("prefetch claims: %w", err)
	}
	return p, st, nil
}

// ErrNotInLog: an envelope is not in the log (NotInLogError has the detail).
var ErrNotInLog = errors.New("event is not in the log")

// NotInLogError says how an envelope differs from the log.
type NotInLogError struct {
	Tenant  string
	Seq     int64
	EventID string
	Reason  string // "no event at this seq", or how the row differs
}

func (e *NotInLogError) Error() string {
	return fmt.Sprintf("tenant %s seq %d event %s: %v: %s", e.Tenant, e.Seq, e.EventID, ErrNotInLog, e.Reason)
}

// Unwrap makes errors.Is(err, ErrNotInLog) hold.
func (e *NotInLogError) Unwrap() error { return ErrNotInLog }

// EventRef locates an event in the log.
type EventRef struct {
	Tenant string
	Seq    int64
}

// LoggedEvent is what the log holds at an EventRef: an event row's id and
// hash, or, at keys.HeadSeq, the head row's last seq.
type LoggedEvent struct {
	ID   string
	Hash string
	// LastSeq and Head: the row is the chain's head, covering seqs
	// 1..LastSeq.
	LastSeq int64
	Head    bool
}

// LogReader reads the log, strongly consistent: one event row, and what
// says whether the chain covers an event (Coverage).
type LogReader interface {
	LoggedEvent(ctx context.Context, ref EventRef) (LoggedEvent, bool, error)
	Coverage(ctx context.Context, ref EventRef) (Coverage, error)
}

// Coverage is what the chain says of the event at an EventRef: its head
// and the event before it.
type Coverage struct {
	Head      LoggedEvent // the head row (LoggedEvent.Head), if found
	HeadFound bool
	Prev      LoggedEvent // the event at seq-1, if found (seq > 1)
	PrevFound bool
}

// refuses says why the chain does not cover e, or "". An event is covered
// when its seq is at or below its chain's head and its prev_hash is the
// hash of the event before it (the genesis value at seq 1): what the head
// and the links vouch for. A row put at head+1 without moving the head (an
// emitter's role can do that: IAM cannot force a PutItem to be
// conditional) is in the log, but the chain does not cover it.
func (c Coverage) refuses(e envelope.Envelope) string {
	switch {
	case !c.HeadFound:
		return "the chain has no head row"
	case e.Seq > c.Head.LastSeq:
		return fmt.Sprintf("seq %d is above the chain's head (last_seq %d): a row the head does not cover (planted, or the head was rolled back)", e.Seq, c.Head.LastSeq)
	case e.Seq == 1 && e.PrevHash != chain.Genesis(e.TenantID):
		return "seq 1 does not start from the chain's genesis value"
	case e.Seq > 1 && !c.PrevFound:
		return fmt.Sprintf("the log has no event at seq %d, before it", e.Seq-1)
	case e.Seq > 1 && c.Prev.Hash != e.PrevHash:
		return fmt.Sprintf("prev_hash %s is not the hash of seq %d (%s)", e.PrevHash, e.Seq-1, c.Prev.Hash)
	}
	return ""
}

// ErrNotCovered: an event is in the log but the chain does not cover it
// (NotCoveredError has the detail).
var ErrNotCovered = errors.New("event is not covered by its chain")

// NotCoveredError says why the chain does not cover an event.
type NotCoveredError struct {
	Tenant  string
	Seq     int64
	EventID string
	Reason  string
}

func (e *NotCoveredError) Error() string {
	return fmt.Sprintf("tenant %s seq %d event %s: %v: %s", e.Tenant, e.Seq, e.EventID, ErrNotCovered, e.Reason)
}

// Unwrap makes errors.Is(err, ErrNotCovered) hold.
func (e *NotCoveredError) Unwrap() error { return ErrNotCovered }

// Permanent reports true: the chain's head and links do not change on a
// retry (a head only moves forward by appending, which takes that seq's
// own event).
func (e *NotCoveredError) Permanent() bool { return true }

// WithLog makes the store also read the events table named table: the
// prefetch then reads the batch's event rows with its claims, and the store
// is a LogReader for Config.Log.
func (d *DynamoStore) WithLog(table string) *DynamoStore {
	c := *d
	c.log = table
	return &c
}

// WithoutPerPairClaims returns a copy of d whose claims read no per-pair
// claim of the earlier layout: a prefetch reads one key per event instead of
// 1 + N, and a claim's own read likewise. It is safe once no message of an
// event delivered under that layout can come back: 28 days after the
// upgrade (a FIFO queue keeps a message 14 days, its DLQ 14 more), and never
// after a rollback to a version that writes per-pair claims. Before that, a
// redelivered event whose pair completed there would run its handler again.
// Replaying a dead letter of that layout still reads (and moves) its claim.
func (d *DynamoStore) WithoutPerPairClaims() *DynamoStore {
	c := *d
	c.perPairGone = true
	return &c
}

// PerPairClaims applies the setting of keys.EnvPerPairClaims: "" or
// keys.PerPairClaimsRead returns d, keys.PerPairClaimsGone
// d.WithoutPerPairClaims(); any other value is an error naming the variable
// and its values.
func (d *DynamoStore) PerPairClaims(setting string) (*DynamoStore, error) {
	switch setting {
	case "", keys.PerPairClaimsRead:
		return d, nil
	case keys.PerPairClaimsGone:
		return d.WithoutPerPairClaims(), nil
	}
	return nil, fmt.Errorf("%s=%q: want %q (per-pair claims of the earlier layout may exist; the default) or %q (none can come back: 28 days after the upgrade, and no rollback since)",
		keys.EnvPerPairClaims, setting, keys.PerPairClaimsRead, keys.PerPairClaimsGone)
}

var _ LogReader = (*DynamoStore)(nil)

func eventKey(ref EventRef) map[string]av {
	return map[string]av{keys.AttrTenant: s(ref.Tenant), keys.AttrSeq: n(ref.Seq)}
}

// LoggedEvent reads the event row at ref (id and hash), strongly consistent.
func (d *DynamoStore) LoggedEvent(ctx context.Context, ref EventRef) (LoggedEvent, bool, error) {
	if d.log == "" {
		return LoggedEvent{}, false, errors.New("delivery store has no events table (DynamoStore.WithLog)")
	}
	out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(d.log), Key: eventKey(ref), ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String("#id, #h, #k"),
		ExpressionAttributeNames: map[string]string{"#id": keys.AttrID, "#h": keys.AttrHash, "#k": keys.AttrKind},
	})
	if err != nil {
		return LoggedEvent{}, false, fmt.Errorf("read the log at %s/%d: %w", ref.Tenant, ref.Seq, err)
	}
	if out.Item == nil || str(out.Item, keys.AttrKind) != keys.KindEvent {
		return LoggedEvent{}, false, nil
	}
	return LoggedEvent{ID: str(out.Item, keys.AttrID), Hash: str(out.Item, keys.AttrHash)}, true, nil
}

// Coverage reads, strongly consistent, the head of ref's chain and the
// event before ref: one BatchGetItem.
func (d *DynamoStore) Coverage(ctx context.Context, ref EventRef) (Coverage, error) {
	if d.log == "" {
		return Coverage{}, errors.New("delivery store has no events table (DynamoStore.WithLog)")
	}
	bg, ok := d.db.(batchGetter)
	if !ok {
		return Coverage{}, ErrNoBatchRead
	}
	head, prev := EventRef{Tenant: ref.Tenant, Seq: keys.HeadSeq}, EventRef{Tenant: ref.Tenant, Seq: ref.Seq - 1}
	ks := []map[string]av{eventKey(head)}
	if ref.Seq > 1 {
		ks = append(ks, eventKey(prev))
	}
	var c Coverage
	left, err := d.batchGet(ctx, bg, map[string][]map[string]av{d.log: ks}, true, func(_ string, it map[string]av) {
		switch seq := num(it, keys.AttrSeq); {
		case seq == keys.HeadSeq && str(it, keys.AttrKind) == keys.KindHead:
			c.Head, c.HeadFound = LoggedEvent{LastSeq: num(it, keys.AttrLastSeq), Head: true}, true
		case seq == prev.Seq && str(it, keys.AttrKind) == keys.KindEvent:
			c.Prev, c.PrevFound = LoggedEvent{ID: str(it, keys.AttrID), Hash: str(it, keys.AttrHash)}, true
		}
	}, nil)
	if err == nil && len(left) > 0 {
		err = errors.New("keys left unprocessed")
	}
	if err != nil {
		return Coverage{}, fmt.Errorf("read the chain of %s around seq %d: %w", ref.Tenant, ref.Seq, err)
	}
	return c, nil
}

// coverage returns what p read of e's chain, when it read all of it.
func (p *Prefetched) coverage(e envelope.Envelope) (Coverage, bool) {
	if p == nil {
		return Coverage{}, false
	}
	var c Coverage
	c.Head, c.HeadFound = p.logged[EventRef{Tenant: e.TenantID, Seq: keys.HeadSeq}]
	if e.Seq > 1 {
		c.Prev, c.PrevFound = p.logged[EventRef{Tenant: e.TenantID, Seq: e.Seq - 1}]
	}
	return c, c.HeadFound && (e.Seq == 1 || c.PrevFound)
}

// checkCovered refuses e unless its chain covers it (Coverage.refuses). The
// prefetch's reads decide when they say yes; they are eventually
// consistent, so a no (or a read missing) is decided on strongly consistent
// reads of the head and the event before.
func (d *Deliverer) checkCovered(ctx context.Context, e envelope.Envelope, p *Prefetched) error {
	if d.cfg.Log == nil {
		return nil
	}
	c, ok := p.coverage(e)
	if ok && c.refuses(e) == "" {
		return nil
	}
	c, err := d.cfg.Log.Coverage(ctx, EventRef{Tenant: e.TenantID, Seq: e.Seq})
	if err != nil {
		return fmt.Errorf("deliver %s: check its chain covers it: %w", e.ID, err)
	}
	if why := c.refuses(e); why != "" {
		d.cfg.Metrics.Count(keys.MetricNotCovered, 1)
		return &NotCoveredError{Tenant: e.TenantID, Seq: e.Seq, EventID: e.ID, Reason: why}
	}
	return nil
}

// checkInLog refuses e unless the log holds it (see the note at the top).
func (d *Deliverer) checkInLog(ctx context.Context, e envelope.Envelope, p *Prefetched) error {
	if d.cfg.Log == nil {
		return nil
	}
	ref := EventRef{Tenant: e.TenantID, Seq: e.Seq}
	got, found := p.loggedEvent(ref)
	if !found {
		var err error
		if got, found, err = d.cfg.Log.LoggedEvent(ctx, ref); err != nil {
			return fmt.Errorf("deliver %s: check it is in the log: %w", e.ID, err)
		}
	}
	refuse := func(why string) error {
		d.cfg.Metrics.Count(keys.MetricNotInLog, 1)
		return &NotInLogError{Tenant: e.TenantID, Seq: e.Seq, EventID: e.ID, Reason: why}
	}
	switch {
	case !found:
		return refuse("the log has no event at this seq")
	case got.ID != e.ID:
		return refuse(fmt.Sprintf("the log's event at this seq is %s", got.ID))
	case got.Hash != e.Hash:
		return refuse(fmt.Sprintf("the log's hash is %s, the envelope's %s", got.Hash, e.Hash))
	}
	return nil
}
