package repair

// Backfill: the explicit way a subscription receives history before its
// start (Request.Backfill; `fourlanes backfill`). For each tenant it
// delivers seqs From..To to that one subscription, To being where the
// tenant's watermark began (the lane delivers what follows), at no more
// than Rate events per second, passing over the subscription's quarantined
// events. The position is saved as it goes (delivery.BackfillStore), so a
// run that ends on its budget, or fails, resumes there on the next
// invocation; claims keep every event delivered once across runs.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// SourceBackfill is the report key of a backfill run.
const SourceBackfill = "backfill"

// BackfillRequest asks for a subscription's history.
type BackfillRequest struct {
	Subscription string `json:"subscription"`
	// Tenants limits the backfill (default: every tenant of the log).
	Tenants []string `json:"tenants,omitempty"`
	// From is the first seq ("5") or the earliest occurred_at (RFC 3339) to
	// deliver; empty resumes a saved backfill, or starts at seq 1.
	From string `json:"from,omitempty"`
	// Rate caps the events per second (default DefaultBackfillRate).
	Rate float64 `json:"rate,omitempty"`
}

// Backfill rates.
const (
	DefaultBackfillRate = 50
	MaxBackfillRate     = 1000
)

// BackfillReport is a backfill run's progress.
type BackfillReport struct {
	Subscription string             `json:"subscription"`
	Rate         float64            `json:"rate_per_s"`
	Done         bool               `json:"done"`
	Tenants      []BackfillProgress `json:"tenants"`
}

// BackfillProgress is one tenant's backfill after the run.
type BackfillProgress struct {
	Tenant    string `json:"tenant"`
	From      int64  `json:"from"`
	To        int64  `json:"to"`
	Position  int64  `json:"position"`
	Delivered int    `json:"delivered"`        // handler runs, over every run of this backfill
	Skipped   int    `json:"skipped"`          // quarantined events passed over
	Already   int    `json:"already"`          // this run: delivered before (claims)
	Dead      int    `json:"dead_lettered"`    // this run: dead-lettered (the dead_letters source replays them)
	Status    string `json:"status"`           // running or done
	Reason    string `json:"reason,omitempty"` // why it stopped short of To
	Error     string `json:"error,omitempty"`
}

// Validate checks a request as far as it can without the application:
// the subscription is named, the rate is in range, From is a seq or a time.
// It sets the default rate.
func (b *BackfillRequest) Validate() error { return b.validate(nil) }

// validate checks a request before anything is written.
func (b *BackfillRequest) validate(cat Subscriptions) error {
	if b.Subscription == "" {
		return errors.New("backfill: subscription is required")
	}
	if cat != nil {
		sp, ok := cat.Subscription(b.Subscription)
		if !ok || sp.Lane != catalog.Durable {
			return fmt.Errorf("backfill: %q is not a DURABLE subscription of this application", b.Subscription)
		}
	}
	if b.Rate == 0 {
		b.Rate = DefaultBackfillRate
	}
	if b.Rate < 0 || b.Rate > MaxBackfillRate {
		return fmt.Errorf("backfill: rate %v: want events per second in (0, %d]", b.Rate, MaxBackfillRate)
	}
	if b.From != "" {
		if _, _, err := parseFrom(b.From); err != nil {
			return err
		}
	}
	return nil
}

// Subscriptions tells a backfill which subscriptions exist
// (*catalog.Registry).
type Subscriptions interface {
	Subscription(name string) (catalog.Bound, bool)
}

var _ Subscriptions = (*catalog.Registry)(nil)

// parseFrom reads a seq or an RFC 3339 time.
func parseFrom(v string) (int64, time.Time, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 1 {
			return 0, time.Time{}, fmt.Errorf("backfill: from %d: seqs begin at 1", n)
		}
		return n, time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("backfill: from %q: want a seq (5) or an RFC 3339 time (2026-01-02T03:04:05Z)", v)
	}
	return 0, t, nil
}

// history reads what delivery.ResolveStart needs through the Log.
type history struct{ log Log }

func (h history) LastSeq(ctx context.Context, tenant string) (int64, error) {
	hd, err := h.log.Head(ctx, tenant)
	if err != nil || hd == nil {
		return 0, err
	}
	return hd.LastSeq, nil
}

