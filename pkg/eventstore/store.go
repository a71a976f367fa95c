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
)

// DynamoDB is the part of the DynamoDB API the store uses.
type DynamoDB interface {
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Catalog decides what may be emitted. Prepare refuses an undeclared type or
// a payload that does not fit the type's declared schema, and returns the
// schema version and the payload in envelope form (envelope.NormalizePayload).
type Catalog interface {
	Prepare(eventType string, payload any) (schemaVersion int, normalized map[string]any, err error)
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
	Catalog    Catalog    // required: undeclared types are refused
	Dispatcher Dispatcher // optional: INLINE and LOCAL lanes
	Batching   Batching
	// Retry budget for head contention. Zero values take the defaults:
	// 64 attempts, 10 s, backoff 1 ms doubling to 50 ms, full jitter.
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
	Now           func() time.Time // for tests; default time.Now
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

	stats statCounters
}

// New returns a Store. It refuses a config without a table or a catalog.
func New(db DynamoDB, cfg Config) (*Store, error) {
	if cfg.Table == "" {
		return nil, errors.New("eventstore: Config.Table is empty; set it to the events table name")
	}
	if cfg.Catalog == nil {
		return nil, errors.New("eventstore: Config.Catalog is nil; undeclared event types must be refused")
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
		cfg.MaxDelay = 50 * time.Millisecond
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
	return &Store{db: db, cfg: cfg, tenants: map[string]*tenantQueue{}}, nil
}

// Stats are cumulative counters for benchmarks and health checks.
type Stats struct {
	Events         int64   // events committed
	Commits        int64   // transactions committed
	Attempts       int64   // TransactWriteItems calls
	FailedAttempts int64   // calls cancelled by head contention, or ambiguous
	Ambiguous      int64   // calls whose outcome DynamoDB did not tell (resent identical)
	WCU            float64 // write capacity units consumed (ReturnConsumedCapacity)
}

type statCounters struct {
	events, commits, attempts, failed, ambiguous atomic.Int64
	milliWCU                                     atomic.Int64
}

// Stats returns the store's counters so far.
func (s *Store) Stats() Stats {
	return Stats{
		Events:         s.stats.events.Load(),
		Commits:        s.stats.commits.Load(),
		Attempts:       s.stats.attempts.Load(),
		FailedAttempts: s.stats.failed.Load(),
		Ambiguous:      s.stats.ambiguous.Load(),
		WCU:            float64(s.stats.milliWCU.Load()) / 1000,
	}
}

// request is one Emit waiting to be committed.
type request struct {
	ctx     context.Context
	env     envelope.Envelope
	extra   []types.TransactWriteItem
	idemKey string
	size    int // estimated bytes of the event row, the idempotency row and the extra writes
	done    chan error
}

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
	// EmitWith with the same key writes nothing and returns the event the
	// first one committed (whatever its type, payload or extra writes were;
	// the INLINE and LOCAL lanes do not run again). For emits that carry no
	// conditional write of their own to make a retry safe. It costs one more
	// item in the transaction (see idempotency.go for the measured WCU).
	IdempotencyKey string
}

// Emit appends one event of eventType for the tenant bound to ctx, in one
// transaction with the caller's extra writes, then runs the INLINE and LOCAL
// lanes. It returns the committed envelope (seq, prev_hash, hash set).
//
// Errors: tenancy.ErrNoTenant; a *envelope.FieldError or the catalog's
// refusal; ErrTooLarge; a *CallerWriteError naming the caller's write;
// a *ContentionError; an *OutcomeUnknownError (committed at its Seq or not at
// all: Settle tells which); a *PostCommitError (the event did commit). In
// every case but the last two, nothing was written.
func (s *Store) Emit(ctx context.Context, eventType string, payload any, extra ...types.TransactWriteItem) (envelope.Envelope, error) {
	return s.EmitWith(ctx, EmitInput{Type: eventType, Payload: payload, Extra: extra})
}

// EmitWith is Emit with the options of EmitInput.
func (s *Store) EmitWith(ctx context.Context, in EmitInput) (envelope.Envelope, error) {
	eventType := in.Type
	tenant, err := tenancy.Tenant(ctx)
	if err != nil {
		return envelope.Envelope{}, fmt.Errorf("emit %s: %w", eventType, err)
	}
	if !envelope.ValidType(eventType) {
		return envelope.Envelope{}, fmt.Errorf("emit: %w", &envelope.FieldError{Field: "type",
			Reason: fmt.Sprintf("%q is not <module>.<name> (e.g. order.placed)", eventType)})
	}
	if err := checkIdemKey(in.IdempotencyKey); err != nil {
		return envelope.Envelope{}, fmt.Errorf("emit %s: %w", eventType, err)
	}
	version, norm, err := s.cfg.Catalog.Prepare(eventType, in.Payload)
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
		},
		extra:   in.Extra,
		idemKey: in.IdempotencyKey,
		done:    make(chan error, 1),
	}
	if err := req.env.Validate(); err != nil {
		return envelope.Envelope{}, fmt.Errorf("emit %s: %w", eventType, err)
	}
	if err := s.checkAlone(req); err != nil {
		return envelope.Envelope{}, fmt.Errorf("emit %s: %w", eventType, err)
	}

	if s.cfg.Batching == BatchNone {
		s.commit(tenant, []*request{req}, &headView{})
	} else {
		s.enqueue(tenant, req)
	}
	err = <-req.done
	env := req.env // the leader is done with req: read it only now
	if err != nil {
		var used *idemUsedError
		if !errors.As(err, &used) {
			return envelope.Envelope{}, fmt.Errorf("emit %s: %w", eventType, err)
		}
		first, err := s.idemEvent(ctx, tenant, req.idemKey)
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

// tenantQueue holds one tenant's Emits waiting for the current leader.
type tenantQueue struct {
	pending []*request
	leading bool
}

// enqueue adds req to its tenant's queue; the first caller to find no leader
// commits batches until the queue is empty. A lone caller leads at once.
func (s *Store) enqueue(tenant string, req *request) {
	s.mu.Lock()
	q := s.tenants[tenant]
	if q == nil {
		q = &tenantQueue{}
		s.tenants[tenant] = q
	}
	q.pending = append(q.pending, req)
	if q.leading {
		s.mu.Unlock()
		return
	}
	q.leading = true
	// The leader remembers the head it last committed, so a tenant's next
	// batch needs no read: only contention (another process moved the head)
	// sends it back to DynamoDB for the head.
	hv := &headView{}
	for {
		batch := takeBatch(q)
		if len(batch) == 0 {
			q.leading = false
			delete(s.tenants, tenant)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.commit(tenant, batch, hv)
		s.mu.Lock()
	}
}

// takeBatch removes from q the longest prefix that fits one transaction.
func takeBatch(q *tenantQueue) []*request {
	actions, bytes, n := 1, headRowBytes, 0
	for _, r := range q.pending {
		a := r.actions()
		if n > 0 && (actions+a > maxActions || bytes+r.size > maxTxBytes) {
			break
		}
		actions += a
		bytes += r.size
		n++
	}
	batch := append([]*request(nil), q.pending[:n]...)
	q.pending = q.pending[n:]
	return batch
}

// headView is what a committer knows of its tenant's head: nothing yet (read
// it), or the head as of its last read or commit (nil head: no events yet).
type headView struct {
	known bool
	head  *chain.Head
}

// commit appends batch (one tenant's requests, in order) and signals every
// request's done channel exactly once.
func (s *Store) commit(tenant string, batch []*request, hv *headView) {
	start := time.Now()
	attempts := 0
	for len(batch) > 0 {
		// A caller that gave up before its turn is not committed. Callers
		// are only ever dropped here, between rounds: within a round the
		// request is fixed, as its resends must be identical.
		batch = dropCancelled(batch)
		if len(batch) == 0 {
			return
		}
		err := s.round(tenant, batch, hv, &attempts)
		var undecided *undecidedError
		switch {
		case err == nil:
			for _, r := range batch {
				r.done <- nil
			}
			return
		case errors.As(err, &undecided):
			for _, r := range batch {
				r.done <- &OutcomeUnknownError{Tenant: tenant, EventID: r.env.ID, Seq: r.env.Seq,
					Attempts: attempts, Elapsed: time.Since(start), Last: undecided.last}
			}
			return
		case isContention(err):
			s.stats.failed.Add(1)
			if attempts >= s.cfg.MaxAttempts || time.Since(start) >= s.cfg.MaxElapsed {
				ce := &ContentionError{Tenant: tenant, Attempts: attempts, Elapsed: time.Since(start), Last: err}
				for _, r := range batch {
					r.done <- ce
				}
				return
			}
			s.backoff(attempts)
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
					s.commit(tenant, []*request{r}, hv)
				}
				return
			}
			if split != nil {
				err = split.err
			}
			for _, r := range batch {
				r.done <- err
			}
			return
		}
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

func (s *Store) backoff(attempt int) { s.sleep(attempt, s.cfg.MaxDelay) }

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
		out, callErr := s.db.TransactWriteItems(ctx, in)
		cancel()
		s.stats.attempts.Add(1)
		if callErr == nil {
			hv.head = &chain.Head{TenantID: tenant, LastSeq: last.Seq, LastHash: last.Hash}
			s.committed(len(batch), out)
			return nil
		}
		err = classify(callErr, owners)
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
		h, err := s.Head(rctx, tenant)
		cancel()
		if err != nil {
			return nil, nil, err
		}
		hv.known, hv.head = true, h
	}
	head := hv.head
	prevSeq, prevHash := int64(0), chain.Genesis(tenant)
	if head != nil {
		prevSeq, prevHash = head.LastSeq, head.LastHash
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
		it, err := r.env.ToItem()
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
			items = append(items, types.TransactWriteItem{Put: s.idemPut(tenant, r.idemKey, r.env)})
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
	}
	if exists {
		p.ExpressionAttributeNames["#l"] = keys.AttrLastSeq
		p.ExpressionAttributeValues = map[string]types.AttributeValue{
			":l": &types.AttributeValueMemberN{Value: strconv.FormatInt(prevSeq, 10)},
		}
		p.ConditionExpression = aws.String("attribute_exists(#t) AND #l = :l")
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
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.cfg.Table),
		ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			keys.AttrTenant: &types.AttributeValueMemberS{Value: tenant},
			keys.AttrSeq:    &types.AttributeValueMemberN{Value: strconv.Itoa(keys.HeadSeq)},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("read head of tenant %q: %w", tenant, err)
	}
	if out.Item == nil {
		return nil, nil
	}
	return HeadFromItem(out.Item)
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
