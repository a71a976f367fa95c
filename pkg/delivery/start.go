package delivery

// Subscription starts: a DURABLE subscription is delivered what is committed
// after its start (catalog.Start), never earlier history; that reaches it
// only through a backfill (DeliverTo, driven by pkg/repair).
//
// The default start is when the subscription first went live. The first
// Deliverer that serves it records that moment in the state table
// (StartStore.BeginSubscription, a conditional write: concurrent consumers
// and dlq-repair agree on one): the Deliverer's creation time, or the
// occurred_at of the first event it is handed if that is earlier (an event
// the new code is asked to deliver is never before its start). Events of
// other tenants committed before that moment are history. A subscription that was delivering
// before starts were recorded (its watermark of the tenant at hand exists)
// is recorded as keys.StartExisting: it keeps all history, as before.
//
// Each tenant's watermark begins at the start resolved for that tenant
// (BeginWatermark): the last seq before it, found by a binary search of the
// tenant's log by occurred_at (log2(head) reads, once per tenant and
// subscription). occurred_at is the emitter's clock: an emitter whose clock
// is off by d blurs the boundary by d, never more; seq starts are exact.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// SubStart is a subscription's start as recorded.
type SubStart struct {
	Subscription string
	Declared     catalog.Start // the start declared when it was recorded
	// Existing: the subscription was delivering before starts were
	// recorded; it keeps all history.
	Existing  bool
	StartedAt time.Time // when it first went live
}

// All reports whether the start admits all history.
func (s SubStart) All() bool { return s.Existing || s.Declared.Kind == catalog.StartAll }

// threshold is the earliest occurred_at a time start delivers.
func (s SubStart) threshold() time.Time {
	if s.Declared.Kind == catalog.StartTime {
		return s.Declared.Time
	}
	return s.StartedAt
}

// Before reports whether e was committed before the start, so that only a
// backfill delivers it. For a live start it compares occurred_at with when
// the subscription went live; the Deliverer decides by the seq the
// tenant's watermark began at instead (tenantStart), which agrees with it
// but never makes history of an event a consumer was handed.
func (s SubStart) Before(e envelope.Envelope) bool {
	switch {
	case s.All():
		return false
	case s.Declared.Kind == catalog.StartSeq:
		return e.Seq < s.Declared.Seq
	}
	at, err := time.Parse(time.RFC3339Nano, e.OccurredAt)
	return err == nil && at.Before(s.threshold())
}

// String is the start as reconcile reports it: "live since T", "seq:5",
// "time:T", "all" or "existing".
func (s SubStart) String() string {
	switch {
	case s.Existing:
		return keys.StartExisting
	case s.Declared.Kind == catalog.StartLive:
		return "live since " + s.StartedAt.UTC().Format(time.RFC3339)
	}
	return s.Declared.String()
}

// StartStore keeps subscription starts and begins watermarks at them.
// DynamoStore and MemoryStore implement it.
type StartStore interface {
	// BeginSubscription records st unless a start of st.Subscription is
	// recorded already, and returns the recorded one.
	BeginSubscription(ctx context.Context, st SubStart) (SubStart, error)
	// SubscriptionStart reads the recorded start of sub.
	SubscriptionStart(ctx context.Context, sub string) (SubStart, bool, error)
	// BeginWatermark creates the watermark of (tenant, sub) at seq, unless
	// one exists, and reports whether it did.
	BeginWatermark(ctx context.Context, tenant, sub string, seq int64, now time.Time) (bool, error)
}

// History is what resolving a start for a tenant reads from the log.
type History interface {
	// LastSeq is the tenant's head (0 without events).
	LastSeq(ctx context.Context, tenant string) (int64, error)
	// OccurredAt is the occurred_at of the tenant's event at seq.
	OccurredAt(ctx context.Context, tenant string, seq int64) (time.Time, bool, error)
}

// ErrNoHistory: a start cannot be resolved without reading the log.
var ErrNoHistory = errors.New("delivery has no log to resolve a subscription's start (Config.History; DynamoStore.WithLog)")

