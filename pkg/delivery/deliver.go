package delivery

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tracing"
)

// Config configures a Deliverer. Zero values take the defaults.
type Config struct {
	Store   Store // required
	Logger  *slog.Logger
	Metrics *obs.Metrics
	// Attempts is how many times a handler runs in one delivery before its
	// subscription is dead-lettered (default 3). Backoff is the pause after
	// the first failure, doubling after each (default 100 ms).
	Attempts int
	Backoff  time.Duration
	// DefaultLease is the lease when the context has no deadline (default
	// 5 min); LeaseGrace is added to the remaining time (default 10 s).
	DefaultLease time.Duration
	LeaseGrace   time.Duration
	// Retention is how long a completed claim is kept (default 30 days; see
	// the package doc for why).
	Retention time.Duration
	Now       func() time.Time
	// Watermarks keeps the delivery watermarks' checkpoints, which Settled
	// (dlq-repair) writes forward (default: the Store, or the store a
	// BatchedStore wraps, when it is a WatermarkStore). Delivery writes
	// none.
	Watermarks WatermarkStore
	// Effects records the handlers' side effects (effect.Do); nil leaves
	// them unbound (effect.Do then fails with effect.ErrNotBound).
	Effects *effect.Recorder
	// Log, when set, makes Deliver refuse an envelope that is not in the
	// log: absent at its (tenant, seq), or there with another hash
	// (NotInLogError); and one the chain does not cover: above its chain's
	// head, or with a prev_hash that is not the hash of the event before
	// (NotCoveredError). The consumer and dlq-repair set it.
	Log LogReader
	// Events, when set, gives every run of a handler a follow-on emitter
	// (eventstore.EmitterFrom): the log bound to the event's tenant, its
	// emits caused by the event and keyed per (event, subscription, emit),
	// so a handler run again never emits twice. nil leaves handlers
	// without one (eventstore.ErrNoEmitter).
	Events FollowOnBinder
	// Starts records the subscriptions' starts and begins watermarks at
	// them (default: the Store, or the store a BatchedStore wraps, when it
	// is a StartStore). Without one every subscription keeps all history.
	Starts StartStore
	// History resolves a start for a tenant (default: the unwrapped Store
	// when it is a DynamoStore with WithLog).
	History History
}

// FollowOnBinder binds a follow-on emitter for one run of subscription's
// handler on e (*eventstore.Store).
type FollowOnBinder interface {
	BindFollowOn(ctx context.Context, e envelope.Envelope, subscription string) context.Context
}

var _ FollowOnBinder = (*eventstore.Store)(nil)

// Deliverer is the DURABLE dispatcher. It is safe for concurrent use.
type Deliverer struct {
	reg     *catalog.Registry
	cfg     Config
	marks   WatermarkStore
	walk    *WatermarkReader // derives watermarks (a DynamoStore WithLog that keeps them)
	starts  StartStore
	history History
	born    time.Time // when this Deliverer went live: a new subscription's default start

	startCache   sync.Map // subscription → SubStart
	begun        sync.Map // [tenant, subscription] → true: its watermark was looked at
	tenantStarts sync.Map // [tenant, subscription] → the seq its watermark began at (live starts)
}

