package eventstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/pkg/tracing"
)

// DynamoDB is the part of the DynamoDB API the store uses.
type DynamoDB interface {
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// Catalog decides what may be emitted. Prepare refuses an undeclared type or
// a payload that does not fit the type's declared schema, and returns the
// schema version and the payload in envelope form (envelope.NormalizePayload).
// Only Emit uses it: a store that only reads the log needs none.
type Catalog interface {
	Prepare(eventType string, payload any) (schemaVersion int, normalized map[string]any, err error)
}

// TenantCatalog is a Catalog whose preparation depends on the tenant and may
// call out (catalog.Catalog seals personal fields with its vault): Emit
// calls PrepareFor instead of Prepare when the catalog has it, so a wrapper
// that embeds a *catalog.Catalog and overrides Prepare overrides PrepareFor
// too.
type TenantCatalog interface {
	PrepareFor(ctx context.Context, tenant, eventType string, payload any) (schemaVersion int, normalized map[string]any, err error)
}

// Dispatcher runs the in-process lanes after a commit: INLINE awaited (its
// error is returned to Emit's caller inside a *PostCommitError) and LOCAL
// isolated. It is called once per committed event, on the caller's goroutine.
type Dispatcher interface {
	AfterCommit(ctx context.Context, e envelope.Envelope) error
}

// Batching selects how concurrent Emits for one tenant are committed.
type Batching int

const (
	// BatchPerTenant (the default) coalesces concurrent Emits of one tenant
	// into one transaction. A lone emitter commits at once, alone, so it
	// pays nothing for this; under contention one head write serves many
	// events instead of callers racing for the head and mostly losing.
	BatchPerTenant Batching = iota
	// BatchNone commits every Emit in its own transaction (the naive design;
	// kept for benchmarks and for callers that need strict isolation).
	BatchNone
)

// Config configures a Store.
type Config struct {
	Table      string     // the events table (required)
	Catalog    Catalog    // required to emit (undeclared types are refused); nil: the store reads the log only
	Dispatcher Dispatcher // optional: INLINE and LOCAL lanes
	Batching   Batching
	// Retry budget for head contention, per caller. Zero values take the
	// defaults: 64 attempts, 10 s; backoff full jitter over a per-tenant
	// window that doubles from 1 ms with every loss to at most 1 s and
	// halves with every commit (see pacer).
	MaxAttempts int
	MaxElapsed  time.Duration
	BaseDelay   time.Duration
	MaxDelay    time.Duration
	// CallTimeout bounds one TransactWriteItems call, the SDK's own retries
	// included (default 5 s). A call cut off by it is an ambiguous outcome.
	CallTimeout time.Duration
	// OutcomeWithin is how long after the first ambiguous answer (see
	// OutcomeUnknownError) Emit keeps resending the identical request before
	// it gives up undecided (default 30 s). It is kept under DynamoDB's
	// 10-minute ClientRequestToken window, past which a resend would no
	// longer be idempotent.
	OutcomeWithin time.Duration
	// Shards splits the named tenants' logs into chain shards (DESIGN-NOTES.md,
	// "Hot tenants"): tenant id → number of chains, 2 to tenancy.MaxShards. Such a
	// tenant's events go to the chain their EmitInput.ShardKey hashes to
	// (tenancy.ShardOf), shard 0 being the tenant's own chain; each chain has
	// its own head and partition key, so the tenant's ceiling is that many
	// times one chain's. Every process that emits for a tenant must be given
	// the same number, and it must never shrink: a key that moves to
	// another shard loses its order with the events already on the old one.
	// Tenants not listed keep one chain.
	Shards map[string]int
	Now    func() time.Time // for tests; default time.Now
}

// tokenWindow is how long DynamoDB keeps a ClientRequestToken idempotent
// after its first request completes; OutcomeWithin stays well inside it.
const tokenWindow = 10 * time.Minute

// Store appends events. It is safe for concurrent use.
type Store struct {
	db  DynamoDB
	cfg Config

	mu      sync.Mutex
	tenants map[string]*tenantQueue
	pacers  map[string]*pacer // tenants this store saw contended lately

	stats statCounters
}

// New returns a Store. It refuses a config without a table. A config
// without a Catalog gives a store that reads the log (Events, Head, Export,
// Settle, …) and whose Emit returns ErrNoCatalog.
func New(db DynamoDB, cfg Config) (*Store, error) {
	if cfg.Table == "" {
		return nil, errors.New("eventstore: Config.Table is empty; set it to the events table name")
	}
	for tenant, n := range cfg.Shards {
		if err := tenancy.CheckShards(tenant, n); err != nil {
			return nil, fmt.Errorf("eventstore: Config.Shards: %w", err)
		}
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 64
	}
	if cfg.MaxElapsed <= 0 {
		cfg.MaxElapsed = 10 * time.Second
	}
	if cfg.BaseDelay <= 0 {
		cfg.BaseDelay = time.Millisecond
	}
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = time.Second
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 5 * time.Second
	}
	if cfg.OutcomeWithin <= 0 {
		cfg.OutcomeWithin = 30 * time.Second
	}
	cfg.OutcomeWithin = min(cfg.OutcomeWithin, tokenWindow/2)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Store{db: db, cfg: cfg, tenants: map[string]*tenantQueue{}, pacers: map[string]*pacer{}}, nil
}

