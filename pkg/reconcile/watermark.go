package reconcile

// The delivery audit: for each DURABLE subscription of the application, how
// far the tenant's events are settled (its delivery watermark, kept by the
// consumer) against the head. Every event above the watermark and at or
// below last_seq is unsettled for that subscription: not yet delivered, or
// lost between the stream and the handler (a filter mistake, an expired
// DLQ message, a bug). The report says how many and since when; the
// UnsettledAgeSeconds metric (per Subscription) feeds the stalled-watermark
// alarm, and dlq-repair redelivers from the log what a stalled watermark
// leaves above it.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// Watermarks reads a tenant's delivery watermarks (*delivery.DynamoStore).
type Watermarks interface {
	Watermarks(ctx context.Context, tenant string) (map[string]delivery.Watermark, error)
}

var _ Watermarks = (*delivery.DynamoStore)(nil)

// Starts reads subscriptions' recorded starts, a tenant's backfills, and
// the log a start is resolved against (*delivery.DynamoStore with WithLog).
type Starts interface {
	SubscriptionStart(ctx context.Context, sub string) (delivery.SubStart, bool, error)
	Backfills(ctx context.Context, tenant string) (map[string]delivery.Backfill, error)
	delivery.History
}

var _ Starts = (*delivery.DynamoStore)(nil)

// BackfillPosition is a subscription's backfill for a tenant.
type BackfillPosition struct {
	From      int64  `json:"from"`
	To        int64  `json:"to"`
	Position  int64  `json:"position"`
	Delivered int    `json:"delivered"`
	Skipped   int    `json:"skipped"`
	Status    string `json:"status"`
	UpdatedAt string `json:"updated_at,omitempty"`
}

// SubscriptionDelivery is one DURABLE subscription's delivery state for a
// tenant.
type SubscriptionDelivery struct {
	Subscription string `json:"subscription"`
	// Watermark: every event through this seq is settled (completed or
	// dead-lettered) for the subscription.
	Watermark int64 `json:"watermark"`
	// Unsettled: events above the watermark, at or below last_seq.
	Unsettled int64 `json:"unsettled"`
	// OldestUnsettledSeq and OldestUnsettledAt (its occurred_at) name the
	// first event above the watermark; UnsettledAgeSeconds is its age.
	OldestUnsettledSeq  int64  `json:"oldest_unsettled_seq,omitempty"`
	OldestUnsettledAt   string `json:"oldest_unsettled_at,omitempty"`
	UnsettledAgeSeconds int64  `json:"unsettled_age_s"`
	// WatermarkUpdatedAt is when the watermark last moved.
	WatermarkUpdatedAt string `json:"watermark_updated_at,omitempty"`
	// Start is the subscription's start ("live since T", "seq:5", "time:T",
	// "all", "existing"; "live, not served yet" before any consumer served
	// it), and StartSeq the seq the tenant's watermark begins at: events at
	// or below it reach the subscription only through a backfill.
	Start    string `json:"start,omitempty"`
	StartSeq int64  `json:"start_seq"`
	// Backfill is the subscription's backfill of this tenant, if any.
	Backfill *BackfillPosition `json:"backfill,omitempty"`
	// EffectsUnknown counts the tenant's dead letters of the subscription
	// whose handler's AtMostOnce effect has an unknown outcome (pkg/effect):
	// below the watermark, yet not settled until an operator decides
	// (`fourlanes effects`) and dlq-repair replays them.
	EffectsUnknown int `json:"effects_unknown"`
}