// New returns the DURABLE dispatcher over reg.
func New(reg *catalog.Registry, cfg Config) (*Deliverer, error) {
	if cfg.Store == nil {
		return nil, errors.New("delivery: Config.Store is nil; use NewDynamoStore on the state table")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 3
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 100 * time.Millisecond
	}
	if cfg.DefaultLease <= 0 {
		cfg.DefaultLease = 5 * time.Minute
	}
	if cfg.LeaseGrace <= 0 {
		cfg.LeaseGrace = 10 * time.Second
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 30 * 24 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	inner := cfg.Store
	if b, ok := inner.(*BatchedStore); ok {
		inner = b.Store
	}
	marks := cfg.Watermarks
	if marks == nil {
		marks, _ = inner.(WatermarkStore)
	}
	starts := cfg.Starts
	if starts == nil {
		starts, _ = inner.(StartStore)
	}
	history := cfg.History
	if ds, ok := inner.(*DynamoStore); ok && history == nil && ds.log != "" {
		history = ds
	}
	if marks == nil || history == nil {
		// A start lives in the watermarks and is resolved from the log:
		// without both, every subscription keeps all history.
		starts = nil
	}
	var walk *WatermarkReader
	if ds, ok := inner.(*DynamoStore); ok && ds.log != "" && marks == WatermarkStore(ds) {
		r, err := NewWatermarkReader(ds, reg.Catalog())
		if err != nil {
			return nil, err
		}
		walk = r.Consistent()
	}
	return &Deliverer{reg: reg, cfg: cfg, marks: marks, walk: walk, starts: starts, history: history, born: cfg.Now()}, nil
}

// Outcome is what happened to one subscription in one delivery.
type Outcome string

// Outcomes.
const (
	Completed        Outcome = "completed"         // the handler ran and the claim is completed
	AlreadyCompleted Outcome = "already_completed" // an earlier delivery completed it; skipped
	Pending          Outcome = "pending"           // another delivery holds an unexpired lease: retry later
	DeadLettered     Outcome = "dead_lettered"     // failed now; dead, with a dead-letter row
	AlreadyDead      Outcome = "already_dead"      // dead-lettered earlier; parked until Replay
	Failed           Outcome = "failed"            // infrastructure error; retry the message
	BeforeStart      Outcome = "before_start"      // committed before the subscription's start: not delivered (backfill does)
	NotMatched       Outcome = "not_matched"       // DeliverTo: the subscription's types do not match the event's
)

// SubResult is one subscription's outcome.
type SubResult struct {
	Subscription string
	Outcome      Outcome
	Attempts     int   // handler runs in this delivery
	Err          error // the handler's last error (DeadLettered) or the infrastructure error (Failed)
}

// Result is one delivery's outcome, per subscription, in declaration order.
type Result struct {
	EventID       string
	Type          string
	Tenant        string
	Subscriptions []SubResult
}

// RetryLater reports whether the message must come back: some subscription
// is held by another delivery's unexpired lease, or failed on infrastructure.
func (r Result) RetryLater() bool {
	for _, s := range r.Subscriptions {
		if s.Outcome == Pending || s.Outcome == Failed {
			return true
		}
	}
	return false
}

// Count returns how many subscriptions ended with outcome o.
func (r Result) Count(o Outcome) int {
	n := 0
	for _, s := range r.Subscriptions {
		if s.Outcome == o {
			n++
		}
	}
	return n
}

// Deliver delivers e to its DURABLE subscriptions (see the package doc).
//
// The consumer acts on the answer so:
//
//	err != nil          infrastructure (DynamoDB failing, context ended): fail
//	                    the message, and the tenant's later ones in the batch
//	res.RetryLater()    another delivery holds a lease: fail the message so it
//	                    comes back after the visibility timeout
//	otherwise           done: every subscription is completed or dead-lettered
//
// A malformed envelope is an error too; such a message belongs in the DLQ.
func (d *Deliverer) Deliver(ctx context.Context, e envelope.Envelope) (Result, error) {
	return d.DeliverWith(ctx, e, nil)
}

// DeliverWith is Deliver using what Prefetch read for e's batch: a claim
// read as completed or dead is answered without a write, and an event row
// read there spares the in-log check its own read. p may be nil.
func (d *Deliverer) DeliverWith(ctx context.Context, e envelope.Envelope, p *Prefetched) (Result, error) {
	res := Result{EventID: e.ID, Type: e.Type, Tenant: e.TenantID}
	if err := e.Validate(); err != nil {
		return res, fmt.Errorf("deliver: malformed envelope %s: %w", e.ID, err)
	}
	hctx, err := lanes.HandlerContext(ctx, e, catalog.Durable)
	if err != nil {
		return res, err
	}
	if err := d.checkInLog(hctx, e, p); err != nil {
		return res, err
	}
	if err := d.checkCovered(hctx, e, p); err != nil {
		return res, err
	}
	rt := d.reg.Route(e.Type, catalog.Durable)
	lanes.ReportRoute(hctx, d.lanesConfig(), string(catalog.Durable), d.reg.Catalog(), e, rt)
	res.Subscriptions = d.deliverStarted(hctx, rt.Bound, e, p)
	var errs []error
	for _, sr := range res.Subscriptions {
		if sr.Outcome == Failed {
			errs = append(errs, sr.Err)
		}
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("deliver %s %s: %w", e.Type, e.ID, errors.Join(errs...))
	}
	return res, nil
}

func (d *Deliverer) lanesConfig() lanes.Config {
	return lanes.Config{Logger: d.cfg.Logger, Metrics: d.cfg.Metrics}
}

// lease returns when a claim taken now should expire: the invocation's
// remaining time plus grace, or the default without a deadline.
func (d *Deliverer) lease(ctx context.Context, now time.Time) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl.Add(d.cfg.LeaseGrace)
	}
	return now.Add(d.cfg.DefaultLease)
}