// Stats are cumulative counters for benchmarks and health checks.
type Stats struct {
	Events         int64   // events committed
	Commits        int64   // transactions committed
	Attempts       int64   // TransactWriteItems calls
	FailedAttempts int64   // calls cancelled by head contention, or ambiguous
	Ambiguous      int64   // calls whose outcome DynamoDB did not tell (resent identical)
	Throttled      int64   // of FailedAttempts, those the partition's write budget refused
	WCU            float64 // write capacity units consumed (ReturnConsumedCapacity)
}

type statCounters struct {
	events, commits, attempts, failed, ambiguous atomic.Int64
	throttled, milliWCU                          atomic.Int64
}

// Stats returns the store's counters so far.
func (s *Store) Stats() Stats {
	return Stats{
		Events:         s.stats.events.Load(),
		Commits:        s.stats.commits.Load(),
		Attempts:       s.stats.attempts.Load(),
		FailedAttempts: s.stats.failed.Load(),
		Ambiguous:      s.stats.ambiguous.Load(),
		Throttled:      s.stats.throttled.Load(),
		WCU:            float64(s.stats.milliWCU.Load()) / 1000,
	}
}

// request is one Emit waiting to be committed.
type request struct {
	ctx     context.Context
	env     envelope.Envelope
	row     envelope.ItemTemplate // env's row but for its seal, made once: every seal of the request reuses it
	extra   []types.TransactWriteItem
	idemKey string
	size    int // estimated bytes of the event row, the idempotency row and the extra writes
	done    chan error

	start    time.Time    // when Emit was called
	deadline time.Time    // the caller's own budget: start+MaxElapsed or ctx's deadline, the earlier
	ctxBound bool         // deadline is the context's
	state    atomic.Int32 // reqQueued, reqTaken or reqAbandoned
	// Only the committer touches these.
	attempts int       // TransactWriteItems calls that carried this request
	firstTry time.Time // when it first went out; zero: never
}

// A request's state: queued until a committer takes it into a batch (from
// then on its outcome is the batch's), or abandoned by its caller while still
// queued (then it is never sent).
const (
	reqQueued int32 = iota
	reqTaken
	reqAbandoned
)

// actions is how many transaction actions the request takes.
func (r *request) actions() int {
	n := 1 + len(r.extra)
	if r.idemKey != "" {
		n++
	}
	return n
}

// EmitInput is one event to emit with EmitWith.
type EmitInput struct {
	Type    string
	Payload any
	// Extra are the caller's writes, committed in the same transaction.
	Extra []types.TransactWriteItem
	// IdempotencyKey, when set, makes the emit happen at most once per tenant
	// and key, across processes and for as long as the log exists: a second
	// EmitWith with the same key and the same type, payload and extra writes
	// writes nothing and returns the event the first one committed (the
	// INLINE and LOCAL lanes do not run again); with other content it writes
	// nothing and fails with an *IdempotencyKeyMismatchError. For emits that carry no
	// conditional write of their own to make a retry safe. It costs one more
	// item in the transaction (see idempotency.go for the measured WCU).
	// For a tenant with chain shards the key is kept on the event's chain:
	// a retry must carry the same ShardKey (it is the same request).
	IdempotencyKey string
	// ShardKey chooses the chain of a tenant with chain shards
	// (Config.Shards): events with one shard key stay in order on one chain.
	// Use the id of the aggregate the event is about (an order id, say).
	// Required for such a tenant; ignored for a tenant with one chain.
	ShardKey string
}

// Emit appends one event of eventType for the tenant bound to ctx, in one
// transaction with the caller's extra writes, then runs the INLINE and LOCAL
// lanes. It returns the committed envelope (seq, prev_hash, hash set).
//
// Errors: ErrNoCatalog; tenancy.ErrNoTenant; a *envelope.FieldError or the
// catalog's refusal; ErrTooLarge; a *CallerWriteError naming the caller's write;
// a *ContentionError; an *OutcomeUnknownError (committed at its Seq or not at
// all: Settle tells which); a *PostCommitError (the event did commit). In
// every case but the last two, nothing was written.
func (s *Store) Emit(ctx context.Context, eventType string, payload any, extra ...types.TransactWriteItem) (envelope.Envelope, error) {
	return s.EmitWith(ctx, EmitInput{Type: eventType, Payload: payload, Extra: extra})
}

