package repair

// The unsettled source: whatever a DURABLE subscription's delivery watermark
// leaves between it and the tenant's head is redelivered from the log, in
// seq order, whatever lost it (a Pipe filter mistake, an expired DLQ
// message, a bug). Nothing here trusts a message or a time window: the
// watermark says where settled ends and the head where the log ends.
//
// A watermark only lags while the lane is still carrying the events, so a
// tenant is swept only when its first unsettled event is older than
// Config.UnsettledAfter (default 5 min; Request.UnsettledAfterSeconds for one
// run): sweeping events still on their way would deliver them ahead of the
// FIFO queue, out of order. Claims keep every delivery once either way.
// occurred_at only decides when to look, never what is found: a skewed
// clock makes a sweep early or late, never incomplete.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/fourlanes/fourlanes/pkg/chain"
)

// sweep is what sweeping one tenant did.
type sweep struct {
	head      int64
	from      int64 // the lowest watermark before the sweep
	low       int64 // the lowest watermark after it
	delivered int
	waiting   bool // the first unsettled event is younger than the threshold: not swept
	marks     map[string]int64
	why       string // non-empty: the sweep stopped short of the head
	err       error
}

func (s sweep) settled() bool { return s.why == "" && !s.waiting && s.low >= s.head }

// sweepTenant redelivers tenant's events above its lowest watermark, up to
// the head read now, and moves the watermarks. after is the minimum age of
// the first unsettled event (0: sweep at once).
func (r *Repairer) sweepTenant(ctx context.Context, tenant string, after time.Duration) (sw sweep) {
	head, err := r.cfg.Log.Head(ctx, tenant)
	if err != nil {
		sw.why, sw.err = "cannot read the tenant's head", err
		return sw
	}
	if head == nil {
		return sw
	}
	sw.head = head.LastSeq
	marks, err := r.cfg.Deliverer.Watermarks(ctx, tenant)
	if err != nil {
		sw.why, sw.err = "cannot read the delivery watermarks", err
		return sw
	}
	sw.marks = map[string]int64{}
	sw.from = sw.head
	for sub, w := range marks {
		sw.marks[sub] = w.Seq
		sw.from = min(sw.from, w.Seq)
	}
	sw.low = sw.from
	if sw.from >= sw.head {
		return sw
	}
	var settled []int64
	defer func() {
		moved, err := r.cfg.Deliverer.Settled(context.WithoutCancel(ctx), tenant, settled)
		for sub, to := range moved {
			sw.marks[sub] = max(sw.marks[sub], to)
		}
		if err != nil && sw.why == "" {
			sw.why, sw.err = "delivered, but the watermarks could not be moved", err
		}
		sw.low = sw.head
		for _, w := range sw.marks {
			sw.low = min(sw.low, w)
		}
		if sw.why == "" && sw.low < sw.head && !sw.waiting {
			sw.why = "a watermark did not reach the head (a gap in the log, or a subscription's own gap below the lowest watermark)"
		}
	}()
	next := sw.from + 1
	for next <= sw.head {
		if ctx.Err() != nil {
			sw.why = "out of time"
			return sw
		}
		p, err := r.cfg.Log.Events(ctx, tenant, next-1, int32(min(100, sw.head-next+1)))
		if err != nil {
			sw.why, sw.err = "cannot read the log", err
			return sw
		}
		if len(p.Raw) == 0 {
			sw.why = fmt.Sprintf("the log ends before the head (seq %d): run reconcile on the tenant", next)
			return sw
		}
		for i := range p.Raw {
			if p.Errs[i] != nil {
				sw.why, sw.err = fmt.Sprintf("the log's row after seq %d does not decode: run reconcile on the tenant", next-1), p.Errs[i]
				return sw
			}
			e := p.Events[i]
			if e.Seq > sw.head {
				return sw
			}
			if e.Seq != next {
				sw.why = fmt.Sprintf("the log has no seq %d: run reconcile on the tenant", next)
				return sw
			}
			if err := chain.CheckStored(&e); err != nil {
				var ie *chain.IntegrityError
				if errors.As(err, &ie) && ie.Reason == chain.ReasonMalformed {
					sw.why = fmt.Sprintf("the log's row at seq %d is malformed: run reconcile on the tenant", e.Seq)
				} else {
					sw.why = fmt.Sprintf("the log's row at seq %d does not match its hash: run reconcile on the tenant", e.Seq)
				}
				sw.err = err
				return sw
			}
			if e.Seq == sw.from+1 {
				at, err := time.Parse(time.RFC3339Nano, e.OccurredAt)
				if err == nil && after > 0 && r.cfg.Now().Sub(at) < after {
					sw.waiting = true // still on its way through the lane
					return sw
				}
				if err == nil && r.cfg.Now().Sub(at) > r.cfg.ClaimRetention {
					// Its claims may have expired: a delivered event could not
					// be told from a lost one, and would run again.
					sw.why = fmt.Sprintf("seq %d occurred %s, before the claims' retention (%s): delivered and lost cannot be told apart; check the subscription's effects, then set its watermark", e.Seq, e.OccurredAt, r.cfg.ClaimRetention)
					return sw
				}
			}
			_, why, err := r.deliver(ctx, e)
			if why != "" {
				sw.why, sw.err = fmt.Sprintf("seq %d: %s", e.Seq, why), err
				return sw
			}
			sw.delivered++
			settled = append(settled, e.Seq)
			next++
		}
	}
	return sw
}

