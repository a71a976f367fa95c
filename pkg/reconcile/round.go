package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// Round is where a scheduled round of one mode stands: it reconciles every
// tenant once, across as many scheduled invocations as it takes.
type Round struct {
	Mode Mode
	// Cursor is where the next invocation resumes (an All cursor); "" at
	// the start of a round.
	Cursor string
	// Started is when the round began; zero between rounds (the next
	// invocation starts one).
	Started time.Time
	// Tenants is the number of tenants the round has completed so far.
	Tenants int64
	// Completed is when the last round completed, and LastTenants how many
	// tenants it covered.
	Completed   time.Time
	LastTenants int64
	// Version is bumped on every save; a save is conditional on it.
	Version int64
}

// ErrRoundMoved: another invocation saved the round since it was read.
var ErrRoundMoved = errors.New("round moved")

// Rounds keeps scheduled rounds. *DynamoState implements it.
type Rounds interface {
	// Round returns the mode's round, or a zero Round (Version 0) when
	// none was ever saved.
	Round(ctx context.Context, mode Mode) (Round, error)
	// SaveRound stores next (its Version one past prev's) unless the stored
	// round is no longer at prev.Version: then ErrRoundMoved.
	SaveRound(ctx context.Context, prev, next Round) error
}

var _ Rounds = (*DynamoState)(nil)

func roundKey(mode Mode) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{keys.AttrPK: sAV(keys.StateRoundPrefix + string(mode)), keys.AttrSK: sAV(keys.StateRoundSK)}
}

// Round reads the round row (layout in pkg/keys).
func (d *DynamoState) Round(ctx context.Context, mode Mode) (Round, error) {
	out, err := d.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.table), Key: roundKey(mode), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Round{}, fmt.Errorf("read %s round: %w", mode, err)
	}
	rd := Round{Mode: mode}
	it := out.Item
	if it == nil {
		return rd, nil
	}
	rd.Cursor = strAttr(it, keys.AttrCursor)
	for name, dst := range map[string]*time.Time{keys.AttrRoundStarted: &rd.Started, keys.AttrCompletedAt: &rd.Completed} {
		if s := strAttr(it, name); s != "" {
			if *dst, err = time.Parse(time.RFC3339Nano, s); err != nil {
				return Round{}, fmt.Errorf("%s round: %s %q: %w", mode, name, s, err)
			}
		}
	}
	for name, dst := range map[string]*int64{keys.AttrRoundTenants: &rd.Tenants, keys.AttrRoundLastDone: &rd.LastTenants, keys.AttrRoundVersion: &rd.Version} {
		if _, ok := it[name]; !ok {
			continue
		}
		if *dst, err = numAttr(it, name); err != nil {
			return Round{}, fmt.Errorf("%s round: %w", mode, err)
		}
	}
	return rd, nil
}

// SaveRound writes next if the row is still at prev.Version (absent for
// Version 0).
func (d *DynamoState) SaveRound(ctx context.Context, prev, next Round) error {
	it := roundKey(next.Mode)
	it[keys.AttrMode] = sAV(string(next.Mode))
	if next.Cursor != "" {
		it[keys.AttrCursor] = sAV(next.Cursor)
	}
	if !next.Started.IsZero() {
		it[keys.AttrRoundStarted] = sAV(next.Started.UTC().Format(time.RFC3339Nano))
	}
	if !next.Completed.IsZero() {
		it[keys.AttrCompletedAt] = sAV(next.Completed.UTC().Format(time.RFC3339Nano))
	}
	it[keys.AttrRoundTenants] = nAV(next.Tenants)
	it[keys.AttrRoundLastDone] = nAV(next.LastTenants)
	it[keys.AttrRoundVersion] = nAV(next.Version)
	it[keys.AttrUpdatedAt] = sAV(d.now().UTC().Format(time.RFC3339Nano))
	in := &dynamodb.PutItemInput{TableName: aws.String(d.table), Item: it,
		ExpressionAttributeNames: map[string]string{"#v": keys.AttrRoundVersion}}
	if prev.Version == 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(#v)")
	} else {
		in.ConditionExpression = aws.String("#v = :v")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": nAV(prev.Version)}
	}
	_, err := d.db.PutItem(ctx, in)
	if ccf := (*types.ConditionalCheckFailedException)(nil); errors.As(err, &ccf) {
		return fmt.Errorf("save %s round at version %d: %w", next.Mode, prev.Version, ErrRoundMoved)
	}
	if err != nil {
		return fmt.Errorf("save %s round: %w", next.Mode, err)
	}
	return nil
}

// ScheduledRequest asks for a scheduled invocation's share of a round.
type ScheduledRequest struct {
	Mode  Mode // "" means Incremental
	Limit int  // tenants per page (default 20)
	// ResumeOnly continues a round in progress and never starts one: a
	// schedule that runs more often than rounds should start (the full
	// walk's hourly continuation of its daily round).
	ResumeOnly bool
}

// ScheduledResult is what one scheduled invocation did.
type ScheduledResult struct {
	Mode Mode `json:"mode"`
	// RoundStarted is when the round this invocation worked on began.
	RoundStarted time.Time `json:"round_started"`
	// Idle: ResumeOnly, and no round was in progress; nothing was done.
	Idle bool `json:"idle,omitempty"`
	// RoundComplete: every tenant is reconciled; the next invocation
	// starts a new round.
	RoundComplete bool `json:"round_complete"`
	// RoundTenants is the number of tenants the round has completed so far.
	RoundTenants int64 `json:"round_tenants"`
	// Tenants are those this invocation completed, in order.
	Tenants []string `json:"tenants"`
	// Broken are those of Tenants whose chain is broken.
	Broken []string `json:"broken"`
	// Unsettled are those of Tenants with a DURABLE subscription behind.
	Unsettled  []string `json:"unsettled"`
	Pages      int      `json:"pages"`
	Reads      int      `json:"reads"`
	StateReads int      `json:"state_reads"`
	// Saved is false when another invocation moved the round meanwhile:
	// this one's progress is dropped (its walks were still done).
	Saved bool `json:"saved"`
}