// EmitWith is Emit with the options of EmitInput.
func (s *Store) EmitWith(ctx context.Context, in EmitInput) (envelope.Envelope, error) {
	eventType := in.Type
	if s.cfg.Catalog == nil {
		return envelope.Envelope{}, fmt.Errorf("emit %s: %w", eventType, ErrNoCatalog)
	}
	tenant, err := tenancy.Tenant(ctx)
	if err != nil {
		return envelope.Envelope{}, fmt.Errorf("emit %s: %w", eventType, err)
	}
	// From here on "tenant" is the chain the event goes to: the tenant's
	// own, or one of its shards'.
	if tenant, err = s.chainOf(tenant, in.ShardKey); err != nil {
		return envelope.Envelope{}, fmt.Errorf("emit %s: %w", eventType, err)
	}
	if !envelope.ValidType(eventType) {
		return envelope.Envelope{}, fmt.Errorf("emit: %w", &envelope.FieldError{Field: "type",
			Reason: fmt.Sprintf("%q is not <module>.<name> (e.g. order.placed)", eventType)})
	}
	if err := checkIdemKey(in.IdempotencyKey); err != nil {
		return envelope.Envelope{}, fmt.Errorf("emit %s: %w", eventType, err)
	}
	var version int
	var norm map[string]any
	if pc, ok := s.cfg.Catalog.(TenantCatalog); ok {
		version, norm, err = pc.PrepareFor(ctx, tenancy.TenantOf(tenant), eventType, in.Payload)
	} else {
		version, norm, err = s.cfg.Catalog.Prepare(eventType, in.Payload)
	}
	if err != nil {
		return envelope.Envelope{}, fmt.Errorf("emit %s: %w", eventType, err)
	}
	id, err := envelope.NewID()
	if err != nil {
		return envelope.Envelope{}, err
	}
	req := &request{
		ctx: ctx,
		env: envelope.Envelope{
			ID:            id,
			Type:          eventType,
			TenantID:      tenant,
			OccurredAt:    envelope.FormatTime(s.cfg.Now()),
			SchemaVersion: version,
			CorrelationID: tenancy.Correlation(ctx),
			CausationID:   tenancy.Causation(ctx),
			ActorID:       tenancy.Actor(ctx),
			Payload:       norm,
			// The emitting request's trace, so the lanes' work joins it.
			TraceParent: tracing.TraceParent(ctx),
		},
		extra:   in.Extra,
		idemKey: in.IdempotencyKey,
		done:    make(chan error, 1),
		start:   time.Now(),
	}
	req.deadline = req.start.Add(s.cfg.MaxElapsed)
	if d, ok := ctx.Deadline(); ok && d.Before(req.deadline) {
		req.deadline, req.ctxBound = d, true
	}
	// Validated once: each seal reuses the row (a re-seal after a lost race
	// changes only seq, prev_hash and hash, which Item checks).
	if req.row, err = req.env.ItemTemplate(); err != nil {
		return envelope.Envelope{}, fmt.Errorf("emit %s: %w", eventType, err)
	}
	if err := s.checkAlone(req); err != nil {
		return envelope.Envelope{}, fmt.Errorf("emit %s: %w", eventType, err)
	}

	if s.cfg.Batching == BatchNone {
		req.state.Store(reqTaken)
		hv := &headView{}
		for batch := []*request{req}; len(batch) > 0; {
			batch = s.commit(tenant, batch, hv)
		}
		err = <-req.done
	} else {
		s.enqueue(tenant, req)
		err = s.await(tenant, req)
	}
	env := req.env // the leader is done with req: read it only now
	if err != nil {
		var used *idemUsedError
		if !errors.As(err, &used) {
			return envelope.Envelope{}, fmt.Errorf("emit %s: %w", eventType, err)
		}
		first, err := s.idemFirst(ctx, tenant, req)
		if err != nil {
			return envelope.Envelope{}, fmt.Errorf("emit %s: %w", eventType, err)
		}
		if first.ID != req.env.ID {
			// An earlier emit with this key: its result, nothing new.
			return first, nil
		}
		// This very emit, committed by an earlier copy of its request.
		env = first
	}
	if s.cfg.Dispatcher != nil {
		if err := s.cfg.Dispatcher.AfterCommit(ctx, env); err != nil {
			return env, &PostCommitError{Seq: env.Seq, Err: err}
		}
	}
	return env, nil
}

// chainOf returns the chain an event of tenant with shardKey goes to.
func (s *Store) chainOf(tenant, shardKey string) (string, error) {
	n := s.cfg.Shards[tenant]
	if n == 0 {
		return tenant, nil
	}
	if shardKey == "" {
		return "", fmt.Errorf("%w: tenant %q has %d chain shards (Config.Shards): set EmitInput.ShardKey to the id of the "+
			"aggregate the event is about, so its events stay in order on one chain, and emit with EmitWith", ErrNoShardKey, tenant, n)
	}
	return tenancy.Chain(tenant, tenancy.ShardOf(shardKey, n)), nil
}

// tenantQueue holds one tenant's Emits waiting for the tenant's committer.
type tenantQueue struct {
	pending []*request
	leading bool // a committer goroutine serves the queue
}

// enqueue adds req to its tenant's queue and starts the tenant's committer
// if none runs. The committer is a goroutine of its own, not a caller: no
// caller's wait ever includes committing other callers' batches.
func (s *Store) enqueue(tenant string, req *request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.tenants[tenant]
	if q == nil {
		q = &tenantQueue{}
		s.tenants[tenant] = q
	}
	q.pending = append(q.pending, req)
	if !q.leading {
		q.leading = true
		go s.lead(tenant, q)
	}
}