// ResolveStart is the seq a tenant's watermark begins at for st: every
// event at or below it precedes the start.
func ResolveStart(ctx context.Context, h History, tenant string, st SubStart) (int64, error) {
	if st.All() {
		return 0, nil
	}
	if h == nil {
		return 0, ErrNoHistory
	}
	head, err := h.LastSeq(ctx, tenant)
	if err != nil {
		return 0, fmt.Errorf("resolve the start of %s for tenant %s: %w", st.Subscription, tenant, err)
	}
	if st.Declared.Kind == catalog.StartSeq {
		return min(st.Declared.Seq-1, head), nil
	}
	t0 := st.threshold()
	lo, hi := int64(0), head // events <= lo are before t0; events > hi are not
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		at, ok, err := h.OccurredAt(ctx, tenant, mid)
		if err != nil {
			return 0, fmt.Errorf("resolve the start of %s for tenant %s: %w", st.Subscription, tenant, err)
		}
		if !ok {
			return 0, fmt.Errorf("resolve the start of %s for tenant %s: the log has no seq %d below its head %d: run reconcile on the tenant", st.Subscription, tenant, mid, head)
		}
		if at.Before(t0) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, nil
}

// startOf returns the recorded start of sub, recording it first if no
// Deliverer has yet; tenant is the tenant at hand (whose watermark tells a
// subscription that was delivering before starts were recorded), first the
// event at hand if any (the subscription is live from it at the latest).
// Without a StartStore every subscription keeps all history.
func (d *Deliverer) startOf(ctx context.Context, sub, tenant string, first *envelope.Envelope) (SubStart, error) {
	if d.starts == nil {
		return SubStart{Subscription: sub, Declared: catalog.FromAll()}, nil
	}
	if v, ok := d.startCache.Load(sub); ok {
		return v.(SubStart), nil
	}
	st, found, err := d.starts.SubscriptionStart(ctx, sub)
	if err != nil {
		return SubStart{}, err
	}
	if !found {
		b, _ := d.reg.Subscription(sub)
		st = SubStart{Subscription: sub, Declared: b.Start, StartedAt: d.born}
		if first != nil {
			if at, err := time.Parse(time.RFC3339Nano, first.OccurredAt); err == nil && at.Before(st.StartedAt) {
				st.StartedAt = at
			}
		}
		if d.marks != nil && tenant != "" {
			ms, err := d.marks.Watermarks(ctx, tenant)
			if err != nil {
				return SubStart{}, err
			}
			_, st.Existing = ms[sub]
		}
		if st, err = d.starts.BeginSubscription(ctx, st); err != nil {
			return SubStart{}, err
		}
		d.cfg.Logger.InfoContext(ctx, "subscription went live", slog.String(obs.KeySubscription, sub), slog.String(obs.KeyStart, st.String()))
	}
	d.startCache.Store(sub, st)
	return st, nil
}

// tenantStart is the seq the watermark of (tenant, sub) began at, for a
// live start: every event at or below it is history. The first delivery of
// the pair a Deliverer makes reads it (one Query of the tenant's
// watermarks) or begins it: at the start resolved for the tenant, but
// below e, the event at hand, which a consumer serving the subscription
// was handed and so is not history (a tenant's events reach the consumer
// in seq order). Cached per Deliverer.
func (d *Deliverer) tenantStart(ctx context.Context, st SubStart, e envelope.Envelope) (int64, error) {
	k := [2]string{e.TenantID, st.Subscription}
	if v, ok := d.tenantStarts.Load(k); ok {
		return v.(int64), nil
	}
	read := func() (int64, bool, error) {
		ms, err := d.marks.Watermarks(ctx, e.TenantID)
		if err != nil {
			return 0, false, err
		}
		w, ok := ms[st.Subscription]
		return w.StartSeq, ok, nil
	}
	seq, ok, err := read()
	if err != nil {
		return 0, err
	}
	if !ok {
		if seq, err = ResolveStart(ctx, d.history, e.TenantID, st); err != nil {
			return 0, err
		}
		seq = min(seq, e.Seq-1)
		began, err := d.starts.BeginWatermark(ctx, e.TenantID, st.Subscription, seq, d.cfg.Now())
		if err != nil {
			return 0, err
		}
		if began {
			d.cfg.Logger.InfoContext(ctx, "watermark began at the subscription's start", slog.String(obs.KeyTenant, e.TenantID),
				slog.String(obs.KeySubscription, st.Subscription), slog.String(obs.KeyStart, st.String()), slog.Int64(obs.KeySeq, seq))
		} else if seq, _, err = read(); err != nil { // another delivery began it first
			return 0, err
		}
	}
	d.tenantStarts.Store(k, seq)
	d.begun.Store(k, true)
	return seq, nil
}

// TenantStart returns the seq the watermark of (e's tenant, sub) began at,
// beginning it as a delivery of e would if no Deliverer has: events at or
// below it are history for sub. 0 for a subscription that keeps all
// history, or starts at a seq or time (decided by the start alone).
func (d *Deliverer) TenantStart(ctx context.Context, sub string, e envelope.Envelope) (int64, error) {
	st, err := d.startOf(ctx, sub, e.TenantID, &e)
	if err != nil || st.All() || st.Declared.Kind != catalog.StartLive {
		return 0, err
	}
	return d.tenantStart(ctx, st, e)
}

