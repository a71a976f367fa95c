package repair

// Retirement: a DURABLE subscription the application no longer declares
// (Config.Declared, from the catalog: a subscription declared but not bound
// in dlq-repair is never retired) keeps its state for RetireGrace after the
// first run that found it undeclared, so a rollback of the application
// loses nothing; then the retire source removes it tenant by tenant
// (delivery.DynamoStore.RetireTenant) and, once every tenant is done, its
// start row. Each tenant retired is an INFO line and a SubscriptionRetired
// metric. A subscription declared again before then is forgotten (a new
// removal starts a new grace period).

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// SourceRetire is the source that retires undeclared subscriptions.
const SourceRetire = "retire"

// Retirer keeps the state of undeclared subscriptions (*delivery.DynamoStore).
type Retirer interface {
	// Watermarks reads every watermark row of a tenant, of subscriptions
	// bound here or not.
	Watermarks(ctx context.Context, tenant string) (map[string]delivery.Watermark, error)
	Undeclared(ctx context.Context) (map[string]delivery.Undeclared, error)
	MarkUndeclared(ctx context.Context, sub string, now time.Time) (delivery.Undeclared, error)
	Redeclared(ctx context.Context, sub string) error
	RetireTenant(ctx context.Context, tenant, sub string, now time.Time, limit int) (delivery.Retired, bool, error)
	RetireStart(ctx context.Context, sub string, now time.Time) error
	// StartedSubscriptions and the dead-letter index (DeadLetterTenants,
	// then each such tenant's DeadLetters) find a removed subscription
	// that left no watermark: only its start, or only dead letters.
	StartedSubscriptions(ctx context.Context) ([]string, error)
	DeadLetterTenants(ctx context.Context, cursor string, limit int) ([]string, string, error)
	DeadLetters(ctx context.Context, tenant, cursor string, limit int32) ([]delivery.DeadLetter, string, error)
}

var _ Retirer = (*delivery.DynamoStore)(nil)