func (d *Deliverer) request(ctx context.Context, b catalog.Bound, e envelope.Envelope) ClaimRequest {
	now := d.cfg.Now()
	return ClaimRequest{
		Key:    Key{EventID: e.ID, Subscription: b.Name},
		Tenant: e.TenantID, Type: e.Type, Seq: e.Seq, SchemaVersion: e.SchemaVersion,
		Token: newToken(), Now: now, LeaseUntil: d.lease(ctx, now), ExpiresAt: now.Add(d.cfg.Retention),
	}
}

// newToken identifies one delivery: 96 random bits, 16 characters. It is
// short because it sits in every pending entry of an event's claim item,
// which every completion rewrites whole (1 WCU per started KB); it only has
// to tell apart the deliveries of one event.
func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// deliverStarted answers BeforeStart for each subscription of bound whose
// start e precedes, and delivers e to the others (deliverAll).
func (d *Deliverer) deliverStarted(ctx context.Context, bound []catalog.Bound, e envelope.Envelope, p *Prefetched) []SubResult {
	out := make([]SubResult, len(bound))
	var live []catalog.Bound
	var at []int
	for i, b := range bound {
		out[i].Subscription = b.Name
		st, err := d.startOf(ctx, b.Name, e.TenantID, &e)
		history := false
		if err == nil {
			history, err = d.before(ctx, st, e)
		}
		switch {
		case err != nil:
			d.cfg.Logger.ErrorContext(ctx, "cannot read the subscription's start", slog.String(obs.KeySubscription, b.Name), obs.Err(err))
			out[i].Outcome, out[i].Err = Failed, err
		case history:
			out[i].Outcome = BeforeStart
			d.cfg.Logger.DebugContext(ctx, "committed before the subscription's start; not delivered", slog.String(obs.KeySubscription, b.Name),
				slog.String(obs.KeyEventType, e.Type), slog.String(obs.KeyStart, st.String()))
			d.cfg.Metrics.Count(keys.MetricBeforeStart, 1, "Subscription", b.Name)
		default:
			live = append(live, b)
			at = append(at, i)
		}
	}
	for j, sr := range d.deliverAll(ctx, live, e, p) {
		out[at[j]] = sr
	}
	return out
}