// before reports whether e is history for the subscription whose start is
// st: for a live start, at or below the tenant's start seq; otherwise by
// st alone.
func (d *Deliverer) before(ctx context.Context, st SubStart, e envelope.Envelope) (bool, error) {
	if st.All() || st.Declared.Kind != catalog.StartLive {
		return st.Before(e), nil
	}
	seq, err := d.tenantStart(ctx, st, e)
	return e.Seq <= seq, err
}

// Start returns the start of DURABLE subscription sub (recording it if no
// Deliverer has yet).
func (d *Deliverer) Start(ctx context.Context, sub, tenant string) (SubStart, error) {
	return d.startOf(ctx, sub, tenant, nil)
}

// beginWatermark begins the watermark of (tenant, sub) at the start
// resolved for the tenant, unless it exists, and reports whether it began
// one now. Each pair is looked at once per Deliverer.
func (d *Deliverer) beginWatermark(ctx context.Context, tenant, sub string) (bool, error) {
	k := [2]string{tenant, sub}
	if _, done := d.begun.Load(k); done || d.starts == nil {
		return false, nil
	}
	st, err := d.startOf(ctx, sub, tenant, nil)
	if err != nil {
		return false, err
	}
	if st.All() {
		d.begun.Store(k, true)
		return false, nil
	}
	ms, err := d.marks.Watermarks(ctx, tenant)
	if err != nil {
		return false, err
	}
	if _, ok := ms[sub]; ok {
		d.begun.Store(k, true)
		return false, nil
	}
	seq, err := ResolveStart(ctx, d.history, tenant, st)
	if err != nil {
		return false, err
	}
	began, err := d.starts.BeginWatermark(ctx, tenant, sub, seq, d.cfg.Now())
	if err != nil {
		return false, err
	}
	d.begun.Store(k, true)
	if began {
		d.cfg.Logger.InfoContext(ctx, "watermark began at the subscription's start", slog.String(obs.KeyTenant, tenant),
			slog.String(obs.KeySubscription, sub), slog.String(obs.KeyStart, st.String()), slog.Int64(obs.KeySeq, seq))
	}
	return began, nil
}

// ---- DynamoStore ----

func subStartKey(sub string) map[string]av {
	return map[string]av{keys.AttrPK: s(keys.StateSubStartPK), keys.AttrSK: s(sub)}
}

// StartedSubscriptions lists the subscriptions with a recorded start, in
// order: one Query (paged).
func (d *DynamoStore) StartedSubscriptions(ctx context.Context) ([]string, error) {
	var out []string
	err := d.queryAll(ctx, keys.StateSubStartPK, "", func(it map[string]av) { out = append(out, str(it, keys.AttrSK)) })
	if err != nil {
		return nil, fmt.Errorf("list the subscription starts: %w", err)
	}
	return out, nil
}

func encodeStart(st SubStart) string {
	if st.Existing {
		return keys.StartExisting
	}
	return st.Declared.String()
}

func decodeStart(sub string, it map[string]av) (SubStart, error) {
	st := SubStart{Subscription: sub, StartedAt: when(it, keys.AttrStartedAt)}
	v := str(it, keys.AttrStart)
	if v == keys.StartExisting {
		st.Existing = true
		return st, nil
	}
	d, err := catalog.ParseStart(v)
	if err != nil {
		return st, fmt.Errorf("the recorded start of subscription %s: %w", sub, err)
	}
	st.Declared = d
	return st, nil
}

// BeginSubscription is one conditional UpdateItem (and a read when another
// recorded it first).
func (d *DynamoStore) BeginSubscription(ctx context.Context, st SubStart) (SubStart, error) {
	_, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(d.table),
		Key:                       subStartKey(st.Subscription),
		UpdateExpression:          aws.String("SET #sub = :sub, #at = :at, #st = :st"),
		ConditionExpression:       aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:  map[string]string{"#pk": keys.AttrPK, "#sub": keys.AttrSubscription, "#at": keys.AttrStartedAt, "#st": keys.AttrStart},
		ExpressionAttributeValues: map[string]av{":sub": s(st.Subscription), ":at": ts(st.StartedAt), ":st": s(encodeStart(st))},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		got, found, err := d.SubscriptionStart(ctx, st.Subscription)
		if err == nil && !found {
			err = fmt.Errorf("record the start of subscription %s: refused, yet none is recorded", st.Subscription)
		}
		return got, err
	case err != nil:
		return SubStart{}, fmt.Errorf("record the start of subscription %s: %w", st.Subscription, err)
	}
	return st, nil
}

