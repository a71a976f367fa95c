package delivery

// Delivery watermarks: for each (tenant, DURABLE subscription), the last seq
// such that it and every earlier event of the tenant are settled for the
// subscription (completed, dead-lettered, before its start, or not routed
// to it at all).
//
// A watermark is derived, not kept on the hot path: the consumer writes
// nothing but its claims and completions (1 + N writes for an event with N
// DURABLE subscriptions). What is stored is a checkpoint per pair (the
// watermark row), and the watermark is that checkpoint carried forward
// over the tenant's log (WatermarkReader.Carry): event by event in seq
// order, each settled for the subscription if its claim entry is completed
// or dead, if its type does not route to the subscription, or if it is
// before the subscription's start. The walk stops at the first event that
// is not settled and at the first seq the log does not hold: a watermark
// never passes a gap. Claims only move forward (absent, pending, then
// completed or dead; a replay of a dead one is settled either way), so an
// eventually consistent read can only stop the walk early, never carry it
// past an event that is not settled.
//
// Each walk reads at most a budget of event rows (DefaultWalkBudget); when
// the budget ends first, the watermark reported is where the walk got to
// (Carried.Partial): lower than the truth, never higher, and the next walk
// goes on from the checkpoint written there.
//
// Reconcile (its delivery audit) and dlq-repair write the checkpoint
// forward to the watermark they derived (Advance: one conditional,
// monotonic UpdateItem per pair that moved), so the next walk is short.
// The checkpoint must be written within the claims' retention (30 days):
// past it a completed claim has expired and the walk stops there (dlq-repair
// then reports the event, see pkg/repair).
//
// Cost: nothing on the consumer's path. A walk costs one Query page per 100
// events of the log and one BatchGetItem per 100 claim keys (an event's
// claim item, plus each pair's per-pair claim of the earlier layout while
// those are read); a checkpoint one write per (tenant, subscription) per
// reconcile of the tenant that found it moved.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Watermark is how far one (tenant, subscription) is settled.
type Watermark struct {
	Tenant       string
	Subscription string
	Seq          int64     // 0: nothing settled yet
	UpdatedAt    time.Time // when it last moved (zero when absent)
	// StartSeq is the seq it began at (the subscription's start resolved
	// for the tenant; 0 for all history).
	StartSeq int64
	// Checkpoint is the seq stored in the watermark row, which Seq was
	// carried forward from (the same as Seq when nothing was walked), and
	// Partial reports that the walk's budget ended before it met an event
	// not settled or the head: Seq is where it got to.
	Checkpoint int64
	Partial    bool
}

// WatermarkStore keeps the watermarks' checkpoints. Advance must be atomic:
// reconcile and dlq-repair race on it.
type WatermarkStore interface {
	// Advance moves the watermark of (tenant, sub) to to if it is in
	// [from-1, to-1] (an absent one is 0); every seq from..to must be
	// settled. It reports whether it moved.
	Advance(ctx context.Context, tenant, sub string, from, to int64, now time.Time) (bool, error)
	// Watermarks returns a tenant's stored watermarks (checkpoints) by
	// subscription (absent ones are left out).
	Watermarks(ctx context.Context, tenant string) (map[string]Watermark, error)
}

func watermarkKey(tenant, sub string) map[string]av {
	return map[string]av{keys.AttrPK: s(keys.StateWatermarkPrefix + tenant), keys.AttrSK: s(sub)}
}

// Advance is one conditional UpdateItem.
func (d *DynamoStore) Advance(ctx context.Context, tenant, sub string, from, to int64, now time.Time) (bool, error) {
	if from < 1 || to < from {
		return false, fmt.Errorf("advance watermark of %s/%s: bad range %d..%d", tenant, sub, from, to)
	}
	cond := "#seq BETWEEN :lo AND :hi"
	names := map[string]string{"#seq": keys.AttrSeq, "#tn": keys.AttrTenant, "#sub": keys.AttrSubscription, "#up": keys.AttrUpdatedAt}
	if from == 1 {
		cond = "attribute_not_exists(#pk) OR " + cond
		names["#pk"] = keys.AttrPK
	}
	_, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(d.table),
		Key:                       watermarkKey(tenant, sub),
		UpdateExpression:          aws.String("SET #seq = :to, #tn = :tn, #sub = :sub, #up = :up"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: map[string]av{":to": n(to), ":lo": n(from - 1), ":hi": n(to - 1), ":tn": s(tenant), ":sub": s(sub), ":up": ts(now)},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return false, nil // a gap below from, or already past to
	case err != nil:
		return false, fmt.Errorf("advance watermark of %s/%s to %d: %w", tenant, sub, to, err)
	}
	return true, nil
}