func (h history) OccurredAt(ctx context.Context, tenant string, seq int64) (time.Time, bool, error) {
	p, err := h.log.Events(ctx, tenant, seq-1, 1)
	if err != nil {
		return time.Time{}, false, err
	}
	if len(p.Events) == 0 || p.Errs[0] != nil || p.Events[0].Seq != seq {
		return time.Time{}, false, nil
	}
	at, err := time.Parse(time.RFC3339Nano, p.Events[0].OccurredAt)
	return at, err == nil, err
}

// pacer lets one event through per interval.
type pacer struct {
	every time.Duration
	next  time.Time
}

// deliveryReserve is kept back from the run's deadline for one delivery: a
// delivery cut off by the deadline would leave its claim pending under a
// lease, holding the next run back.
const deliveryReserve = 250 * time.Millisecond

// errOutOfTime: the next slot is too close to the run's deadline.
var errOutOfTime = errors.New("out of time")

func (p *pacer) wait(ctx context.Context) error {
	slot := time.Now()
	if p.next.After(slot) {
		slot = p.next
	}
	if dl, ok := ctx.Deadline(); ok && dl.Sub(slot) < deliveryReserve {
		return errOutOfTime
	}
	now := time.Now()
	if p.next.After(now) {
		t := time.NewTimer(p.next.Sub(now))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		now = p.next
	}
	p.next = now.Add(p.every)
	return nil
}

// runBackfill runs req within ctx's deadline.
func (r *Repairer) runBackfill(ctx context.Context, req BackfillRequest, sr *SourceReport) (*BackfillReport, error) {
	if r.cfg.Backfills == nil {
		return nil, errors.New("backfill: this dlq-repair has no backfill store (Config.Backfills)")
	}
	if err := req.validate(r.cfg.Subscriptions); err != nil {
		return nil, err
	}
	rep := &BackfillReport{Subscription: req.Subscription, Rate: req.Rate, Done: true, Tenants: []BackfillProgress{}}
	pace := &pacer{every: time.Duration(float64(time.Second) / req.Rate)}
	each := func(tenant string) {
		p := r.backfillTenant(ctx, req, tenant, pace)
		if p.Status != keys.BackfillDone {
			rep.Done = false
		}
		if p.Reason != "" && p.Reason != reasonOutOfTime {
			it := Item{Source: SourceBackfill, Outcome: Open, Tenant: tenant, Subscription: req.Subscription, Seq: p.Position + 1, Via: ViaLog,
				Reason: p.Reason, Error: p.Error, Records: p.Delivered}
			r.record(ctx, sr, it)
		}
		rep.Tenants = append(rep.Tenants, p)
	}
	if len(req.Tenants) > 0 {
		for _, t := range req.Tenants {
			each(t)
		}
		return rep, nil
	}
	cursor := ""
	for {
		ts, next, err := r.cfg.Log.Tenants(ctx, cursor, 0)
		if err != nil {
			rep.Done = false
			return rep, err
		}
		for _, t := range ts {
			if ctx.Err() != nil {
				rep.Done = false
				return rep, nil
			}
			each(t)
		}
		if next == "" {
			return rep, nil
		}
		cursor = next
	}
}

const reasonOutOfTime = "out of time: the next run resumes at the saved position"