// SubscriptionStart is one consistent GetItem.
func (d *DynamoStore) SubscriptionStart(ctx context.Context, sub string) (SubStart, bool, error) {
	out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: subStartKey(sub), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return SubStart{}, false, fmt.Errorf("read the start of subscription %s: %w", sub, err)
	}
	if out.Item == nil {
		return SubStart{}, false, nil
	}
	st, err := decodeStart(sub, out.Item)
	return st, err == nil, err
}

// BeginWatermark is one conditional UpdateItem.
func (d *DynamoStore) BeginWatermark(ctx context.Context, tenant, sub string, seq int64, now time.Time) (bool, error) {
	_, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(d.table),
		Key:                       watermarkKey(tenant, sub),
		UpdateExpression:          aws.String("SET #seq = :seq, #ss = :seq, #tn = :tn, #sub = :sub, #up = :up"),
		ConditionExpression:       aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:  map[string]string{"#pk": keys.AttrPK, "#seq": keys.AttrSeq, "#ss": keys.AttrStartSeq, "#tn": keys.AttrTenant, "#sub": keys.AttrSubscription, "#up": keys.AttrUpdatedAt},
		ExpressionAttributeValues: map[string]av{":seq": n(seq), ":tn": s(tenant), ":sub": s(sub), ":up": ts(now)},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("begin the watermark of %s/%s at %d: %w", tenant, sub, seq, err)
	}
	return true, nil
}

// LastSeq reads the tenant's head row (WithLog).
func (d *DynamoStore) LastSeq(ctx context.Context, tenant string) (int64, error) {
	if d.log == "" {
		return 0, ErrNoHistory
	}
	out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(d.log), Key: eventKey(EventRef{Tenant: tenant, Seq: keys.HeadSeq}), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#ls"), ExpressionAttributeNames: map[string]string{"#ls": keys.AttrLastSeq},
	})
	if err != nil {
		return 0, fmt.Errorf("read the head of tenant %s: %w", tenant, err)
	}
	return num(out.Item, keys.AttrLastSeq), nil
}

// OccurredAt reads one event's occurred_at (WithLog).
func (d *DynamoStore) OccurredAt(ctx context.Context, tenant string, seq int64) (time.Time, bool, error) {
	if d.log == "" {
		return time.Time{}, false, ErrNoHistory
	}
	out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(d.log), Key: eventKey(EventRef{Tenant: tenant, Seq: seq}), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#at, #k"), ExpressionAttributeNames: map[string]string{"#at": keys.AttrOccurredAt, "#k": keys.AttrKind},
	})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read the log at %s/%d: %w", tenant, seq, err)
	}
	if out.Item == nil || str(out.Item, keys.AttrKind) != keys.KindEvent {
		return time.Time{}, false, nil
	}
	at, err := time.Parse(time.RFC3339Nano, str(out.Item, keys.AttrOccurredAt))
	if err != nil {
		return time.Time{}, false, fmt.Errorf("the log at %s/%d: occurred_at: %w", tenant, seq, err)
	}
	return at, true, nil
}

// ---- MemoryStore ----

// BeginSubscription is the fake's BeginSubscription.
func (m *MemoryStore) BeginSubscription(_ context.Context, st SubStart) (SubStart, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.starts == nil {
		m.starts = map[string]SubStart{}
	}
	if got, ok := m.starts[st.Subscription]; ok {
		return got, nil
	}
	m.starts[st.Subscription] = st
	return st, nil
}

// SubscriptionStart is the fake's SubscriptionStart.
func (m *MemoryStore) SubscriptionStart(_ context.Context, sub string) (SubStart, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.starts[sub]
	return st, ok, nil
}

// BeginWatermark is the fake's BeginWatermark.
func (m *MemoryStore) BeginWatermark(_ context.Context, tenant, sub string, seq int64, now time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.marks == nil {
		m.marks = map[[2]string]Watermark{}
	}
	k := [2]string{tenant, sub}
	if _, ok := m.marks[k]; ok {
		return false, nil
	}
	m.marks[k] = Watermark{Tenant: tenant, Subscription: sub, Seq: seq, StartSeq: seq, UpdatedAt: now}
	return true, nil
}

var (
	_ StartStore = (*DynamoStore)(nil)
	_ StartStore = (*MemoryStore)(nil)
	_ History    = (*DynamoStore)(nil)
)