// lead commits q's requests, batch after batch, until the queue is empty.
// A batch that lost to contention goes out again with whatever queued
// meanwhile: the more contended the head, the larger the batch that takes it.
func (s *Store) lead(tenant string, q *tenantQueue) {
	// The store remembers the head it last committed or was told of, across
	// Emits, so a tenant's next batch needs no read: a head another process
	// moved meanwhile costs one lost attempt, whose failed condition returns
	// the head that won (ReturnValuesOnConditionCheckFailure), instead of a
	// read before every Emit of an idle store. Only the tenant's committer
	// (one at a time, q.leading) touches it.
	hv := &s.pacer(tenant).head
	var carry []*request
	for {
		s.mu.Lock()
		batch := takeBatch(q, carry)
		if len(batch) == 0 {
			q.leading = false
			delete(s.tenants, tenant)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		carry = s.commit(tenant, batch, hv)
	}
}

// await waits for req's answer, but never past the caller's own deadline
// while req is still queued: a caller that gives up before its request went
// out gets its answer at once, and the request is never sent. Once a batch
// carries it, its outcome is that batch's (a committed event must be
// reported), which the committer delivers within one round of the deadline.
func (s *Store) await(tenant string, req *request) error {
	timer := time.NewTimer(time.Until(req.deadline))
	defer timer.Stop()
	select {
	case err := <-req.done:
		return err
	case <-req.ctx.Done():
	case <-timer.C:
	}
	if !req.state.CompareAndSwap(reqQueued, reqAbandoned) {
		return <-req.done
	}
	if errors.Is(req.ctx.Err(), context.Canceled) {
		return req.ctx.Err()
	}
	// Its deadline (Config.MaxElapsed or its context's): a contention error
	// that says so, and matches context.DeadlineExceeded when it was the
	// context's.
	var last error
	if req.ctxBound {
		last = context.DeadlineExceeded // the timer may fire just before the context's own
	}
	waited := time.Since(req.start)
	return &ContentionError{Tenant: tenant, Elapsed: waited, Waited: waited, Last: last,
		Reason: "its own deadline, reached while queued behind the tenant's batches in flight (never sent)"}
}

// takeBatch returns carry followed by the longest run of q's queued requests
// that still fits one transaction, and marks those taken. Requests their
// callers abandoned are dropped from the queue.
func takeBatch(q *tenantQueue, carry []*request) []*request {
	actions, bytes := 1, headRowBytes
	for _, r := range carry {
		actions += r.actions()
		bytes += r.size
	}
	batch := append([]*request(nil), carry...)
	n := 0
	for _, r := range q.pending {
		a := r.actions()
		if len(batch) > 0 && (actions+a > maxActions || bytes+r.size > maxTxBytes) {
			break
		}
		n++
		if !r.state.CompareAndSwap(reqQueued, reqTaken) {
			continue // abandoned by its caller
		}
		actions += a
		bytes += r.size
		batch = append(batch, r)
	}
	q.pending = q.pending[n:]
	return batch
}

// headView is what a committer knows of its tenant's head: nothing yet (read
// it), or the head as of its last read or commit (nil head: no events yet).
type headView struct {
	known  bool
	head   *chain.Head
	shards int       // the shard count the head was written with (keys.AttrShards; 1 when absent)
	at     time.Time // when DynamoDB told it (a read, a commit or a lost race answered)
	// retried: the last round lost on a stale head and its batch went out
	// again at once, on the head the loss returned.
	retried bool
	// doubt: the last batch that went out on the remembered head found it
	// stale; until one holds again, a new batch reads the head first.
	doubt bool
}

// set records what DynamoDB just told of the head.
func (hv *headView) set(h *chain.Head, shards int) {
	hv.known, hv.head, hv.shards, hv.at, hv.retried = true, h, shards, time.Now(), false // doubt stays
}

// commit seals batch (one tenant's requests, in order) once and sends it
// until DynamoDB answers definitely, then signals every request's done
// channel exactly once, except those it returns: the requests that lost to
// contention and still have budget, to go out again (the backoff is already
// waited). Each request's budget is its own (attempts that carried it, its
// deadline): the batch it rides in never stretches it.
func (s *Store) commit(tenant string, batch []*request, hv *headView) []*request {
	for len(batch) > 0 {
		// A caller that gave up before its turn is not committed. Callers
		// are only ever dropped here, between rounds: within a round the
		// request is fixed, as its resends must be identical.
		batch = dropCancelled(batch)
		if len(batch) == 0 {
			return nil
		}
		now := time.Now()
		before := 0
		for _, r := range batch {
			if r.firstTry.IsZero() {
				r.firstTry = now
			}
			before = max(before, r.attempts)
		}
		// The round number in the token grows with every round any of these
		// requests was in, so a re-seal never reuses a token.
		n := before
		rtt := s.pacer(tenant).roundTrip()
		if before == 0 && hv.known && hv.doubt && time.Since(hv.at) > rtt/2 {
			// The last remembered head this store sealed on had gone stale
			// (other processes write this chain too): read the head rather
			// than spend a lost attempt finding that out again. A read costs
			// the same round trip and no write.
			hv.known = false
		}
		if before > 0 && hv.known && time.Since(hv.at) > rtt {
			// The batch lost a race and has since waited out its backoff,
			// longer than a round trip: on a head contended enough to make
			// it wait, another commit has all but surely landed meanwhile,
			// so a write sealed on the head it was told of could only fail
			// and return the head. Read the head instead: the same round
			// trip, and a read rather than a cancelled transaction.
			hv.known = false
		}
		// How old the head this round seals on is (0: round reads it).
		var age time.Duration
		if hv.known {
			age = time.Since(hv.at)
		}
		err := s.round(tenant, batch, hv, &n)
		for _, r := range batch {
			r.attempts += n - before
		}
		var undecided *undecidedError
		switch {
		case err == nil:
			if before == 0 && age > 0 {
				hv.doubt = false // a remembered head held
			}
			s.pacer(tenant).won()
			for _, r := range batch {
				r.done <- nil
			}
			return nil
		case errors.As(err, &undecided):
			for _, r := range batch {
				r.done <- &OutcomeUnknownError{Tenant: tenant, EventID: r.env.ID, Seq: r.env.Seq,
					Attempts: r.attempts, Elapsed: time.Since(r.start), Last: undecided.last}
			}
			return nil
		case isContention(err):
			s.stats.failed.Add(1)
			var c *contentionError
			errors.As(err, &c)
			if c.throttled {
				s.stats.throttled.Add(1)
			}
			// Stale: the head this round sealed on was older than half a
			// round trip when it went out, so losing says only that the head
			// moved meanwhile (an idle store's first Emit, a batch's first
			// attempt after a backoff), not that anyone raced it in flight.
			// Once per loss streak: the retry on the returned head is fresh.
			stale := c.head != nil && !hv.retried && age > rtt/2
			if c.head != nil {
				// With the count it was written with, which the next seal checks.
				hv.set(c.head, c.shards)
			}
			hv.retried = stale
			if stale && before == 0 {
				hv.doubt = true
			}
			return s.keepWithinBudget(tenant, batch, err, stale)
		default:
			var cw *batchCallerError
			if errors.As(err, &cw) {
				// Only those callers' answer: fail them, retry the rest at once.
				rest := make([]*request, 0, len(batch))
				for i, r := range batch {
					if f, ok := cw.failed[i]; ok {
						r.done <- f
						continue
					}
					rest = append(rest, r)
				}
				batch = rest
				continue
			}
			var split *splitError
			if errors.As(err, &split) && len(batch) > 1 {
				// DynamoDB refused the combination (e.g. two callers touching
				// one item); commit each caller on its own instead.
				for _, r := range batch {
					for one := []*request{r}; len(one) > 0; {
						one = s.commit(tenant, one, hv)
					}
				}
				return nil
			}
			if split != nil {
				err = split.err
			}
			for _, r := range batch {
				r.done <- err
			}
			return nil
		}
	}
	return nil
}

// keepWithinBudget answers the requests of a contended batch whose own budget
// is spent with a *ContentionError, waits the backoff (never past the
// earliest deadline among the rest; none when the batch lost only because
// the head it sealed on was stale) and returns the rest.
func (s *Store) keepWithinBudget(tenant string, batch []*request, last error, stale bool) []*request {
	now := time.Now()
	keep := make([]*request, 0, len(batch))
	var earliest time.Time
	for _, r := range batch {
		var reason string
		switch {
		case r.attempts >= s.cfg.MaxAttempts:
			reason = fmt.Sprintf("its %d-attempt budget (Config.MaxAttempts)", s.cfg.MaxAttempts)
		case !now.Before(r.deadline):
			reason = "its own deadline (Config.MaxElapsed or its context's, the earlier)"
		}
		if reason != "" {
			r.done <- &ContentionError{Tenant: tenant, Attempts: r.attempts, Elapsed: now.Sub(r.start),
				Waited: r.firstTry.Sub(r.start), Reason: reason, Last: last}
			continue
		}
		keep = append(keep, r)
		if earliest.IsZero() || r.deadline.Before(earliest) {
			earliest = r.deadline
		}
	}
	if stale {
		// The lost race returned the head that won it, the freshest head
		// there is: re-seal on it at once, as waiting would only age it.
		// This is not contention, so the window stays as it is.
		return keep
	}
	w := s.pacer(tenant).lost(s.cfg.BaseDelay, s.cfg.MaxDelay)
	if len(keep) > 0 {
		// The longer the batch's oldest caller has waited, the sooner it
		// tries again (w² / (w + age): the whole window when fresh, a
		// quarter of it after three windows): old callers get ahead of new
		// ones, across processes too, so losing never compounds into
		// starvation the way a window that only widens would let it.
		oldest := now.Sub(keep[0].start)
		for _, r := range keep[1:] {
			oldest = max(oldest, now.Sub(r.start))
		}
		w = time.Duration(float64(w) * float64(w) / float64(w+oldest))
		if limit := min(w, time.Until(earliest)); limit > 0 {
			time.Sleep(rand.N(limit) + time.Microsecond)
		}
	}
	return keep
}

// pacer is one store's view of how contended a tenant's head is: a backoff
// window that doubles with every attempt this store loses on it (up to
// Config.MaxDelay) and halves with every one it commits. Losers wait a
// random time within it, so the independent writers of a hot tenant (other
// processes, other Lambda instances) spread their attempts out to about the
// rate one head can take, instead of all retrying at once and mostly losing;
// the ones that wait meanwhile pile into larger batches. A cold tenant's
// window is zero: nothing waits.
type pacer struct {
	mu     sync.Mutex
	window time.Duration
	rtt    time.Duration // moving average of the definite answers' round trips

	head headView // the tenant's head as this store last knew it; only the tenant's committer uses it
}

func (s *Store) pacer(tenant string) *pacer {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pacers[tenant]
	if p == nil {
		if len(s.pacers) >= 4096 {
			for k, q := range s.pacers { // forget cold tenants
				q.mu.Lock()
				if q.window == 0 {
					delete(s.pacers, k)
				}
				q.mu.Unlock()
			}
		}
		p = &pacer{}
		s.pacers[tenant] = p
	}
	return p
}

// answered folds one definite answer's round trip into the average.
func (p *pacer) answered(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rtt == 0 {
		p.rtt = d
		return
	}
	p.rtt += (d - p.rtt) / 8
}

// roundTrip is the average round trip so far (a millisecond before any).
func (p *pacer) roundTrip() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rtt == 0 {
		return time.Millisecond
	}
	return p.rtt
}