// backfillTenant backfills one tenant and saves where it got to.
func (r *Repairer) backfillTenant(ctx context.Context, req BackfillRequest, tenant string, pace *pacer) (p BackfillProgress) {
	sub := req.Subscription
	p = BackfillProgress{Tenant: tenant, Status: keys.BackfillRunning}
	log := r.cfg.Logger.With(slog.String(obs.KeyTenant, tenant), slog.String(obs.KeySubscription, sub))
	fail := func(why string, err error) BackfillProgress {
		p.Reason = why
		if err != nil {
			p.Error = err.Error()
		}
		return p
	}
	marks, err := r.cfg.Deliverer.Watermarks(ctx, tenant)
	if err != nil {
		return fail("cannot read (or begin) the subscription's watermark", err)
	}
	w := marks[sub]
	to := w.StartSeq
	if to == 0 {
		to = w.Seq // all history: redeliver what is settled; claims answer what was delivered
	}
	saved, err := r.cfg.Backfills.Backfills(ctx, tenant)
	if err != nil {
		return fail("cannot read the saved backfill", err)
	}
	cur, found := saved[sub]
	from := int64(1)
	if req.From != "" {
		seq, at, _ := parseFrom(req.From)
		from = seq
		if seq == 0 {
			last, err := delivery.ResolveStart(ctx, history{r.cfg.Log}, tenant, delivery.SubStart{Subscription: sub, Declared: catalog.FromTime(at)})
			if err != nil {
				return fail("cannot find the first event at or after "+req.From, err)
			}
			from = last + 1
		}
	} else if found {
		from = cur.From
	}
	if !found || cur.From != from {
		cur = delivery.Backfill{Tenant: tenant, Subscription: sub, From: from, To: to, Position: from - 1, Status: keys.BackfillRunning}
	}
	p.From, p.To = cur.From, cur.To
	save := func() {
		if cur.Position >= cur.To {
			cur.Status = keys.BackfillDone
		}
		cur.UpdatedAt = r.cfg.Now()
		if err := r.cfg.Backfills.SaveBackfill(context.WithoutCancel(ctx), cur); err != nil && p.Reason == "" {
			p.Reason, p.Error = "cannot save the backfill's position", err.Error()
		}
		p.Position, p.Delivered, p.Skipped, p.Status = cur.Position, cur.Delivered, cur.Skipped, cur.Status
	}
	defer save()
	if cur.Position >= cur.To {
		return p
	}
	quarantined, err := r.cfg.Backfills.QuarantineList(ctx, tenant, sub)
	if err != nil {
		return fail("cannot read the quarantine list", err)
	}
	log.InfoContext(ctx, "backfill", slog.Int64(obs.KeyFrom, cur.From), slog.Int64(obs.KeyTo, cur.To), slog.Int64(obs.KeyPosition, cur.Position), slog.Float64(obs.KeyRatePerS, req.Rate))
	lastSave := time.Now()
	for cur.Position < cur.To {
		if ctx.Err() != nil {
			p.Reason = reasonOutOfTime
			return p
		}
		page, err := r.cfg.Log.Events(ctx, tenant, cur.Position, int32(min(100, cur.To-cur.Position)))
		if err != nil {
			return fail("cannot read the log", err)
		}
		if len(page.Raw) == 0 {
			return fail(fmt.Sprintf("the log ends before seq %d: run reconcile on the tenant", cur.Position+1), nil)
		}
		for i := range page.Raw {
			e := page.Events[i]
			switch {
			case page.Errs[i] != nil:
				return fail(fmt.Sprintf("the log's row after seq %d does not decode: run reconcile on the tenant", cur.Position), page.Errs[i])
			case e.Seq > cur.To:
				return p
			case e.Seq != cur.Position+1:
				return fail(fmt.Sprintf("the log has no seq %d: run reconcile on the tenant", cur.Position+1), nil)
			}
			if err := chain.CheckStored(&e); err != nil {
				return fail(fmt.Sprintf("the log's row at seq %d does not match its hash: run reconcile on the tenant", e.Seq), err)
			}
			if q, ok := quarantined[e.ID]; ok {
				log.WarnContext(ctx, "backfill passed over a quarantined event", slog.Int64(obs.KeySeq, e.Seq), slog.String(obs.KeyEventID, e.ID), slog.String(obs.KeyReason, q.Reason))
				cur.Skipped++
				cur.Position = e.Seq
				continue
			}
			if err := pace.wait(ctx); err != nil {
				p.Reason = reasonOutOfTime
				return p
			}
			if why, err := r.backfillOne(ctx, e, sub, &cur, &p); why == reasonOutOfTime {
				p.Reason = why
				return p
			} else if why != "" {
				return fail(fmt.Sprintf("seq %d: %s", e.Seq, why), err)
			}
			cur.Position = e.Seq
			if time.Since(lastSave) > time.Second {
				save()
				lastSave = time.Now()
			}
		}
	}
	return p
}

// backfillOne delivers e to sub and says why not when it could not.
func (r *Repairer) backfillOne(ctx context.Context, e envelope.Envelope, sub string, cur *delivery.Backfill, p *BackfillProgress) (string, error) {
	res, err := r.cfg.Deliverer.DeliverTo(ctx, e, sub)
	if err != nil {
		if ctx.Err() != nil {
			return reasonOutOfTime, nil
		}
		return "delivery failed on infrastructure", err
	}
	switch res.Outcome {
	case delivery.Completed:
		cur.Delivered++
		r.cfg.Metrics.Count(keys.MetricBackfilled, 1, "Subscription", sub)
	case delivery.AlreadyCompleted:
		p.Already++
	case delivery.DeadLettered, delivery.AlreadyDead:
		p.Dead++ // its dead letter is open: the dead_letters source replays it
	case delivery.Pending:
		return "another delivery holds the claim's lease; the next run resumes here", nil
	}
	return "", nil
}