// DeliverTo delivers e to DURABLE subscription sub alone, whatever its
// start: a backfill. The caller re-read e from the log. A claim completed
// or dead already answers AlreadyCompleted or AlreadyDead: a backfill
// delivers each event once.
func (d *Deliverer) DeliverTo(ctx context.Context, e envelope.Envelope, sub string) (SubResult, error) {
	b, ok := d.reg.Subscription(sub)
	if !ok || b.Lane != catalog.Durable {
		return SubResult{Subscription: sub}, fmt.Errorf("backfill %s of %s: %w", sub, e.ID, ErrUnknownSubscription)
	}
	if err := e.Validate(); err != nil {
		return SubResult{Subscription: sub}, fmt.Errorf("backfill %s: malformed envelope %s: %w", sub, e.ID, err)
	}
	hctx, err := lanes.HandlerContext(ctx, e, catalog.Durable)
	if err != nil {
		return SubResult{Subscription: sub}, err
	}
	rt := d.reg.Route(e.Type, catalog.Durable)
	if !slices.ContainsFunc(rt.Bound, func(x catalog.Bound) bool { return x.Name == sub }) {
		return SubResult{Subscription: sub, Outcome: NotMatched}, nil
	}
	sr := d.deliverAll(hctx, []catalog.Bound{b}, e, nil)[0]
	if sr.Outcome == Failed {
		return sr, sr.Err
	}
	return sr, nil
}

// deliverAll claims every subscription of bound that the prefetch did not
// read as final in one Store.ClaimEvent (one write), then runs the handlers
// it took, one after another, each ending in its own completion (or dead
// letter): 1 + N writes for N subscriptions on a first delivery.
func (d *Deliverer) deliverAll(ctx context.Context, bound []catalog.Bound, e envelope.Envelope, p *Prefetched) []SubResult {
	out := make([]SubResult, len(bound))
	logs := make([]*slog.Logger, len(bound))
	var take []int
	seen := map[string]ClaimRecord{}
	for i, b := range bound {
		out[i].Subscription = b.Name
		logs[i] = d.cfg.Logger.With(slog.String(obs.KeySubscription, b.Name), slog.String(obs.KeyEventType, e.Type))
		k := Key{EventID: e.ID, Subscription: b.Name}
		if c, final := p.final(k); final {
			out[i] = d.notAcquired(ctx, logs[i], out[i], c)
			continue
		}
		if r, read := p.record(k); read {
			seen[b.Name] = r
		}
		take = append(take, i)
	}
	if len(take) == 0 {
		return out
	}
	if err := ctx.Err(); err != nil {
		for _, i := range take {
			out[i].Outcome, out[i].Err = Failed, fmt.Errorf("subscription %s not started: %w", bound[i].Name, err)
		}
		return out
	}
	now := d.cfg.Now()
	req := EventClaimRequest{EventID: e.ID, Tenant: e.TenantID, Type: e.Type, Seq: e.Seq, SchemaVersion: e.SchemaVersion,
		Token: newToken(), Now: now, LeaseUntil: d.lease(ctx, now), ExpiresAt: now.Add(d.cfg.Retention), Seen: seen}
	for _, i := range take {
		req.Subscriptions = append(req.Subscriptions, bound[i].Name)
	}
	claims, err := d.cfg.Store.ClaimEvent(ctx, req)
	if err == nil && len(claims) != len(take) {
		err = fmt.Errorf("claim %s: store answered %d claims for %d subscriptions", e.ID, len(claims), len(take))
	}
	if err != nil {
		for _, i := range take {
			logs[i].ErrorContext(ctx, "claim failed", obs.Err(err))
			out[i].Outcome, out[i].Err = Failed, err
		}
		return out
	}
	sibling := false // a sibling was dead-lettered in this delivery: its item keeps no TTL
	for j, i := range take {
		c, b := claims[j], bound[i]
		switch {
		case !c.Acquired:
			out[i] = d.notAcquired(ctx, logs[i], out[i], c)
		case ctx.Err() != nil:
			// Its claim stays pending until the lease ends; the redelivery
			// (after the visibility timeout, by then expired) takes it over.
			out[i].Outcome, out[i].Err = Failed, fmt.Errorf("subscription %s not started: %w", b.Name, ctx.Err())
		default:
			if c.TakenOver {
				logs[i].WarnContext(ctx, "took over a pending claim whose lease expired; an earlier delivery was cut off", slog.Int(obs.KeyAttempts, c.Attempts))
			}
			out[i] = d.runClaimed(ctx, logs[i], b, e, req.request(b.Name), false, sibling)
			sibling = sibling || out[i].Outcome == DeadLettered
		}
	}
	return out
}