// lost widens the window after a lost attempt and returns it.
func (p *pacer) lost(base, limit time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.window = min(max(2*p.window, base), limit)
	return p.window
}

// won narrows the window after a commit.
func (p *pacer) won() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.window /= 2
	if p.window < time.Millisecond/4 {
		p.window = 0
	}
}

// undecidedError ends a round whose resends never got a definite answer.
type undecidedError struct{ last error }

func (e *undecidedError) Error() string { return "undecided: " + e.last.Error() }

func dropCancelled(batch []*request) []*request {
	out := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- err
			continue
		}
		out = append(out, r)
	}
	return out
}

// sleep waits a full-jitter backoff: up to BaseDelay doubled per attempt,
// capped at limit.
func (s *Store) sleep(attempt int, limit time.Duration) {
	d := s.cfg.BaseDelay << min(attempt-1, 16)
	if d > limit || d <= 0 {
		d = limit
	}
	time.Sleep(rand.N(d) + time.Microsecond)
}

// round seals batch once, from the head hv knows (read first if it knows
// none), and sends that one request until DynamoDB answers definitely:
//
//   - committed: nil, and hv holds the new head;
//   - a definite "not committed" (a cancellation, another 4xx): that error,
//     and the caller may re-seal at a new seq;
//   - ambiguous answers only, for Config.OutcomeWithin: an *undecidedError.
//
// After an ambiguous answer (the request may have committed) only the
// identical request, with the same ClientRequestToken, is sent again:
// DynamoDB runs one request per token once, and answers a resend of a
// committed one with success. The SDK's retryer does the same within one
// call (it retries TransactionInProgress, 5xx and dropped connections with
// the token it was given), so what reaches DynamoDB for one seal is always
// one token and one body. A resend refused because the head moved is checked
// against the log: if the row at the batch's first seq holds our event, an
// earlier copy committed; if not, no copy ever can (the head condition pins
// the seq before it, and the head never moves back).
func (s *Store) round(tenant string, batch []*request, hv *headView, attempts *int) (err error) {
	base := context.WithoutCancel(batch[0].ctx)
	defer func() {
		var cw *batchCallerError
		if err != nil && !errors.As(err, &cw) {
			hv.known = false
		}
	}()
	in, owners, err := s.seal(base, tenant, batch, hv, *attempts+1)
	if err != nil {
		return err
	}
	last := batch[len(batch)-1].env
	var firstAmbiguous time.Time
	for n := 1; ; n++ {
		*attempts++
		ctx, cancel := context.WithTimeout(base, s.cfg.CallTimeout)
		sent := time.Now()
		out, callErr := s.db.TransactWriteItems(ctx, in)
		cancel()
		s.stats.attempts.Add(1)
		if callErr == nil {
			s.pacer(tenant).answered(time.Since(sent))
			hv.set(&chain.Head{TenantID: tenant, LastSeq: last.Seq, LastHash: last.Hash}, s.shardCount(tenant))
			s.committed(len(batch), out)
			return nil
		}
		err = classify(callErr, owners)
		if isContention(err) {
			s.pacer(tenant).answered(time.Since(sent))
		}
		if !firstAmbiguous.IsZero() {
			// A copy of this request may have committed.
			var cw *batchCallerError
			switch {
			case errors.As(err, &cw):
				// The token makes every copy answer alike: a copy that
				// committed would make this one succeed, not fail.
				return err
			case headMoved(err):
				ours, rerr := s.holds(base, tenant, batch[0].env)
				if rerr == nil && ours {
					// Committed by an earlier copy; the head is past it.
					s.committed(len(batch), nil)
					hv.known = false
					return nil
				}
				if rerr == nil {
					return err
				}
				err = &ambiguousError{rerr}
			case !isAmbiguous(err):
				// Not the head: the seal is still good, resend it.
				err = &ambiguousError{err}
			}
		}
		if !isAmbiguous(err) {
			return err
		}
		if firstAmbiguous.IsZero() {
			firstAmbiguous = time.Now()
		}
		s.stats.ambiguous.Add(1)
		s.stats.failed.Add(1)
		if time.Since(firstAmbiguous) >= s.cfg.OutcomeWithin {
			return &undecidedError{last: errors.Unwrap(err)}
		}
		// Resends back off further than contention does: a DynamoDB that
		// cannot answer is not helped by being asked hundreds of times.
		s.sleep(n, max(s.cfg.MaxDelay, s.cfg.OutcomeWithin/10))
	}
}