// deliveryAudit fills rep.Subscriptions for the tenant, reading its
// watermarks (one query) and the first unsettled event (one read per
// distinct watermark below the head), and emits the per-subscription
// metrics.
func (r *Reconciler) deliveryAudit(ctx context.Context, tenant string, rep *Report) error {
	if r.cfg.Watermarks == nil || len(r.cfg.Subscriptions) == 0 {
		return nil
	}
	marks, err := r.cfg.Watermarks.Watermarks(ctx, tenant)
	if err != nil {
		return fmt.Errorf("delivery audit of tenant %q: %w", tenant, err)
	}
	rep.StateReads++
	now := r.cfg.Now()
	oldest := map[int64]envelope.Envelope{} // watermark → the event after it
	rep.Subscriptions = []SubscriptionDelivery{}
	var backfills map[string]delivery.Backfill
	if r.cfg.Starts != nil {
		if backfills, err = r.cfg.Starts.Backfills(ctx, tenant); err != nil {
			return fmt.Errorf("delivery audit of tenant %q: %w", tenant, err)
		}
		rep.StateReads++
	}
	known := map[string]bool{}
	for _, sub := range r.cfg.Subscriptions {
		known[sub] = true
	}
	for _, sub := range delivery.ForChain(r.cfg.Subscriptions, tenant) {
		w, stored := marks[sub]
		sd := SubscriptionDelivery{Subscription: sub, Watermark: w.Seq, StartSeq: w.StartSeq}
		if err := r.startOf(ctx, tenant, rep.LastSeq, &sd, stored); err != nil {
			return fmt.Errorf("delivery audit of tenant %q: %w", tenant, err)
		}
		w.Seq = sd.Watermark
		if b, ok := backfills[sub]; ok {
			sd.Backfill = &BackfillPosition{From: b.From, To: b.To, Position: b.Position, Delivered: b.Delivered, Skipped: b.Skipped, Status: b.Status}
			if !b.UpdatedAt.IsZero() {
				sd.Backfill.UpdatedAt = envelope.FormatTime(b.UpdatedAt)
			}
		}
		if !w.UpdatedAt.IsZero() {
			sd.WatermarkUpdatedAt = envelope.FormatTime(w.UpdatedAt)
		}
		if rep.LastSeq > w.Seq {
			sd.Unsettled = rep.LastSeq - w.Seq
			sd.OldestUnsettledSeq = w.Seq + 1
			e, ok := oldest[w.Seq]
			if !ok {
				p, err := r.cfg.Log.Events(ctx, tenant, w.Seq, 1)
				if err != nil {
					return fmt.Errorf("delivery audit of tenant %q: read seq %d: %w", tenant, w.Seq+1, err)
				}
				rep.Reads += p.Reads
				if len(p.Events) > 0 && p.Errs[0] == nil {
					e = p.Events[0]
				}
				oldest[w.Seq] = e
			}
			if at, err := time.Parse(time.RFC3339Nano, e.OccurredAt); err == nil {
				sd.OldestUnsettledAt = e.OccurredAt
				sd.UnsettledAgeSeconds = max(0, int64(now.Sub(at).Seconds()))
			}
		}
		sd.EffectsUnknown = rep.effectsUnknown[sub]
		rep.Subscriptions = append(rep.Subscriptions, sd)
		r.cfg.Metrics.Count(keys.MetricUnknownEffectsOpen, sd.EffectsUnknown, "Subscription", sub)
		r.cfg.Metrics.Count(keys.MetricUnsettledEvents, int(sd.Unsettled), "Subscription", sub)
		r.cfg.Metrics.Count(keys.MetricUnsettledAge, int(sd.UnsettledAgeSeconds), "Subscription", sub)
		if sd.EffectsUnknown > 0 {
			r.log.WarnContext(ctx, "dead letters await a decision on an effect of unknown outcome (fourlanes effects)", obs.KeySubscription, sub,
				obs.KeyEffectsUnknown, sd.EffectsUnknown)
		}
		if sd.Unsettled > 0 {
			r.log.InfoContext(ctx, "events unsettled for a DURABLE subscription", obs.KeySubscription, sub, obs.KeyWatermark, w.Seq,
				obs.KeyLastSeq, rep.LastSeq, obs.KeyUnsettled, sd.Unsettled, obs.KeyUnsettledAgeS, sd.UnsettledAgeSeconds)
		}
	}
	for sub := range marks {
		if !known[sub] {
			rep.RetiredSubscriptions = append(rep.RetiredSubscriptions, sub)
		}
	}
	if len(rep.RetiredSubscriptions) > 0 {
		slices.Sort(rep.RetiredSubscriptions)
		r.log.WarnContext(ctx, "watermarks of subscriptions the application no longer declares (retired): dlq-repair removes them after they have been undeclared for 24 h (docs/dead-letters.md)", obs.KeyTenant, tenant,
			obs.KeyRetired, rep.RetiredSubscriptions)
	}
	return nil
}

// startOf fills sd's start. An absent watermark of a subscription with a
// start is where it will begin: the start resolved for the tenant (a
// subscription no consumer served yet owes nothing).
func (r *Reconciler) startOf(ctx context.Context, tenant string, head int64, sd *SubscriptionDelivery, stored bool) error {
	if r.cfg.Starts == nil {
		return nil
	}
	st, found, err := r.cfg.Starts.SubscriptionStart(ctx, sd.Subscription)
	if err != nil {
		return err
	}
	if !found {
		st = delivery.SubStart{Subscription: sd.Subscription, Declared: r.cfg.Declared[sd.Subscription]}
		if st.Declared.Kind == catalog.StartLive {
			sd.Start = "live, not served yet"
			if !stored {
				sd.Watermark, sd.StartSeq = head, head
			}
			return nil
		}
	}
	sd.Start = st.String()
	if stored || st.All() {
		return nil
	}
	seq, err := delivery.ResolveStart(ctx, r.cfg.Starts, tenant, st)
	if err != nil {
		return err
	}
	sd.Watermark, sd.StartSeq = seq, seq
	return nil
}