func (d *Deliverer) notAcquired(ctx context.Context, log *slog.Logger, sr SubResult, c Claim) SubResult {
	switch c.Status {
	case StatusCompleted:
		sr.Outcome = AlreadyCompleted
		log.DebugContext(ctx, "already completed; skipped")
	case StatusDead:
		sr.Outcome = AlreadyDead
		log.InfoContext(ctx, "dead-lettered earlier; skipped until replayed")
	default:
		sr.Outcome = Pending
		log.InfoContext(ctx, "another delivery holds the claim; retry later", slog.Time(obs.KeyLeaseUntil, c.LeaseUntil))
		d.cfg.Metrics.Count(keys.MetricLeaseHeld, 1, "Subscription", sr.Subscription)
	}
	return sr
}

// runClaimed runs the handler under a claim this delivery holds and records
// the end: completed (resolved, for a replay) or dead.
//
// afterDead says a sibling was dead-lettered earlier in this delivery: the
// completion then leaves the TTL alone (zero expiresAt), as the store would
// find out at the cost of a refused write.
func (d *Deliverer) runClaimed(ctx context.Context, log *slog.Logger, b catalog.Bound, e envelope.Envelope, req ClaimRequest, replay, afterDead bool) SubResult {
	sr := SubResult{Subscription: b.Name}
	retry := lanes.Retry{Attempts: d.cfg.Attempts, Backoff: d.cfg.Backoff, OnRetry: func(ctx context.Context, attempt int, err error) {
		log.WarnContext(ctx, "handler failed; retrying", slog.Int(obs.KeyAttempt, attempt), obs.Err(err))
	}}
	// The handler's effects (pkg/effect) are recorded under this delivery's
	// token, shared by its retries here.
	hctx := d.cfg.Effects.Bind(ctx, effect.Scope{Tenant: e.TenantID, EventID: e.ID, Seq: e.Seq, Subscription: b.Name,
		Lane: effect.LaneDurable, Token: req.Token})
	// The handler's work joins the emitting request's trace (the
	// envelope's traceparent): a follow-on emit carries it on.
	hctx, endSpan := tracing.Continue(hctx, "deliver "+b.Name, e.TraceParent,
		tracing.String(keys.SpanAttrSubscription, b.Name), tracing.String(keys.SpanAttrEventID, e.ID))
	herr := lanes.Guard(b, lanes.Retrying(retry), lanes.Counted(&sr.Attempts), d.followOn(b.Name))(hctx, e)
	endSpan(herr)
	// Record the end even if ctx is ending: the handler's work is done.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	now := d.cfg.Now()
	if herr == nil {
		var err error
		if replay {
			err = d.cfg.Store.Resolve(wctx, req.Key, e.TenantID, req.Token, now, now.Add(d.cfg.Retention))
		} else {
			expires := now.Add(d.cfg.Retention)
			if afterDead {
				expires = time.Time{}
			}
			err = d.cfg.Store.Complete(wctx, req.Key, req.Token, now, expires)
		}
		switch {
		case errors.Is(err, ErrLeaseLost):
			// Our lease ran out mid-handler and another delivery took over: the
			// handler ran twice (at-least-once); that delivery records the end.
			log.WarnContext(ctx, "handler completed after its lease was taken over; it may have run twice", obs.Err(err))
		case err != nil:
			log.ErrorContext(ctx, "handler completed but recording it failed; a redelivery will run it again after the lease", obs.Err(err))
			sr.Outcome, sr.Err = Failed, err
			return sr
		}
		sr.Outcome = Completed
		d.cfg.Metrics.Count(keys.MetricDelivered, 1, "Subscription", b.Name)
		if replay {
			d.cfg.Metrics.Count(keys.MetricReplayed, 1, "Subscription", b.Name)
		} else {
			// Commit → handler done, the lag an operator sees (a replay's
			// would be the dead letter's age, so it is left out).
			d.cfg.Metrics.Milliseconds(keys.MetricDeliveryLag, lanes.Lag(e, now), "Subscription", b.Name)
		}
		return sr
	}
	if ctx.Err() != nil && !IsPermanent(herr) && errors.Is(herr, ctx.Err()) {
		// Out of time, not a verdict on the handler: leave the claim pending;
		// its lease expires and the redelivery takes over.
		sr.Outcome, sr.Err = Failed, fmt.Errorf("subscription %s: ran out of time: %w", b.Name, herr)
		return sr
	}
	dl := DeadLetter{Tenant: e.TenantID, EventID: e.ID, Subscription: b.Name, Type: e.Type, Seq: e.Seq,
		SchemaVersion: e.SchemaVersion, Error: herr.Error(), Attempts: sr.Attempts, DeadAt: now}
	var unknown *effect.UnknownError
	if errors.As(herr, &unknown) {
		dl.Effect = unknown.Key.String()
	}
	if err := d.cfg.Store.Kill(wctx, req.Key, req.Token, dl, replay); err != nil && !errors.Is(err, ErrLeaseLost) {
		log.ErrorContext(ctx, "dead-lettering failed; a redelivery will run the handler again after the lease", obs.Err(err), obs.ErrAt(obs.KeyHandlerErr, herr))
		sr.Outcome, sr.Err = Failed, err
		return sr
	}
	log.ErrorContext(ctx, "subscription dead-lettered", obs.Err(herr), slog.Int(obs.KeyAttempts, sr.Attempts), slog.Bool(obs.KeyReplay, replay))
	d.cfg.Metrics.Count(keys.MetricDeadLettered, 1, "Subscription", b.Name)
	sr.Outcome, sr.Err = DeadLettered, herr
	return sr
}