// committed counts a committed transaction of n events.
func (s *Store) committed(n int, out *dynamodb.TransactWriteItemsOutput) {
	s.stats.commits.Add(1)
	s.stats.events.Add(int64(n))
	if out == nil {
		return
	}
	for _, c := range out.ConsumedCapacity {
		if c.CapacityUnits != nil {
			s.stats.milliWCU.Add(int64(*c.CapacityUnits * 1000))
		}
	}
}

// holds reports whether the row at e.Seq is the event e (consistent read).
func (s *Store) holds(ctx context.Context, tenant string, e envelope.Envelope) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	row, err := s.eventAt(ctx, tenant, e.Seq)
	if err != nil {
		return false, err
	}
	return row != nil && row.ID == e.ID, nil
}

// seal reads the head if hv knows none, seals batch on it and builds the
// round's request. round is the number of the round's first attempt: with the
// event ids and seqs it makes the token, so a re-seal, even at the same seqs,
// never reuses a token.
func (s *Store) seal(ctx context.Context, tenant string, batch []*request, hv *headView, round int) (*dynamodb.TransactWriteItemsInput, []owner, error) {
	if !hv.known {
		rctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
		h, row, err := s.readHead(rctx, tenant)
		cancel()
		if err != nil {
			return nil, nil, err
		}
		n, err := headShards(row)
		if err != nil {
			return nil, nil, fmt.Errorf("head row of chain %q: %w", tenant, err)
		}
		hv.set(h, n)
	}
	if err := s.checkRecorded(tenant, hv.shards); err != nil {
		return nil, nil, err
	}
	head := hv.head
	var prevSeq int64
	var prevHash string
	if head != nil {
		prevSeq, prevHash = head.LastSeq, head.LastHash
	} else {
		prevHash = chain.Genesis(tenant)
	}
	items := make([]types.TransactWriteItem, 1, 1+len(batch)*2)
	owners := make([]owner, 1, cap(items)) // owners[i] says whose action items[i] is
	owners[0] = owner{req: -1, role: roleHead}
	seq, hash := prevSeq, prevHash
	for i, r := range batch {
		seq++
		r.env.Seq, r.env.PrevHash = seq, hash
		if err := chain.Seal(&r.env); err != nil {
			return nil, nil, err
		}
		hash = r.env.Hash
		it, err := r.row.Item(r.env.Seq, r.env.PrevHash, r.env.Hash)
		if err != nil {
			return nil, nil, err
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName:           aws.String(s.cfg.Table),
			Item:                it,
			ConditionExpression: aws.String("attribute_not_exists(#t)"),
			ExpressionAttributeNames: map[string]string{
				"#t": keys.AttrTenant,
			},
		}})
		owners = append(owners, owner{req: i, role: roleEvent})
		if r.idemKey != "" {
			items = append(items, types.TransactWriteItem{Put: s.idemPut(tenant, r)})
			owners = append(owners, owner{req: i, role: roleIdem})
		}
		for j, x := range r.extra {
			items = append(items, x)
			owners = append(owners, owner{req: i, role: roleExtra, index: j})
		}
	}
	lastEnv := batch[len(batch)-1].env
	items[0] = types.TransactWriteItem{Put: s.headPut(tenant, prevSeq, head != nil, lastEnv)}
	return &dynamodb.TransactWriteItemsInput{
		TransactItems:          items,
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		ClientRequestToken:     aws.String(requestToken(batch, round)),
	}, owners, nil
}