// ParseRetireGrace reads the grace period from v, the value of
// keys.EnvRetireGrace: empty is the default (keys.RetireGraceHours).
func ParseRetireGrace(v string) (time.Duration, error) {
	if v == "" {
		return keys.RetireGraceHours * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < keys.MinRetireGraceSeconds*time.Second {
		return 0, fmt.Errorf("%s=%q: want a duration of at least %ds such as \"24h\" or \"90s\", or leave it unset for %dh",
			keys.EnvRetireGrace, v, keys.MinRetireGraceSeconds, keys.RetireGraceHours)
	}
	return d, nil
}

// Retiring is, in a run's report, a subscription the application no longer
// declares.
type Retiring struct {
	Subscription    string `json:"subscription"`
	UndeclaredSince string `json:"undeclared_since"`
	// RetireAfter is when the grace period ends; RetiredAt is set once
	// every tenant's state was removed.
	RetireAfter string `json:"retire_after"`
	RetiredAt   string `json:"retired_at,omitempty"`
	// Tenants is how many tenants' state this run removed.
	Tenants int `json:"tenants_retired"`
}

// retireLimit caps the dead letters resolved per tenant and subscription
// in one run; the rest are resolved on the next.
const retireLimit = 500

// drainRetire finds subscriptions with state that the application no
// longer declares (a start row, a dead letter or a watermark of one) and
// retires those undeclared for longer than the grace period. It reads
// starts with one Query, dead letters through the dead-letter index, and
// each tenant's watermarks with one Query: never a Scan.
func (r *Repairer) drainRetire(ctx context.Context, sr *SourceReport, rep *Report) (bool, error) {
	if r.cfg.Retirer == nil || r.cfg.Declared == nil {
		// Without the catalog nothing is known to be undeclared: nothing to do.
		r.cfg.Logger.InfoContext(ctx, "retirement of undeclared subscriptions is off: Config.Retirer and Config.Declared are not set")
		return true, nil
	}
	now := r.cfg.Now()
	declared := map[string]bool{}
	for _, s := range r.cfg.Declared {
		declared[s] = true
	}
	rows, err := r.cfg.Retirer.Undeclared(ctx)
	if err != nil {
		return false, err
	}
	for sub := range rows {
		if declared[sub] {
			if err := r.cfg.Retirer.Redeclared(ctx, sub); err != nil {
				return false, err
			}
			r.cfg.Logger.InfoContext(ctx, "subscription declared again: its retirement is cancelled", slog.String(obs.KeySubscription, sub))
			delete(rows, sub)
		}
	}
	mark := func(sub, found string) error {
		if declared[sub] {
			return nil
		}
		if _, ok := rows[sub]; ok {
			return nil
		}
		u, err := r.cfg.Retirer.MarkUndeclared(ctx, sub, now)
		if err != nil {
			return err
		}
		rows[sub] = u
		r.cfg.Logger.WarnContext(ctx, "a DURABLE subscription with state is no longer declared: dlq-repair retires it after the grace period",
			slog.String(obs.KeySubscription, sub), slog.String(obs.KeyFound, found), slog.Time(obs.KeyUndeclaredSince, u.Since),
			slog.Time(obs.KeyRetireAfter, u.Since.Add(r.cfg.RetireGrace)))
		return nil
	}
	started, err := r.cfg.Retirer.StartedSubscriptions(ctx)
	if err != nil {
		return false, err
	}
	// A start row of a subscription recorded retired came back (a stale
	// consumer began it again): it is removed again.
	startLeft := map[string]bool{}
	for _, sub := range started {
		startLeft[sub] = true
		if err := mark(sub, "its start"); err != nil {
			return false, err
		}
	}
	if err := r.deadLetterSubscriptions(ctx, func(sub string) error { return mark(sub, "its dead letters") }); err != nil {
		return false, err
	}
	due := func(u delivery.Undeclared) bool { return now.Sub(u.Since) >= r.cfg.RetireGrace }
	retired := map[string]int{}
	complete := true
	cursor := ""
	for {
		if ctx.Err() != nil {
			complete = false
			break
		}
		tenants, next, err := r.cfg.Log.Tenants(ctx, cursor, 100)
		if err != nil {
			return false, err
		}
		for _, tenant := range tenants {
			if ctx.Err() != nil {
				complete = false
				break
			}
			marks, err := r.cfg.Retirer.Watermarks(ctx, tenant)
			if err != nil {
				return false, err
			}
			for sub := range marks {
				if err := mark(sub, "its watermark of tenant "+tenant); err != nil {
					return false, err
				}
			}
			for sub, u := range rows {
				_, marked := marks[sub]
				// A retired subscription is done unless state of it came
				// back (a stale consumer).
				if !due(u) || (!u.RetiredAt.IsZero() && !marked) {
					continue
				}
				got, done, err := r.cfg.Retirer.RetireTenant(ctx, tenant, sub, now, retireLimit)
				it := Item{Source: SourceRetire, Tenant: tenant, Subscription: sub}
				if err != nil {
					it.Outcome, it.Reason, it.Error = Open, "cannot retire the subscription's state", err.Error()
					r.record(ctx, sr, it)
					complete = false
					continue
				}
				if !done {
					complete = false
				}
				if !got.Any() {
					continue
				}
				retired[sub]++
				it.Outcome, it.Reason = Fixed, "retired: "+got.String()
				r.record(ctx, sr, it)
				r.cfg.Metrics.Count(keys.MetricSubscriptionRetired, 1, "Subscription", sub)
				r.cfg.Logger.InfoContext(ctx, "retired a subscription's state of a tenant", slog.String(obs.KeySubscription, sub),
					slog.String(obs.KeyTenant, tenant), slog.String(obs.KeyRemoved, got.String()), slog.Time(obs.KeyUndeclaredSince, u.Since))
			}
		}
		if next == "" || !complete {
			break
		}
		cursor = next
	}
	names := make([]string, 0, len(rows))
	for sub := range rows {
		names = append(names, sub)
	}
	slices.Sort(names)
	for _, sub := range names {
		u := rows[sub]
		if complete && due(u) && (u.RetiredAt.IsZero() || startLeft[sub]) {
			if err := r.cfg.Retirer.RetireStart(ctx, sub, now); err != nil {
				return false, err
			}
			u.RetiredAt = now
			r.cfg.Logger.InfoContext(ctx, "subscription retired: every tenant's state removed, and its start", slog.String(obs.KeySubscription, sub))
		}
		ri := Retiring{Subscription: sub, UndeclaredSince: envelope.FormatTime(u.Since), RetireAfter: envelope.FormatTime(u.Since.Add(r.cfg.RetireGrace)),
			Tenants: retired[sub]}
		if !u.RetiredAt.IsZero() {
			ri.RetiredAt = envelope.FormatTime(u.RetiredAt)
		}
		rep.Retiring = append(rep.Retiring, ri)
	}
	if len(rep.Retiring) > 0 {
		r.cfg.Logger.InfoContext(ctx, "undeclared subscriptions", slog.Any(obs.KeyRetiring, rep.Retiring), slog.Bool(obs.KeyComplete, complete))
	}
	return complete, nil
}

// deadLetterSubscriptions calls each with every subscription that has an
// open dead letter, once: the tenants from the dead-letter index, then a
// Query of each one's dead letters.
func (r *Repairer) deadLetterSubscriptions(ctx context.Context, each func(sub string) error) error {
	seen := map[string]bool{}
	cursor := ""
	for {
		tenants, next, err := r.cfg.Retirer.DeadLetterTenants(ctx, cursor, 100)
		if err != nil {
			return err
		}
		for _, tenant := range tenants {
			page := ""
			for {
				dls, more, err := r.cfg.Retirer.DeadLetters(ctx, tenant, page, 100)
				if err != nil {
					return err
				}
				for _, dl := range dls {
					if !seen[dl.Subscription] {
						seen[dl.Subscription] = true
						if err := each(dl.Subscription); err != nil {
							return err
						}
					}
				}
				if more == "" {
					break
				}
				page = more
			}
		}
		if next == "" {
			return nil
		}
		cursor = next
	}
}

// String is a one-line summary.
func (ri Retiring) String() string {
	if ri.RetiredAt != "" {
		return fmt.Sprintf("%s retired at %s", ri.Subscription, ri.RetiredAt)
	}
	return fmt.Sprintf("%s undeclared since %s, retired after %s", ri.Subscription, ri.UndeclaredSince, ri.RetireAfter)
}