// followOn binds a fresh follow-on emitter for each run of subscription's
// handler (inside Retrying: the ranks of an emitter count within one run).
func (d *Deliverer) followOn(subscription string) lanes.Middleware {
	return func(next catalog.Handler) catalog.Handler {
		if d.cfg.Events == nil {
			return next
		}
		return func(ctx context.Context, e envelope.Envelope) error {
			return next(d.cfg.Events.BindFollowOn(ctx, e, subscription), e)
		}
	}
}

// Replay re-runs exactly one dead-lettered subscription for e (which the
// caller re-read from the log) and, when it completes, resolves its
// dead-letter row. If it fails again it stays dead with the new error.
// ErrUnknownSubscription if no DURABLE subscription of that name is bound
// here; ErrNotDead if it was never dead-lettered for e. A subscription that
// completed meanwhile answers AlreadyCompleted; one held by another
// delivery's lease answers Pending.
func (d *Deliverer) Replay(ctx context.Context, e envelope.Envelope, subscription string) (SubResult, error) {
	sr := SubResult{Subscription: subscription}
	b, ok := d.reg.Subscription(subscription)
	if !ok || b.Lane != catalog.Durable {
		return sr, fmt.Errorf("replay %s of %s: %w", subscription, e.ID, ErrUnknownSubscription)
	}
	if err := e.Validate(); err != nil {
		return sr, fmt.Errorf("replay %s: malformed envelope %s: %w", subscription, e.ID, err)
	}
	hctx, err := lanes.HandlerContext(ctx, e, catalog.Durable)
	if err != nil {
		return sr, err
	}
	log := d.cfg.Logger.With(slog.String(obs.KeySubscription, b.Name), slog.String(obs.KeyEventType, e.Type))
	req := d.request(hctx, b, e)
	c, err := d.cfg.Store.ClaimDead(hctx, req)
	if err != nil {
		if !errors.Is(err, ErrNotDead) {
			sr.Outcome = Failed
		}
		return sr, err
	}
	if !c.Acquired {
		sr = d.notAcquired(hctx, log, sr, c)
		return sr, nil
	}
	log.InfoContext(hctx, "replaying dead-lettered subscription", slog.Int(obs.KeyAttempts, c.Attempts))
	sr = d.runClaimed(hctx, log, b, e, req, true, false)
	if sr.Outcome == Failed {
		return sr, sr.Err
	}
	return sr, nil
}