// headPut moves the head from prevSeq to the batch's last event. The head row
// is stamped with the tenant and a dedup id derived from (never equal to) the
// event id: it reaches the stream in the same transaction as the event, and if
// the Pipe's filter were ever missing, an equal dedup id would make SQS drop
// one of the two messages.
func (s *Store) headPut(tenant string, prevSeq int64, exists bool, last envelope.Envelope) *types.Put {
	p := &types.Put{
		TableName: aws.String(s.cfg.Table),
		Item: map[string]types.AttributeValue{
			keys.AttrTenant:      &types.AttributeValueMemberS{Value: tenant},
			keys.AttrSeq:         &types.AttributeValueMemberN{Value: strconv.Itoa(keys.HeadSeq)},
			keys.AttrKind:        &types.AttributeValueMemberS{Value: keys.KindHead},
			keys.AttrLastSeq:     &types.AttributeValueMemberN{Value: strconv.FormatInt(last.Seq, 10)},
			keys.AttrLastHash:    &types.AttributeValueMemberS{Value: last.Hash},
			keys.AttrLastEventID: &types.AttributeValueMemberS{Value: last.ID},
			keys.AttrDedupID:     &types.AttributeValueMemberS{Value: HeadDedupID(last.ID)},
		},
		ExpressionAttributeNames: map[string]string{"#t": keys.AttrTenant},
		// A lost race returns the head that won it: the retry re-seals on it
		// without a read (and without the round trip in which the head would
		// move again).
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if n := s.shardCount(tenant); n > 1 {
		p.Item[keys.AttrShards] = &types.AttributeValueMemberN{Value: strconv.Itoa(n)}
	}
	if exists {
		p.ExpressionAttributeNames["#l"] = keys.AttrLastSeq
		p.ExpressionAttributeNames["#s"] = keys.AttrShards
		p.ExpressionAttributeValues = map[string]types.AttributeValue{
			":l": &types.AttributeValueMemberN{Value: strconv.FormatInt(prevSeq, 10)},
			":s": &types.AttributeValueMemberN{Value: strconv.Itoa(s.shardCount(tenant))},
		}
		// The shard count is checked in the condition, not only when the head
		// is read: the store seals on the head it remembers, and a head since
		// rewritten by an emitter with more shards (or by something other
		// than the event store) must refuse the write, returning the row that
		// seal then checks.
		p.ConditionExpression = aws.String("attribute_exists(#t) AND #l = :l AND (attribute_not_exists(#s) OR #s <= :s)")
	} else {
		p.ConditionExpression = aws.String("attribute_not_exists(#t)")
	}
	return p
}

// HeadDedupID is the dedup id stamped on the head row committed with the event
// eventID: derived from it, never equal to it.
func HeadDedupID(eventID string) string { return "head-" + eventID }

// requestToken names one seal of a batch (ClientRequestToken, at most 36
// characters: a UUID). It is derived from every event id and seq in the
// request and the round, so the resends of one request share it and no two
// different requests ever do (DynamoDB would refuse the second with
// IdempotentParameterMismatch).
func requestToken(batch []*request, round int) string {
	var b strings.Builder
	for _, r := range batch {
		b.WriteString(r.env.ID)
		b.WriteByte('@')
		b.WriteString(strconv.FormatInt(r.env.Seq, 10))
		b.WriteByte('/')
	}
	b.WriteString(strconv.Itoa(round))
	return uuid.NewSHA1(tokenSpace, []byte(b.String())).String()
}

var tokenSpace = uuid.MustParse("6f1c2a4e-5b0d-4f5e-9a57-2d7f3c1b8e90")

// Head reads a tenant's head row with a strongly consistent read; nil when the
// tenant has no events. Reading needs the tenant explicitly: it is the
// operator's read path (reconcile, export), not the write path.
func (s *Store) Head(ctx context.Context, tenant string) (*chain.Head, error) {
	h, _, err := s.readHead(ctx, tenant)
	return h, err
}

// readHead is Head with the row it read (nil when none).
func (s *Store) readHead(ctx context.Context, tenant string) (*chain.Head, map[string]types.AttributeValue, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.cfg.Table),
		ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			keys.AttrTenant: &types.AttributeValueMemberS{Value: tenant},
			keys.AttrSeq:    &types.AttributeValueMemberN{Value: strconv.Itoa(keys.HeadSeq)},
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read head of tenant %q: %w", tenant, err)
	}
	if out.Item == nil {
		return nil, nil, nil
	}
	h, err := HeadFromItem(out.Item)
	if err != nil {
		return nil, nil, err
	}
	return h, out.Item, nil
}