// Watermarks is one consistent Query.
func (d *DynamoStore) Watermarks(ctx context.Context, tenant string) (map[string]Watermark, error) {
	out := map[string]Watermark{}
	var start map[string]av
	for {
		res, err := d.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(d.table),
			ConsistentRead:            aws.Bool(true),
			KeyConditionExpression:    aws.String("#pk = :pk"),
			ExpressionAttributeNames:  map[string]string{"#pk": keys.AttrPK},
			ExpressionAttributeValues: map[string]av{":pk": s(keys.StateWatermarkPrefix + tenant)},
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, fmt.Errorf("read watermarks of tenant %q: %w", tenant, err)
		}
		for _, it := range res.Items {
			w := Watermark{Tenant: tenant, Subscription: str(it, keys.AttrSK), Seq: num(it, keys.AttrSeq), UpdatedAt: when(it, keys.AttrUpdatedAt), StartSeq: num(it, keys.AttrStartSeq)}
			w.Checkpoint = w.Seq
			out[w.Subscription] = w
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		start = res.LastEvaluatedKey
	}
}

// Advance is the fake's Advance.
func (m *MemoryStore) Advance(_ context.Context, tenant, sub string, from, to int64, now time.Time) (bool, error) {
	if from < 1 || to < from {
		return false, fmt.Errorf("advance watermark of %s/%s: bad range %d..%d", tenant, sub, from, to)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.marks == nil {
		m.marks = map[[2]string]Watermark{}
	}
	k := [2]string{tenant, sub}
	w := m.marks[k]
	if w.Seq < from-1 || w.Seq > to-1 {
		return false, nil
	}
	m.marks[k] = Watermark{Tenant: tenant, Subscription: sub, Seq: to, UpdatedAt: now, StartSeq: w.StartSeq}
	return true, nil
}

// Watermarks is the fake's Watermarks.
func (m *MemoryStore) Watermarks(_ context.Context, tenant string) (map[string]Watermark, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]Watermark{}
	for k, w := range m.marks {
		if k[0] == tenant {
			w.Checkpoint = w.Seq
			out[k[1]] = w
		}
	}
	return out, nil
}

var (
	_ WatermarkStore = (*DynamoStore)(nil)
	_ WatermarkStore = (*MemoryStore)(nil)
)

// DurableSubscriptions names the application's DURABLE subscriptions, from
// its catalog, in declaration order: the subscriptions a watermark is kept
// for.
func DurableSubscriptions(cat *catalog.Catalog) []string {
	var out []string
	for _, sp := range cat.Subscriptions() {
		if sp.Lane == catalog.Durable {
			out = append(out, sp.Name)
		}
	}
	return out
}

// DeclaredStarts returns the declared start of each of the application's
// DURABLE subscriptions.
func DeclaredStarts(cat *catalog.Catalog) map[string]catalog.Start {
	out := map[string]catalog.Start{}
	for _, sp := range cat.Subscriptions() {
		if sp.Lane == catalog.Durable {
			out[sp.Name] = sp.Start
		}
	}
	return out
}

// Subscriptions returns the application's DURABLE subscriptions (see
// DurableSubscriptions).
func (d *Deliverer) Subscriptions() []string { return DurableSubscriptions(d.reg.Catalog()) }