// Scheduled does a scheduled invocation's share of the mode's round: it
// resumes from the round's stored cursor (or starts a new round), walks
// pages of tenants until its budget (the deadline less the reserve) is
// spent or the round is complete, and stores the new cursor, or clears it
// when the round completed. A tenant whose walk ran out of time is resumed,
// from its walk row, by the next invocation and counted once, when done.
func (r *Reconciler) Scheduled(ctx context.Context, req ScheduledRequest) (ScheduledResult, error) {
	if r.cfg.Rounds == nil {
		return ScheduledResult{}, errors.New("reconcile: Config.Rounds is nil: scheduled rounds need the state table")
	}
	mode := req.Mode
	if mode == "" {
		mode = Incremental
	}
	prev, err := r.cfg.Rounds.Round(ctx, mode)
	if err != nil {
		return ScheduledResult{}, err
	}
	if prev.Started.IsZero() && req.ResumeOnly {
		return ScheduledResult{Mode: mode, Idle: true, Tenants: []string{}, Broken: []string{}, Unsettled: []string{}}, nil
	}
	now := r.cfg.Now()
	next := prev
	next.Version = prev.Version + 1
	if next.Started.IsZero() {
		next.Started, next.Cursor, next.Tenants = now, "", 0
		r.log.InfoContext(ctx, "scheduled round started", slog.String(obs.KeyMode, string(mode)))
	}
	res := ScheduledResult{Mode: mode, RoundStarted: next.Started, Tenants: []string{}, Broken: []string{}, Unsettled: []string{}}
	b := r.budget(ctx, 0)
	cur := next.Cursor
	var walkErr error // saved progress first, then returned
	for !res.RoundComplete && !b.timeUp() {
		page, err := r.all(ctx, AllRequest{Mode: mode, Cursor: cur, Limit: req.Limit}, b)
		if errors.Is(err, ErrBadCursor) && cur != "" {
			// A cursor from an older release: the round resumes from the start.
			r.log.WarnContext(ctx, "scheduled round cursor not understood; resuming the round from the first tenant",
				slog.String(obs.KeyMode, string(mode)), obs.Err(err))
			cur = ""
			continue
		}
		if err != nil {
			// Keep the pages done: the next invocation resumes at the page
			// that failed. One that fails every time stalls the round, and
			// the stalled-round alarm says so.
			walkErr = err
			break
		}
		res.Pages++
		res.Reads += page.Reads
		res.StateReads += page.StateReads
		for _, t := range page.Tenants {
			if !t.Complete {
				continue
			}
			res.Tenants = append(res.Tenants, t.Tenant)
			if t.ChainIntact != nil && !*t.ChainIntact {
				res.Broken = append(res.Broken, t.Tenant)
			}
			for _, s := range t.Subscriptions {
				if s.Unsettled > 0 {
					res.Unsettled = append(res.Unsettled, t.Tenant)
					break
				}
			}
		}
		if page.Complete {
			res.RoundComplete = true
			break
		}
		cur = *page.Cursor
	}
	next.Tenants += int64(len(res.Tenants))
	res.RoundTenants = next.Tenants
	end := r.cfg.Now()
	age := end.Sub(next.Started)
	if res.RoundComplete {
		next.Cursor, next.Started, next.Completed, next.LastTenants, next.Tenants = "", time.Time{}, end, next.Tenants, 0
	} else {
		next.Cursor = cur
	}
	switch err := r.cfg.Rounds.SaveRound(ctx, prev, next); {
	case errors.Is(err, ErrRoundMoved):
		// Two invocations overlapped (a retry beside the next run): the one
		// that saved first keeps the round; this one's walks were not wasted
		// (checkpoints moved), only its place in the round is dropped.
		r.log.WarnContext(ctx, "scheduled round moved by another invocation; this invocation's progress is not saved",
			slog.String(obs.KeyMode, string(mode)), obs.Err(err))
		return res, walkErr
	case err != nil:
		return res, err
	}
	res.Saved = true
	r.cfg.Metrics.Count(keys.MetricRoundAge, int(age.Seconds()), "Mode", string(mode))
	r.cfg.Metrics.Count(keys.MetricRoundTenants, int(res.RoundTenants), "Mode", string(mode))
	attrs := []any{slog.String(obs.KeyMode, string(mode)), slog.Time(obs.KeyRoundStarted, res.RoundStarted),
		slog.Int64(obs.KeyRoundAgeS, int64(age.Seconds())), slog.Int64(obs.KeyRoundTenants, res.RoundTenants),
		slog.Int(obs.KeyTenants, len(res.Tenants)), slog.Int(obs.KeyBroken, len(res.Broken)), slog.Int(obs.KeyPages, res.Pages)}
	switch {
	case walkErr != nil:
		r.log.ErrorContext(ctx, "scheduled round stopped by an error; its progress so far is saved",
			append(attrs, obs.Err(walkErr))...)
		return res, walkErr
	case res.RoundComplete:
		r.cfg.Metrics.Count(keys.MetricRoundsCompleted, 1, "Mode", string(mode))
		r.log.InfoContext(ctx, "scheduled round completed", attrs...)
	default:
		r.log.InfoContext(ctx, "scheduled round in progress; the next scheduled invocation resumes it", attrs...)
	}
	return res, nil
}