// drainUnsettled sweeps tenants (every tenant of the log when none are
// named) and reports one item per tenant it swept.
func (r *Repairer) drainUnsettled(ctx context.Context, sr *SourceReport, tenants []string, after time.Duration) (bool, error) {
	complete := true
	each := func(tenant string) {
		sw := r.sweepTenant(ctx, tenant, after)
		if sw.waiting || (sw.delivered == 0 && sw.why == "" && sw.from >= sw.head) {
			return // settled, or still on its way
		}
		it := Item{Source: SourceUnsettled, Tenant: tenant, Seq: sw.from + 1, Via: ViaLog, Records: sw.delivered, Subscriptions: marksReport(sw.marks)}
		if sw.err != nil {
			it.Error = sw.err.Error()
		}
		if sw.settled() {
			it.Outcome, it.Reason = Fixed, fmt.Sprintf("redelivered seq %d..%d from the log; every DURABLE subscription is settled through the head", sw.from+1, sw.head)
		} else {
			it.Outcome, it.Reason = Open, sw.why
			complete = false
		}
		r.record(ctx, sr, it)
	}
	if len(tenants) > 0 {
		for _, t := range tenants {
			if ctx.Err() != nil {
				return false, nil
			}
			each(t)
		}
		return complete, nil
	}
	cursor := ""
	for {
		if ctx.Err() != nil {
			return false, nil
		}
		ts, next, err := r.cfg.Log.Tenants(ctx, cursor, 0)
		if err != nil {
			return false, err
		}
		for _, t := range ts {
			if ctx.Err() != nil {
				return false, nil
			}
			each(t)
		}
		if next == "" {
			return complete, nil
		}
		cursor = next
	}
}

// sweepAll sweeps every tenant at once (no age threshold) for a Pipe DLQ
// message whose records the stream no longer has: the message proves a
// batch was lost but not which tenants' events it held. It answers the
// events delivered and, when some tenant is not settled through the head
// read during the sweep (which bounds every event committed before the
// message was sent), why: the message must then stay.
func (r *Repairer) sweepAll(ctx context.Context) (int, string, error) {
	n := 0
	var errs []error
	var open []string
	cursor := ""
	for {
		if ctx.Err() != nil {
			return n, "out of time before every tenant was swept", nil
		}
		ts, next, err := r.cfg.Log.Tenants(ctx, cursor, 0)
		if err != nil {
			return n, "", err
		}
		for _, t := range ts {
			sw := r.sweepTenant(ctx, t, 0)
			n += sw.delivered
			if !sw.settled() {
				open = append(open, t+": "+sw.why)
				if sw.err != nil {
					errs = append(errs, fmt.Errorf("tenant %s: %w", t, sw.err))
				}
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(open) > 0 {
		return n, fmt.Sprintf("not every event is settled, so the lost batch may still hold one: %v", open), errors.Join(errs...)
	}
	return n, "", nil
}

func marksReport(m map[string]int64) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := map[string]string{}
	for sub, w := range m {
		out[sub] = "watermark " + strconv.FormatInt(w, 10)
	}
	return out
}