// Watermarks returns a tenant's watermarks, one per DURABLE subscription of
// the application, first beginning each absent one at its subscription's
// start (Seq 0 where none is stored yet: all history). With a store that
// reads the log (a DynamoStore WithLog), each is its checkpoint carried
// forward over the settled claims after it (WatermarkReader.Carry, strongly
// consistent reads, up to the head read now). ErrNoWatermarks when the
// Deliverer has no WatermarkStore.
func (d *Deliverer) Watermarks(ctx context.Context, tenant string) (map[string]Watermark, error) {
	if d.marks == nil {
		return nil, ErrNoWatermarks
	}
	for _, sub := range d.subscriptionsOf(tenant) {
		if _, err := d.beginWatermark(ctx, tenant, sub); err != nil {
			return nil, err
		}
	}
	got, err := d.marks.Watermarks(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := map[string]Watermark{}
	from := map[string]int64{}
	for _, sub := range d.subscriptionsOf(tenant) {
		w, ok := got[sub]
		if !ok {
			w = Watermark{Tenant: tenant, Subscription: sub}
		}
		out[sub], from[sub] = w, w.Seq
	}
	if d.walk == nil {
		return out, nil
	}
	head, err := d.walk.store.LastSeq(ctx, tenant)
	if err != nil {
		return nil, err
	}
	c, err := d.walk.Carry(ctx, tenant, from, head)
	if err != nil {
		return nil, err
	}
	for sub, w := range out {
		w.Seq, w.Partial = max(w.Seq, c.Seqs[sub]), c.Partial && c.Seqs[sub] < head
		out[sub] = w
	}
	return out, nil
}

// ErrNoWatermarks: the Deliverer's store keeps no watermarks.
var ErrNoWatermarks = errors.New("delivery store keeps no watermarks")

// Settled writes the tenant's watermark checkpoints forward: dlq-repair
// calls it after redelivering, seqs being the events it settled. With a
// store that reads the log, each checkpoint moves to the watermark derived
// now (Watermarks), which covers seqs and whatever the consumer settled
// since; otherwise each moves over every run of consecutive seqs it can
// reach. One conditional write per subscription that moves. It returns the
// new checkpoint per subscription that moved. A failed write is returned
// (joined) and counted (WatermarkFailed); delivery itself is done, and the
// next reconcile or dlq-repair run writes it.
func (d *Deliverer) Settled(ctx context.Context, tenant string, seqs []int64) (map[string]int64, error) {
	if d.marks == nil {
		return nil, nil
	}
	if d.walk != nil {
		return d.checkpoint(ctx, tenant)
	}
	if len(seqs) == 0 {
		return nil, nil
	}
	ss := append([]int64(nil), seqs...)
	sort.Slice(ss, func(i, j int) bool { return ss[i] < ss[j] })
	type run struct{ from, to int64 }
	var runs []run
	for _, q := range ss {
		if q < 1 {
			continue
		}
		if len(runs) > 0 && q <= runs[len(runs)-1].to+1 {
			runs[len(runs)-1].to = max(runs[len(runs)-1].to, q)
			continue
		}
		runs = append(runs, run{q, q})
	}
	moved := map[string]int64{}
	var errs []error
	now := d.cfg.Now()
	for _, sub := range d.subscriptionsOf(tenant) {
		for _, r := range runs {
			ok, err := d.marks.Advance(ctx, tenant, sub, r.from, r.to, now)
			if err == nil && !ok {
				// A subscription with a start has no watermark of the tenant
				// until it begins at the start: begin it, then try again.
				var began bool
				if began, err = d.beginWatermark(ctx, tenant, sub); err == nil && began {
					ok, err = d.marks.Advance(ctx, tenant, sub, r.from, r.to, now)
				}
			}
			if err != nil {
				errs = append(errs, err)
				d.cfg.Metrics.Count(keys.MetricWatermarkFailed, 1, "Subscription", sub)
				break
			}
			if ok {
				moved[sub] = r.to
			}
		}
	}
	return moved, errors.Join(errs...)
}

// checkpoint writes each checkpoint of tenant forward to the watermark
// derived now.
func (d *Deliverer) checkpoint(ctx context.Context, tenant string) (map[string]int64, error) {
	marks, err := d.Watermarks(ctx, tenant)
	if err != nil {
		return nil, err
	}
	moved := map[string]int64{}
	var errs []error
	now := d.cfg.Now()
	for _, sub := range d.subscriptionsOf(tenant) {
		w := marks[sub]
		if w.Seq <= w.Checkpoint {
			continue
		}
		ok, err := d.marks.Advance(ctx, tenant, sub, w.Checkpoint+1, w.Seq, now)
		if err != nil {
			errs = append(errs, err)
			d.cfg.Metrics.Count(keys.MetricWatermarkFailed, 1, "Subscription", sub)
			continue
		}
		if ok {
			moved[sub] = w.Seq
		}
	}
	return moved, errors.Join(errs...)
}

// DefaultWalkBudget is how many event rows one walk reads at most
// (WatermarkReader.Carry): 20 Query pages, and as many BatchGetItems of
// claims per 100 keys.
const DefaultWalkBudget = 2000

// walkPage is the event rows one Query of the walk asks for.
const walkPage = 100

// WatermarkReader derives watermarks: each stored checkpoint carried
// forward over the tenant's settled events after it (see the top of this
// file). It reads the log and the claims through one DynamoStore WithLog.
// It is safe for concurrent use.
type WatermarkReader struct {
	store      *DynamoStore
	cat        *catalog.Catalog
	subs       []string
	declared   map[string]catalog.Start // DeclaredStarts(cat), made once
	budget     int
	consistent bool
	starts     sync.Map // subscription → SubStart, once recorded
}

// NewWatermarkReader returns a reader of the watermarks of cat's DURABLE
// subscriptions; store must read the log (WithLog). Its walks read at most
// DefaultWalkBudget event rows, eventually consistent.
func NewWatermarkReader(store *DynamoStore, cat *catalog.Catalog) (*WatermarkReader, error) {
	if store.log == "" {
		return nil, errors.New("watermark reader: the delivery store reads no log (DynamoStore.WithLog)")
	}
	return &WatermarkReader{store: store, cat: cat, subs: DurableSubscriptions(cat), declared: DeclaredStarts(cat), budget: DefaultWalkBudget}, nil
}

// WithBudget returns a copy of r whose walks read at most n event rows
// (n < 1: DefaultWalkBudget).
func (r *WatermarkReader) WithBudget(n int) *WatermarkReader {
	if n < 1 {
		n = DefaultWalkBudget
	}
	return &WatermarkReader{store: r.store, cat: r.cat, subs: r.subs, declared: r.declared, budget: n, consistent: r.consistent}
}

// Consistent returns a copy of r whose walks read strongly consistent
// (twice the read units): what dlq-repair uses, right after it delivered.
func (r *WatermarkReader) Consistent() *WatermarkReader {
	c := r.WithBudget(r.budget)
	c.consistent = true
	return c
}

// Carried is what one walk found.
type Carried struct {
	// Seqs is, per subscription asked for, its watermark carried forward
	// (at least where it started).
	Seqs map[string]int64
	// Read is the event rows read; Partial reports that the budget ended
	// while some subscription was still settled through the last row read
	// and below the head.
	Read    int
	Partial bool
}

// Carry carries each watermark of from (by subscription; the stored
// checkpoint, or where the subscription's start puts it) forward over the
// tenant's events above it, up to head: through every consecutive seq the
// log holds that is settled for the subscription. It stops, per
// subscription, at the first event not settled for it, and for all of them
// at a seq the log does not hold (a gap) and when the budget ends.
func (r *WatermarkReader) Carry(ctx context.Context, tenant string, from map[string]int64, head int64) (Carried, error) {
	c := Carried{Seqs: map[string]int64{}}
	active := map[string]bool{}
	lo := head
	for sub, w := range from {
		c.Seqs[sub] = w
		if w < head {
			active[sub] = true
			lo = min(lo, w)
		}
	}
	next := lo + 1
	for len(active) > 0 && next <= head {
		if c.Read >= r.budget {
			c.Partial = true
			break
		}
		to := min(head, next+int64(min(walkPage, r.budget-c.Read))-1)
		rows, err := r.store.loggedRange(ctx, tenant, next, to, r.consistent)
		if err != nil {
			return c, fmt.Errorf("carry the watermarks of tenant %s from seq %d: %w", tenant, next-1, err)
		}
		c.Read += len(rows)
		if len(rows) == 0 || rows[0].Seq != next {
			break // a gap: the log has no event at next
		}
		routed := make([]map[string]bool, len(rows))
		var ks []Key
		for i, row := range rows {
			routed[i] = map[string]bool{}
			for _, sp := range r.cat.Matching(row.Type) {
				if sp.Lane != catalog.Durable {
					continue
				}
				routed[i][sp.Name] = true
				if active[sp.Name] && c.Seqs[sp.Name] < row.Seq {
					ks = append(ks, Key{EventID: row.ID, Subscription: sp.Name})
				}
			}
		}
		claims := map[Key]ClaimRecord{}
		if len(ks) > 0 {
			if claims, _, err = r.store.readBatch(ctx, ks, nil, r.consistent); err != nil {
				return c, fmt.Errorf("carry the watermarks of tenant %s from seq %d: %w", tenant, next-1, err)
			}
		}
		for i, row := range rows {
			if row.Seq != next {
				active = nil // a gap
				break
			}
			for sub := range active {
				if c.Seqs[sub] != row.Seq-1 {
					continue // its watermark is higher: it joins the walk there
				}
				ok, err := r.settled(ctx, sub, row, routed[i][sub], claims)
				if err != nil {
					return c, err
				}
				if !ok {
					delete(active, sub)
					continue
				}
				c.Seqs[sub] = row.Seq
			}
			next++
		}
	}
	return c, nil
}

// settled reports whether the event at row is settled for sub.
func (r *WatermarkReader) settled(ctx context.Context, sub string, row loggedRow, routed bool, claims map[Key]ClaimRecord) (bool, error) {
	if !routed {
		return true, nil
	}
	if rec, ok := claims[Key{EventID: row.ID, Subscription: sub}]; ok && (rec.Status == StatusCompleted || rec.Status == StatusDead) {
		return true, nil
	}
	// Before the subscription's start (a seq or a time; a live start is
	// where its checkpoint began): never delivered, settled.
	st, err := r.start(ctx, sub)
	if err != nil {
		return false, err
	}
	if st.All() || st.Declared.Kind == catalog.StartLive {
		return false, nil
	}
	return st.Before(envelope.Envelope{Seq: row.Seq, OccurredAt: row.OccurredAt}), nil
}

// start is sub's recorded start, else its declared one.
func (r *WatermarkReader) start(ctx context.Context, sub string) (SubStart, error) {
	if v, ok := r.starts.Load(sub); ok {
		return v.(SubStart), nil
	}
	st, found, err := r.store.SubscriptionStart(ctx, sub)
	if err != nil {
		return SubStart{}, err
	}
	if !found {
		st = SubStart{Subscription: sub, Declared: r.declared[sub]}
		return st, nil
	}
	r.starts.Store(sub, st)
	return st, nil
}

// Watermarks returns the tenant's watermarks: each stored checkpoint of a
// DURABLE subscription carried forward (Carry) up to the head read now;
// rows of subscriptions no longer declared are returned as stored. Absent
// ones are left out, as DynamoStore.Watermarks does: where an absent one
// begins is the caller's to say (a start), and Carry takes it from there.
func (r *WatermarkReader) Watermarks(ctx context.Context, tenant string) (map[string]Watermark, error) {
	got, err := r.store.Watermarks(ctx, tenant)
	if err != nil || len(got) == 0 {
		return got, err
	}
	head, err := r.store.LastSeq(ctx, tenant)
	if err != nil {
		return nil, err
	}
	from := map[string]int64{}
	for _, sub := range r.subs {
		if w, ok := got[sub]; ok {
			from[sub] = w.Seq
		}
	}
	c, err := r.Carry(ctx, tenant, from, head)
	if err != nil {
		return nil, err
	}
	for sub := range from {
		w := got[sub]
		w.Seq, w.Partial = max(w.Seq, c.Seqs[sub]), c.Partial && c.Seqs[sub] < head
		got[sub] = w
	}
	return got, nil
}

// Checkpoint writes the checkpoint of (tenant, sub) forward from from to to
// (Advance from+1..to): one conditional write, refused when another writer
// moved it past to already or it is not at from or above. It reports
// whether it moved.
func (r *WatermarkReader) Checkpoint(ctx context.Context, tenant, sub string, from, to int64, now time.Time) (bool, error) {
	if to <= from {
		return false, nil
	}
	return r.store.Advance(ctx, tenant, sub, from+1, to, now)
}

// loggedRow is one event row of the log as the walk reads it.
type loggedRow struct {
	Seq        int64
	ID, Type   string
	OccurredAt string
}

// loggedRange reads the tenant's event rows at seqs from..to, in order:
// Query pages of the events table, only the attributes the walk needs.
func (d *DynamoStore) loggedRange(ctx context.Context, tenant string, from, to int64, consistent bool) ([]loggedRow, error) {
	var out []loggedRow
	var start map[string]av
	for {
		res, err := d.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(d.log),
			ConsistentRead:            aws.Bool(consistent),
			KeyConditionExpression:    aws.String("#tn = :tn AND #seq BETWEEN :a AND :b"),
			ProjectionExpression:      aws.String("#seq, #id, #ty, #at, #k"),
			ExpressionAttributeNames:  map[string]string{"#tn": keys.AttrTenant, "#seq": keys.AttrSeq, "#id": keys.AttrID, "#ty": keys.AttrType, "#at": keys.AttrOccurredAt, "#k": keys.AttrKind},
			ExpressionAttributeValues: map[string]av{":tn": s(tenant), ":a": n(max(from, 1)), ":b": n(to)},
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return out, fmt.Errorf("read the log of %s at seqs %d..%d: %w", tenant, from, to, err)
		}
		for _, it := range res.Items {
			if str(it, keys.AttrKind) != keys.KindEvent {
				continue
			}
			out = append(out, loggedRow{Seq: num(it, keys.AttrSeq), ID: str(it, keys.AttrID), Type: str(it, keys.AttrType), OccurredAt: str(it, keys.AttrOccurredAt)})
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		start = res.LastEvaluatedKey
	}
}
