package repair

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// drainDeadLetters replays every open dead letter of tenants (all tenants
// with one when empty).
func (r *Repairer) drainDeadLetters(ctx context.Context, sr *SourceReport, tenants []string) (bool, error) {
	listed := true
	if len(tenants) == 0 {
		var err error
		tenants, listed, err = r.deadLetterTenants(ctx)
		if err != nil {
			return false, err
		}
		// If the listing did not finish, replay what it found; the run is
		// then incomplete.
	}
	for _, tenant := range tenants {
		cursor := ""
		for {
			if ctx.Err() != nil {
				return false, nil
			}
			dls, next, err := r.cfg.DeadLetters.DeadLetters(ctx, tenant, cursor, 100)
			if err != nil {
				return false, err
			}
			for _, dl := range dls {
				if ctx.Err() != nil {
					return false, nil
				}
				r.replay(ctx, sr, dl)
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
	return listed, nil
}

// deadLetterTenants finds the tenants with dead letters through the state
// table's dead-letter index: one Query per tenant with dead letters, never
// a read of the table.
func (r *Repairer) deadLetterTenants(ctx context.Context) ([]string, bool, error) {
	var out []string
	cursor := ""
	for {
		if ctx.Err() != nil {
			return out, false, nil
		}
		ts, next, err := r.cfg.DeadLetters.DeadLetterTenants(ctx, cursor, 100)
		out = append(out, ts...)
		if err != nil {
			return out, false, err
		}
		if next == "" {
			return out, true, nil
		}
		cursor = next
	}
}

// backoff is how long after its last failure a dead letter that failed
// replays times is replayed again.
func (r *Repairer) backoff(replays int) time.Duration {
	d := r.cfg.ReplayBackoff
	for i := 0; i < replays && d < r.cfg.MaxReplayBackoff; i++ {
		d *= 2
	}
	return min(d, r.cfg.MaxReplayBackoff)
}

// replay re-reads a dead letter's event from the log and replays its one
// subscription.
func (r *Repairer) replay(ctx context.Context, sr *SourceReport, dl delivery.DeadLetter) {
	it := Item{Source: SourceDeadLetters, Tenant: dl.Tenant, EventID: dl.EventID, Seq: dl.Seq, Subscription: dl.Subscription, Via: ViaLog}
	open := func(reason string, err error) {
		it.Outcome, it.Reason = Open, reason
		if err != nil {
			it.Error = err.Error()
		}
		r.record(ctx, sr, it)
	}
	if r.cfg.Backfills != nil {
		q, err := r.cfg.Backfills.QuarantineList(ctx, dl.Tenant, dl.Subscription)
		if err != nil {
			open("cannot read the quarantine list", err)
			return
		}
		if qe, ok := q[dl.EventID]; ok {
			open(fmt.Sprintf("quarantined (%s): not replayed until an operator releases it", qe.Reason), nil)
			return
		}
		// A dead letter awaiting a decision on an effect of unknown outcome
		// is bounded by that decision (fourlanes effects), not by a cap.
		if dl.Replays >= r.cfg.ReplayCap && dl.Effect == "" {
			reason := fmt.Sprintf("failed %d replays (the cap); last error: %s", dl.Replays, dl.Error)
			err := r.cfg.Backfills.Quarantine(ctx, delivery.Quarantined{Tenant: dl.Tenant, Subscription: dl.Subscription, EventID: dl.EventID,
				Seq: dl.Seq, Reason: reason, At: r.cfg.Now()})
			if err != nil {
				open("cannot quarantine the dead letter after its cap of replays", err)
				return
			}
			r.cfg.Metrics.Count(keys.MetricDeadLetterQuarantined, 1, "Subscription", dl.Subscription)
			open("quarantined now: "+reason, nil)
			return
		}
	}
	// It is replayed at once after the decision, without a backoff.
	if wait := r.backoff(dl.Replays); dl.Replays > 0 && dl.Effect == "" && r.cfg.Now().Sub(dl.DeadAt) < wait {
		open(fmt.Sprintf("failed %d replays; the next is due %s (backoff %s)", dl.Replays, envelope.FormatTime(dl.DeadAt.Add(wait)), wait), nil)
		return
	}
	e, err := r.readEvent(ctx, dl.Tenant, dl.Seq)
	if err != nil {
		open("cannot re-read the event from the log", err)
		return
	}
	if e.ID != dl.EventID {
		open(fmt.Sprintf("the dead letter names event %s at seq %d, but the log holds %s there (run reconcile on the tenant)", dl.EventID, dl.Seq, e.ID), nil)
		return
	}
	res, err := r.cfg.Deliverer.Replay(ctx, e, dl.Subscription)
	it.Subscriptions = map[string]string{dl.Subscription: string(res.Outcome)}
	switch {
	case errors.Is(err, delivery.ErrUnknownSubscription):
		open("the subscription is not bound in dlq-repair; bind its module there", err)
	case errors.Is(err, delivery.ErrNotDead):
		open("the dead letter's claim is not dead (inconsistent state)", err)
	case err != nil:
		open("replay failed on infrastructure", err)
	case res.Outcome == delivery.Completed:
		it.Outcome, it.Reason = Fixed, "replayed"
		r.record(ctx, sr, it)
	case res.Outcome == delivery.DeadLettered:
		open("the subscription failed again; it stays dead-lettered", res.Err)
	case res.Outcome == delivery.Pending:
		open("another delivery holds the claim's lease; try again later", nil)
	default:
		open("replay answered "+string(res.Outcome)+"; the dead-letter row remains", res.Err)
	}
}
