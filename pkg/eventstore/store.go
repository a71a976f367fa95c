package eventstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
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
	Now         func() time.Time // for tests; default time.Now
}

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
	FailedAttempts int64   // calls cancelled by head contention
	WCU            float64 // write capacity units consumed (ReturnConsumedCapacity)
}

type statCounters struct {
	events, commits, attempts, failed atomic.Int64
	milliWCU                          atomic.Int64
}

// Stats returns the store's counters so far.
func (s *Store) Stats() Stats {
	return Stats{
		Events:         s.stats.events.Load(),
		Commits:        s.stats.commits.Load(),
		Attempts:       s.stats.attempts.Load(),
		FailedAttempts: s.stats.failed.Load(),
		WCU:            float64(s.stats.milliWCU.Load()) / 1000,
	}
}

// request is one Emit waiting to be committed.
type request struct {
	ctx   context.Context
	env   envelope.Envelope
	extra []types.TransactWriteItem
	size  int // estimated bytes of the event row and the extra writes
	done  chan error
}

// Emit appends one event of eventType for the tenant bound to ctx, in one
// transaction with the caller's extra writes, then runs the INLINE and LOCAL
// lanes. It returns the committed envelope (seq, prev_hash, hash set).
//
// Errors: tenancy.ErrNoTenant; a *envelope.FieldError or the catalog's
// refusal; ErrTooLarge; a *CallerWriteError naming the caller's write;
// a *ContentionError; a *PostCommitError (the event did commit). In every
// case but the last, nothing was written.
func (s *Store) Emit(ctx context.Context, eventType string, payload any, extra ...types.TransactWriteItem) (envelope.Envelope, error) {
	tenant, err := tenancy.Tenant(ctx)
	if err != nil {
		return envelope.Envelope{}, fmt.Errorf("emit %s: %w", eventType, err)
	}
	if !envelope.ValidType(eventType) {
		return envelope.Envelope{}, fmt.Errorf("emit: %w", &envelope.FieldError{Field: "type",
			Reason: fmt.Sprintf("%q is not <module>.<name> (e.g. order.placed)", eventType)})
	}
	version, norm, err := s.cfg.Catalog.Prepare(eventType, payload)
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
		extra: extra,
		done:  make(chan error, 1),
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
	if err := <-req.done; err != nil {
		return envelope.Envelope{}, fmt.Errorf("emit %s: %w", eventType, err)
	}
	env := req.env
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
		a := 1 + len(r.extra)
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
	attempt := 0
	var last error
	for len(batch) > 0 {
		// A caller that gave up before its turn is not committed.
		batch = dropCancelled(batch)
		if len(batch) == 0 {
			return
		}
		attempt++
		// The write runs detached from the callers' cancellation, so every
		// caller learns a definite outcome: a write cut off mid-flight could
		// have committed. Callers that gave up are dropped between attempts.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(batch[0].ctx), s.cfg.MaxElapsed)
		err := s.attempt(ctx, tenant, batch, hv)
		cancel()
		switch {
		case err == nil:
			for _, r := range batch {
				r.done <- nil
			}
			return
		case isContention(err):
			last = err
			s.stats.failed.Add(1)
			if attempt >= s.cfg.MaxAttempts || time.Since(start) >= s.cfg.MaxElapsed {
				ce := &ContentionError{Tenant: tenant, Attempts: attempt, Elapsed: time.Since(start), Last: last}
				for _, r := range batch {
					r.done <- ce
				}
				return
			}
			s.backoff(attempt)
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

func (s *Store) backoff(attempt int) {
	d := s.cfg.BaseDelay << min(attempt-1, 16)
	if d > s.cfg.MaxDelay || d <= 0 {
		d = s.cfg.MaxDelay
	}
	time.Sleep(rand.N(d) + time.Microsecond)
}

// attempt tries to commit batch once, from the head hv knows (read first if
// it knows none). It keeps hv current: the new head after a commit, the same
// head after a caller's refusal, and nothing after contention or a failure.
func (s *Store) attempt(ctx context.Context, tenant string, batch []*request, hv *headView) (err error) {
	if !hv.known {
		h, err := s.Head(ctx, tenant)
		if err != nil {
			return err
		}
		hv.known, hv.head = true, h
	}
	defer func() {
		var cw *batchCallerError
		if err != nil && !errors.As(err, &cw) {
			hv.known = false
		}
	}()
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
			return err
		}
		hash = r.env.Hash
		it, err := r.env.ToItem()
		if err != nil {
			return err
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
		for j, x := range r.extra {
			items = append(items, x)
			owners = append(owners, owner{req: i, role: roleExtra, index: j})
		}
	}
	lastEnv := batch[len(batch)-1].env
	items[0] = types.TransactWriteItem{Put: s.headPut(tenant, prevSeq, head != nil, lastEnv)}

	out, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems:          items,
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		ClientRequestToken:     aws.String(requestToken(lastEnv.ID, lastEnv.Seq, len(items))),
	})
	s.stats.attempts.Add(1)
	if err != nil {
		return classify(err, owners)
	}
	hv.head = &chain.Head{TenantID: tenant, LastSeq: lastEnv.Seq, LastHash: lastEnv.Hash}
	s.stats.commits.Add(1)
	s.stats.events.Add(int64(len(batch)))
	for _, c := range out.ConsumedCapacity {
		if c.CapacityUnits != nil {
			s.stats.milliWCU.Add(int64(*c.CapacityUnits * 1000))
		}
	}
	return nil
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

// requestToken makes the transaction idempotent across the SDK's own retries
// (DynamoDB honours a token for 10 minutes): the same attempt gets the same
// token, a different attempt (another seq or batch) another one.
func requestToken(lastID string, lastSeq int64, n int) string {
	return uuid.NewSHA1(tokenSpace, []byte(lastID+"/"+strconv.FormatInt(lastSeq, 10)+"/"+strconv.Itoa(n))).String()
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
