package reconcile

// The delivery audit: for each DURABLE subscription of the application, how
// far the tenant's events are settled (its delivery watermark: the stored
// checkpoint carried forward over the settled claims after it, Config.Carry)
// against the head. The audit then writes each checkpoint forward to the
// watermark it derived (one conditional write per subscription that moved),
// so the next walk starts there. Every event above the watermark and at or
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

// Carrier carries watermarks forward over a tenant's settled events and
// writes their checkpoints (*delivery.WatermarkReader).
type Carrier interface {
	Carry(ctx context.Context, tenant string, from map[string]int64, head int64) (delivery.Carried, error)
	Checkpoint(ctx context.Context, tenant, sub string, from, to int64, now time.Time) (bool, error)
}

var _ Carrier = (*delivery.WatermarkReader)(nil)

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
	// WatermarkUpdatedAt is when the watermark's checkpoint last moved.
	WatermarkUpdatedAt string `json:"watermark_updated_at,omitempty"`
	// Checkpoint is the watermark as stored before this audit (or where the
	// subscription's start puts an absent one); Watermark is it carried
	// forward over the settled events after it. WatermarkPartial: the
	// walk's read budget ended first, so Watermark is a lower bound (the
	// checkpoint is written there and the next audit goes on).
	Checkpoint       int64 `json:"checkpoint"`
	WatermarkPartial bool  `json:"watermark_partial,omitempty"`
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
// watermarks' checkpoints (one query), carrying them forward over the
// settled claims after them (Config.Carry: a Query page per 100 events and
// a BatchGetItem per 100 claim keys, at most delivery.DefaultWalkBudget
// events), writing each checkpoint that moved (one conditional write), and
// reading the first unsettled event (one read per distinct watermark below
// the head); it emits the per-subscription metrics.
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
	sds := make([]SubscriptionDelivery, 0, len(r.cfg.Subscriptions))
	writable := map[string]bool{}
	from := map[string]int64{}
	for _, sub := range r.cfg.Subscriptions {
		known[sub] = true
	}
	for _, sub := range delivery.ForChain(r.cfg.Subscriptions, tenant) {
		w, stored := marks[sub]
		sd := SubscriptionDelivery{Subscription: sub, Watermark: w.Seq, StartSeq: w.StartSeq}
		all, err := r.startOf(ctx, tenant, rep.LastSeq, &sd, stored)
		if err != nil {
			return fmt.Errorf("delivery audit of tenant %q: %w", tenant, err)
		}
		// A checkpoint is written where one is stored, or where absence
		// means all history; an absent one of a subscription with a start
		// is begun by its consumer (delivery.BeginWatermark), never here.
		writable[sub] = stored || all
		sd.Checkpoint, from[sub] = sd.Watermark, sd.Watermark
		if b, ok := backfills[sub]; ok {
			sd.Backfill = &BackfillPosition{From: b.From, To: b.To, Position: b.Position, Delivered: b.Delivered, Skipped: b.Skipped, Status: b.Status}
			if !b.UpdatedAt.IsZero() {
				sd.Backfill.UpdatedAt = envelope.FormatTime(b.UpdatedAt)
			}
		}
		if !w.UpdatedAt.IsZero() {
			sd.WatermarkUpdatedAt = envelope.FormatTime(w.UpdatedAt)
		}
		sds = append(sds, sd)
	}
	if r.cfg.Carry != nil && len(sds) > 0 {
		c, err := r.cfg.Carry.Carry(ctx, tenant, from, rep.LastSeq)
		if err != nil {
			return fmt.Errorf("delivery audit of tenant %q: %w", tenant, err)
		}
		rep.Reads += c.Read
		for i := range sds {
			sd := &sds[i]
			sd.Watermark = max(sd.Watermark, c.Seqs[sd.Subscription])
			sd.WatermarkPartial = c.Partial && sd.Watermark < rep.LastSeq
			if sd.WatermarkPartial {
				r.log.InfoContext(ctx, "delivery watermark walk reached its read budget: the watermark reported is where it got to, and the next audit goes on from there",
					obs.KeySubscription, sd.Subscription, obs.KeyWatermark, sd.Watermark, obs.KeyLastSeq, rep.LastSeq, obs.KeyReads, c.Read)
			}
			if sd.Watermark <= sd.Checkpoint || !writable[sd.Subscription] {
				continue
			}
			moved, err := r.cfg.Carry.Checkpoint(ctx, tenant, sd.Subscription, sd.Checkpoint, sd.Watermark, now)
			if err != nil {
				// The report stands (derived again next time); the
				// checkpoint stays behind until a later audit writes it.
				r.cfg.Metrics.Count(keys.MetricWatermarkFailed, 1, "Subscription", sd.Subscription)
				r.log.WarnContext(ctx, "delivery watermark checkpoint not written; the next audit derives it again", obs.KeySubscription, sd.Subscription,
					obs.KeyWatermark, sd.Watermark, obs.Err(err))
				continue
			}
			if moved {
				sd.WatermarkUpdatedAt = envelope.FormatTime(now)
			}
		}
	}
	for _, sd := range sds {
		sub := sd.Subscription
		w := delivery.Watermark{Seq: sd.Watermark}
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

// startOf fills sd's start, and reports whether the subscription keeps all
// history. An absent watermark of a subscription with a start is where it
// will begin: the start resolved for the tenant (a subscription no consumer
// served yet owes nothing).
func (r *Reconciler) startOf(ctx context.Context, tenant string, head int64, sd *SubscriptionDelivery, stored bool) (bool, error) {
	if r.cfg.Starts == nil {
		return true, nil
	}
	st, found, err := r.cfg.Starts.SubscriptionStart(ctx, sd.Subscription)
	if err != nil {
		return false, err
	}
	if !found {
		st = delivery.SubStart{Subscription: sd.Subscription, Declared: r.cfg.Declared[sd.Subscription]}
		if st.Declared.Kind == catalog.StartLive {
			sd.Start = "live, not served yet"
			if !stored {
				sd.Watermark, sd.StartSeq = head, head
			}
			return false, nil
		}
	}
	sd.Start = st.String()
	if stored || st.All() {
		return st.All(), nil
	}
	seq, err := delivery.ResolveStart(ctx, r.cfg.Starts, tenant, st)
	if err != nil {
		return false, err
	}
	sd.Watermark, sd.StartSeq = seq, seq
	return false, nil
}