// headShards returns the shard count a head row was written with
// (keys.AttrShards), 1 when it has none (or there is no row). Only emitting
// reads it: the log's readers (Head) ignore it.
func headShards(it map[string]types.AttributeValue) (int, error) {
	v, ok := it[keys.AttrShards]
	if !ok {
		return 1, nil
	}
	if n, isN := v.(*types.AttributeValueMemberN); isN {
		if k, err := strconv.Atoi(n.Value); err == nil && k >= 1 {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%s is not a whole number of chain shards (2 to %d): "+
		"something other than the event store wrote it; run reconcile", keys.AttrShards, tenancy.MaxShards)
}

// shardCount is how many chains this store gives the tenant of chain
// (Config.Shards; 1: one chain).
func (s *Store) shardCount(chain string) int {
	return max(1, s.cfg.Shards[tenancy.TenantOf(chain)])
}

// checkRecorded refuses to write chain when its head was written by an
// emitter configured with more shards for the tenant than this store: the
// two would send one shard key to different chains.
func (s *Store) checkRecorded(chain string, recorded int) error {
	if n := s.shardCount(chain); recorded > n {
		return &ShardCountError{Tenant: tenancy.TenantOf(chain), Chain: chain, Configured: n, Recorded: recorded}
	}
	return nil
}

// HeadFromItem decodes a head row.
func HeadFromItem(it map[string]types.AttributeValue) (*chain.Head, error) {
	h := &chain.Head{}
	t, ok := it[keys.AttrTenant].(*types.AttributeValueMemberS)
	if !ok {
		return nil, fmt.Errorf("head row: %s missing or not a string", keys.AttrTenant)
	}
	h.TenantID = t.Value
	n, ok := it[keys.AttrLastSeq].(*types.AttributeValueMemberN)
	if !ok {
		return nil, fmt.Errorf("head row of tenant %q: %s missing or not a number", h.TenantID, keys.AttrLastSeq)
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("head row of tenant %q: %s %q: %w", h.TenantID, keys.AttrLastSeq, n.Value, err)
	}
	h.LastSeq = v
	lh, ok := it[keys.AttrLastHash].(*types.AttributeValueMemberS)
	if !ok {
		return nil, fmt.Errorf("head row of tenant %q: %s missing or not a string", h.TenantID, keys.AttrLastHash)
	}
	h.LastHash = lh.Value
	return h, nil
}
