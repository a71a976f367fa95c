package delivery

// Delivery watermarks: for each (tenant, DURABLE subscription), the last seq
// such that it and every earlier event of the tenant are settled for the
// subscription (completed, dead-lettered, or not routed to it at all).
//
// The FIFO queue hands a tenant's events to the consumer in seq order, so
// the watermark is maintained with one conditional write per (tenant,
// subscription) per batch: the batch's settled events form runs of
// consecutive seqs, and a run a..b moves the watermark to b only if it is
// then in [a-1, b-1]. A run that starts above watermark+1 (an event before it
// was lost, or is still on its way) does not move it: the watermark never
// passes a gap. dlq-repair closes the gap from the log and moves it on.
//
// Cost (TestWatermarkCost): one UpdateItem of a small item (1 WCU) per
// tenant, per DURABLE subscription, per batch; with 10 messages of one
// tenant in a batch that is 0.1 write per event per subscription, against
// the 1 + N writes (one claim, N completions) an event routed to N
// subscriptions costs.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/catalog"
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
}

// WatermarkStore keeps watermarks. Advance must be atomic: the consumer and
// dlq-repair race on it.
type WatermarkStore interface {
	// Advance moves the watermark of (tenant, sub) to to if it is in
	// [from-1, to-1] (an absent one is 0); every seq from..to must be
	// settled. It reports whether it moved.
	Advance(ctx context.Context, tenant, sub string, from, to int64, now time.Time) (bool, error)
	// Watermarks returns a tenant's watermarks by subscription (absent ones
	// are left out).
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
// start (Seq 0 where none is stored yet: all history). ErrNoWatermarks when the
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
	for _, sub := range d.subscriptionsOf(tenant) {
		w, ok := got[sub]
		if !ok {
			w = Watermark{Tenant: tenant, Subscription: sub}
		}
		out[sub] = w
	}
	return out, nil
}

// ErrNoWatermarks: the Deliverer's store keeps no watermarks.
var ErrNoWatermarks = errors.New("delivery store keeps no watermarks")

// Settled reports that the events at seqs of tenant are settled for every
// DURABLE subscription (Deliver answered them without error and without
// RetryLater), and moves each subscription's watermark over every run of
// consecutive seqs it can reach: one conditional write per run and
// subscription. It returns the new watermark per subscription that moved.
// Without a WatermarkStore it does nothing. A failed write is returned
// (joined); delivery itself is done, and a later batch or dlq-repair moves
// the watermark on.
func (d *Deliverer) Settled(ctx context.Context, tenant string, seqs []int64) (map[string]int64, error) {
	return d.SettledWith(ctx, tenant, seqs, nil)
}

// SettledWith is Settled for a batch Prefetch read: a run that ends at or
// below the watermark p read for a subscription is already settled (a
// redelivery) and costs no write, not even a refused conditional one. The
// prefetch reads eventually consistent and a watermark only moves up, so
// what it read is at most the true one: a run above it is still written,
// and its condition decides.
func (d *Deliverer) SettledWith(ctx context.Context, tenant string, seqs []int64, p *Prefetched) (map[string]int64, error) {
	if d.marks == nil || len(seqs) == 0 {
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
		at, known := p.watermark(tenant, sub)
		for _, r := range runs {
			if known && r.to <= at {
				continue // settled before: a redelivery
			}
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
				at, known = r.to, true
			}
		}
	}
	return moved, errors.Join(errs...)
}
