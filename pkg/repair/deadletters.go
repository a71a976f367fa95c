package repair

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/delivery"
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

// deadLetterTenants finds the tenants with dead letters: a Scan of the state
// table for dead#<tenant> partitions (keys only). It reads the whole state
// table; see the report to the lead for a cheaper index.
func (r *Repairer) deadLetterTenants(ctx context.Context) ([]string, bool, error) {
	seen := map[string]bool{}
	done, err := r.scan(ctx, &dynamodb.ScanInput{
		TableName:                 aws.String(r.cfg.StateTable),
		ProjectionExpression:      aws.String("#pk"),
		FilterExpression:          aws.String("begins_with(#pk, :dead)"),
		ExpressionAttributeNames:  map[string]string{"#pk": keys.AttrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":dead": &types.AttributeValueMemberS{Value: keys.StateDeadPrefix}},
	}, func(it map[string]types.AttributeValue) {
		if pk, ok := it[keys.AttrPK].(*types.AttributeValueMemberS); ok {
			seen[strings.TrimPrefix(pk.Value, keys.StateDeadPrefix)] = true
		}
	})
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	sort.Strings(out)
	return out, done, err
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
