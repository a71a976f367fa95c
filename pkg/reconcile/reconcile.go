package reconcile

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// Mode selects where a walk starts.
type Mode string

// Walk modes.
const (
	// Incremental starts at the tenant's checkpoint (genesis without one).
	Incremental Mode = "incremental"
	// Full starts at genesis, whatever the checkpoint says.
	Full Mode = "full"
)

// ReasonCheckpointMismatch: the stored event at the checkpoint's (or a
// resumed walk's) seq no longer has the hash that was verified there.
const ReasonCheckpointMismatch chain.Reason = "checkpoint mismatch"

// Sentinel errors for requests the caller must change.
var (
	// ErrBadCursor: the cursor was not returned by this endpoint, or does not
	// fit the request.
	ErrBadCursor = errors.New("bad cursor")
	// ErrCursorExpired: the walk the cursor names is gone (walks expire).
	ErrCursorExpired = errors.New("cursor expired")
)

// Log is the read side of the event log. *eventstore.Store implements it.
type Log interface {
	Head(ctx context.Context, tenant string) (*chain.Head, error)
	Events(ctx context.Context, tenant string, after int64, limit int32) (eventstore.Page, error)
	Tenants(ctx context.Context, cursor string, limit int32) ([]string, string, error)
	// ChainsOf lists the chains a tenant id or chain name stands for, in
	// shard order (eventstore.Store.ChainsOf).
	ChainsOf(ctx context.Context, name string) ([]string, error)
}

var _ Log = (*eventstore.Store)(nil)

// rowLog is a Log that can return a page's rows undecoded
// (eventstore.Store.EventRows): reconcile then verifies each row in place
// (chain.Verifier.NextItem) and decodes only a row that is not certainly
// well formed.
type rowLog interface {
	EventRows(ctx context.Context, tenant string, after int64, limit int32) (eventstore.Page, error)
}

var _ rowLog = (*eventstore.Store)(nil)

// DeadLetters lists a tenant's open dead letters. *delivery.DynamoStore
// implements it.
type DeadLetters interface {
	DeadLetters(ctx context.Context, tenant, cursor string, limit int32) ([]delivery.DeadLetter, string, error)
	CountDeadLetters(ctx context.Context, tenant string) (int, error)
}

var _ DeadLetters = (*delivery.DynamoStore)(nil)

// Config configures a Reconciler.
type Config struct {
	Log         Log         // required
	DeadLetters DeadLetters // required
	State       State       // required
	// Rounds keeps scheduled rounds (Scheduled); NewDynamoState on the
	// state table implements it.
	Rounds Rounds
	// Watermarks and Subscriptions (the application's DURABLE
	// subscriptions, delivery.DurableSubscriptions) enable the delivery
	// audit (watermark.go); without them a report has no subscriptions.
	Watermarks    Watermarks
	Subscriptions []string
	// Carry derives each watermark from its stored checkpoint and the
	// claims after it, and writes the checkpoint forward
	// (delivery.WatermarkReader on the state table WithLog): the consumer
	// writes no watermark, so without it a report shows the checkpoints
	// alone, which only dlq-repair and this audit move.
	Carry Carrier
	// Starts and Declared (delivery.DeclaredStarts) report each
	// subscription's start and backfill; an absent watermark is then where
	// the subscription's start puts it, not 0.
	Starts   Starts
	Declared map[string]catalog.Start
	// Notary reads the notary's view of each chain (notary.DynamoStore on
	// the state table); with it, a walk that reaches the head compares the
	// table with what the notary saw appended (notary.go).
	Notary NotaryStates
	// PageSize is the number of events read per query (default 500).
	PageSize int32
	// MaxDeadLetters caps the dead letters listed per tenant for their
	// subscriptions (default 1000); the count stays exact beyond it.
	MaxDeadLetters int
	// WalkTTL is how long an incomplete walk can be resumed (default 24 h).
	WalkTTL time.Duration
	// MaxDuration bounds a call whose context has no deadline (default 30 s).
	// With a deadline, a call stops 10 % (at least MinReserve) before it.
	MaxDuration time.Duration
	MinReserve  time.Duration // default 2 s
	Logger      *slog.Logger  // default slog.Default()
	Metrics     *obs.Metrics
	Now         func() time.Time // default time.Now
}

// Reconciler walks tenants' chains.
type Reconciler struct {
	cfg Config
	log *slog.Logger
}

// New returns a Reconciler; it refuses a config without its stores.
func New(cfg Config) (*Reconciler, error) {
	switch {
	case cfg.Log == nil:
		return nil, errors.New("reconcile: Config.Log is nil; pass the event store")
	case cfg.DeadLetters == nil:
		return nil, errors.New("reconcile: Config.DeadLetters is nil; pass the delivery store")
	case cfg.State == nil:
		return nil, errors.New("reconcile: Config.State is nil; pass NewDynamoState(db, stateTable)")
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 500
	}
	if cfg.MaxDeadLetters <= 0 {
		cfg.MaxDeadLetters = 1000
	}
	if cfg.WalkTTL <= 0 {
		cfg.WalkTTL = 24 * time.Hour
	}
	if cfg.MaxDuration <= 0 {
		cfg.MaxDuration = 30 * time.Second
	}
	if cfg.MinReserve <= 0 {
		cfg.MinReserve = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Reconciler{cfg: cfg, log: cfg.Logger}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r, nil
}

// Break is the first break of a chain, as reported.
type Break struct {
	Seq      int64        `json:"seq"`
	Reason   chain.Reason `json:"reason"`
	Expected string       `json:"expected"`
	Got      string       `json:"got"`
}

// Report is the result of one tenant's walk (see the package doc).
type Report struct {
	Tenant          string `json:"tenant"`
	ChainIntact     *bool  `json:"chain_intact"`
	Complete        bool   `json:"complete"`
	Mode            Mode   `json:"mode"`
	LastSeq         int64  `json:"last_seq"`
	Verified        int64  `json:"verified"`
	VerifiedThrough int64  `json:"verified_through"`
	TrustedThrough  int64  `json:"trusted_through"`
	CheckpointSeq   int64  `json:"checkpoint_seq"`
	FirstBreak      *Break `json:"first_break"`
	// CheckpointCoversBreak: a full walk found a break before the
	// checkpoint, which incremental walks trust; they will not see it.
	CheckpointCoversBreak bool     `json:"checkpoint_covers_break,omitempty"`
	DeadLetterCount       int      `json:"dead_letter_count"`
	DeadLetters           []string `json:"dead_letters"`
	DeadLettersTruncated  bool     `json:"dead_letters_truncated,omitempty"`
	// Subscriptions is the delivery audit, per DURABLE subscription.
	Subscriptions []SubscriptionDelivery `json:"subscriptions,omitempty"`
	// RetiredSubscriptions have watermarks of this tenant but are no longer
	// declared: dlq-repair retires them.
	RetiredSubscriptions []string `json:"retired_subscriptions,omitempty"`
	// Notary is the notary's view of the chain (with Config.Notary).
	Notary *NotaryView `json:"notary,omitempty"`
	// effectsUnknown counts, per subscription, the dead letters listed
	// whose effect is of unknown outcome (DeadLetter.Effect).
	effectsUnknown map[string]int
	Reads          int `json:"reads"`
	StateReads     int `json:"state_reads"`
	// Findings are what the walk found wrong beside the chain: a
	// checkpoint object that does not verify, and what the comparison with
	// the notary and the delivery watermarks found (a rollback, a rewrite,
	// a notary finding), each with its reason in words for a person.
	Findings []Finding `json:"findings,omitempty"`
}

// FindingCheckpointInvalid: the object at the key the walk's checkpoint
// belongs at does not verify, so that checkpoint was not signed (its metric
// is keys.MetricCheckpointInvalid).
const FindingCheckpointInvalid = keys.MetricCheckpointInvalid

// Kinds of the findings of the comparison with the notary (notary.go).
const (
	FindingNotary       = "Notary"       // the notary reported this chain (Reason quotes it)
	FindingNotaryNoView = "NotaryNoView" // the notary has no view of a chain with events
	FindingRollback     = "Rollback"     // the head is below what the notary saw, or below a watermark (Key: the subscription)
	FindingRewrite      = "Rewrite"      // the head's hash is not the one the notary saw appended
)

// findingState is a State that reports the checkpoint objects it passed
// over (*SignedState).
type findingState interface {
	CheckpointFindings(ctx context.Context, tenant string) (*Checkpoint, []Finding, error)
}

// addFindings adds fs to the report, once per (kind, key).
func (r *Report) addFindings(fs ...Finding) {
	for _, f := range fs {
		if !slices.ContainsFunc(r.Findings, func(g Finding) bool { return g.Kind == f.Kind && g.Key == f.Key }) {
			r.Findings = append(r.Findings, f)
		}
	}
}

// Finding is one thing a walk found wrong outside the chain itself.
type Finding struct {
	Kind   string `json:"kind"`             // e.g. FindingCheckpointInvalid
	Key    string `json:"key,omitempty"`    // the object it is about
	Reason string `json:"reason,omitempty"` // why, in words an operator acts on
}

// TenantRequest asks for one tenant's walk.
type TenantRequest struct {
	// Tenant is a tenant id (its chains are walked together) or one chain's
	// name, tenancy.Chain(tenant, k) (that chain alone).
	Tenant    string
	Mode      Mode   // "" means Incremental (or the cursor's mode)
	Cursor    string // from a previous TenantResult
	MaxEvents int64  // 0: bounded by time only
}

// TenantResult is a Report and, when incomplete, the cursor to resume with.
// For a tenant with chain shards, Report is the first chain this call
// walked (the tenant's own chain, unless the call resumed at a later one)
// and Sharded adds the rest and a summary; nil (and absent from the JSON)
// for a tenant with one chain and for a request that names a chain.
type TenantResult struct {
	Report
	*Sharded
	Cursor *string `json:"cursor"`
}

// Sharded is what a walk of a tenant with chain shards adds to its
// TenantResult (see the package doc, "Chain shards").
type Sharded struct {
	// Shards are the Reports of the chains this call walked after the
	// first (Report), in shard order.
	Shards []Report `json:"shards"`
	// Chains is the number of the tenant's chains: its own and every
	// shard's with a head row.
	Chains int `json:"chains"`
	// ChainsIntact answers for the whole walk, earlier calls of it
	// included: false when a chain broke, true when every chain was walked
	// to its end unbroken, null while chains remain (cursor is set).
	ChainsIntact *bool `json:"chains_intact"`
	// BrokenChains names the chains found broken so far, this call's and
	// earlier calls' of the walk, in shard order.
	BrokenChains []string `json:"broken_chains"`
}

// AllRequest asks for a page of tenants.
type AllRequest struct {
	Mode      Mode
	Cursor    string
	Limit     int   // tenants per page (default 20)
	MaxEvents int64 // events per call, across tenants; 0: bounded by time only
}

// AllResult is one page of tenants.
type AllResult struct {
	Mode       Mode     `json:"mode"`
	Complete   bool     `json:"complete"` // no more tenants after this page
	Cursor     *string  `json:"cursor"`
	Reads      int      `json:"reads"`
	StateReads int      `json:"state_reads"`
	Tenants    []Report `json:"tenants"`
}

// Tenant walks one tenant's chain, or resumes the walk req.Cursor names.
// A tenant id whose chain shards have events has its chains walked one
// after another, in shard order, within the call's one budget; a chain's
// name (tenancy.Chain) walks that chain alone.
func (r *Reconciler) Tenant(ctx context.Context, req TenantRequest) (TenantResult, error) {
	b := r.budget(ctx, req.MaxEvents)
	mode := req.Mode
	var c cursor
	if req.Cursor != "" {
		var err error
		if c, err = decodeCursor(req.Cursor); err != nil {
			return TenantResult{}, err
		}
		if c.All {
			return TenantResult{}, fmt.Errorf("%w: it pages all tenants; omit tenant to continue it, or omit the cursor", ErrBadCursor)
		}
		if c.Tenant != req.Tenant {
			what := "tenant " + strconv.Quote(c.Tenant)
			switch {
			case c.Chain != "":
				what = fmt.Sprintf("the chains of tenant %q (at chain %q)", c.Tenant, c.Chain)
			case tenancy.TenantOf(c.Tenant) != c.Tenant:
				what = "chain " + strconv.Quote(c.Tenant) + " alone"
			}
			return TenantResult{}, fmt.Errorf("%w: it continues %s; pass tenant=%s or omit the cursor", ErrBadCursor, what, c.Tenant)
		}
		if mode != "" && mode != c.Mode {
			return TenantResult{}, fmt.Errorf("%w: it continues a %s walk; omit full, or omit the cursor to start a %s walk", ErrBadCursor, c.Mode, mode)
		}
		mode = c.Mode
	}
	if mode == "" {
		mode = Incremental
	}

	// The tenant's own chain first (walked as ever, head row or not), then
	// its shards' with a head row; a chain's name: that chain alone.
	chains, err := r.cfg.Log.ChainsOf(ctx, req.Tenant)
	if err != nil {
		return TenantResult{}, err
	}
	from := 0
	if req.Cursor != "" {
		if from = slices.Index(chains, c.chain()); from < 0 {
			return TenantResult{}, fmt.Errorf("%w: it continues chain %q, which tenant %q has no head row for; omit the cursor to start a new walk", ErrBadCursor, c.chain(), req.Tenant)
		}
	}

	var reps []Report
	broken := slices.Clone(c.Broken)
	var next *cursor
	for i, ch := range chains[from:] {
		if i > 0 && b.exhausted() {
			// The next chain's walk has not begun: the cursor starts it.
			next = &cursor{Tenant: req.Tenant, Chain: ch, Mode: mode}
			break
		}
		var resume *Walk
		stateReads := 0
		if i == 0 && c.Walk != "" {
			var err error
			if resume, err = r.loadWalk(ctx, ch, c.Walk, mode); err != nil {
				return TenantResult{}, err
			}
			stateReads++
		}
		rep, w, err := r.walk(ctx, ch, mode, resume, b)
		if err != nil {
			return TenantResult{}, err
		}
		rep.StateReads += stateReads
		reps = append(reps, rep)
		if rep.FirstBreak != nil {
			broken = append(broken, ch)
		}
		if w != nil {
			next = &cursor{Tenant: req.Tenant, Chain: ch, Walk: w.ID, Mode: mode}
			break
		}
	}
	res := TenantResult{Report: reps[0]}
	if len(chains) > 1 {
		res.Sharded = &Sharded{Shards: append([]Report{}, reps[1:]...), Chains: len(chains), BrokenChains: append([]string{}, broken...)}
		if intact := len(broken) == 0; !intact || next == nil {
			res.ChainsIntact = &intact
		}
		if next != nil {
			next.Broken = broken
		}
	}
	if next != nil {
		if next.Chain == req.Tenant {
			next.Chain = ""
		}
		s := encodeCursor(*next)
		res.Cursor = &s
	}
	return res, nil
}

// All walks a page of tenants, in the order the log lists them, resuming
// where req.Cursor left off. A tenant whose walk runs out of time ends the
// page (listed with complete=false); the cursor resumes that walk, and the
// tenant is listed again, with the rest of its walk, on the next page.
func (r *Reconciler) All(ctx context.Context, req AllRequest) (AllResult, error) {
	return r.all(ctx, req, r.budget(ctx, req.MaxEvents))
}

// all is All within b, which a scheduled invocation shares across pages.
func (r *Reconciler) all(ctx context.Context, req AllRequest, b *budget) (AllResult, error) {
	limit := req.Limit
	if limit <= 0 {
		limit = 20
	}
	mode := req.Mode
	var c cursor
	if req.Cursor != "" {
		var err error
		if c, err = decodeCursor(req.Cursor); err != nil {
			return AllResult{}, err
		}
		if !c.All {
			return AllResult{}, fmt.Errorf("%w: it continues tenant %q; pass tenant=%s, or omit the cursor", ErrBadCursor, c.Tenant, c.Tenant)
		}
		if mode != "" && mode != c.Mode {
			return AllResult{}, fmt.Errorf("%w: it continues a %s walk; omit full, or omit the cursor to start a %s walk", ErrBadCursor, c.Mode, mode)
		}
		mode = c.Mode
	}
	if mode == "" {
		mode = Incremental
	}
	res := AllResult{Mode: mode, Tenants: []Report{}}
	after := c.After // the last tenant finished; "" = the start
	pageCursor := c.After
	for {
		if b.timeUp() {
			break
		}
		ts, next, err := r.cfg.Log.Tenants(ctx, pageCursor, 0)
		if err != nil {
			return AllResult{}, err
		}
		for _, t := range ts {
			if len(res.Tenants) == limit || b.exhausted() {
				s := encodeCursor(cursor{All: true, After: after, Mode: mode})
				res.Cursor = &s
				return res.sum(), nil
			}
			var resume *Walk
			stateReads := 0
			if c.Walk != "" && t == c.Tenant {
				if resume, err = r.loadWalk(ctx, t, c.Walk, mode); err != nil && !errors.Is(err, ErrCursorExpired) {
					return AllResult{}, err
				}
				stateReads++
			}
			c.Walk = "" // only the first tenant listed can be the one in progress
			rep, w, err := r.walk(ctx, t, mode, resume, b)
			if err != nil {
				return AllResult{}, err
			}
			rep.StateReads += stateReads
			res.Tenants = append(res.Tenants, rep)
			if w != nil {
				s := encodeCursor(cursor{All: true, After: after, Tenant: t, Walk: w.ID, Mode: mode})
				res.Cursor = &s
				return res.sum(), nil
			}
			after = t
		}
		if next == "" {
			res.Complete = true
			return res.sum(), nil
		}
		// Every tenant of this page is done; the next page starts after the
		// scan's last key (a tenant whose head row was already listed).
		pageCursor, after = next, next
	}
	s := encodeCursor(cursor{All: true, After: after, Mode: mode})
	res.Cursor = &s
	return res.sum(), nil
}

func (a AllResult) sum() AllResult {
	a.Reads, a.StateReads = 0, 0
	for _, t := range a.Tenants {
		a.Reads += t.Reads
		a.StateReads += t.StateReads
	}
	return a
}

// anchor is a trusted (seq, hash) a walk starts after.
type anchor struct {
	seq  int64
	hash string
	what string // "checkpoint" or "resume position", for break messages
}

// walk verifies one tenant from genesis, its checkpoint or resume, within b.
// It returns the walk row to save when it ran out of budget.
func (r *Reconciler) walk(ctx context.Context, tenant string, mode Mode, resume *Walk, b *budget) (Report, *Walk, error) {
	// Log records carry the tenant from the context (obs).
	if tctx, err := tenancy.WithChain(ctx, tenant); err == nil {
		ctx = tctx
	}
	rep := Report{Tenant: tenant, Mode: mode, DeadLetters: []string{}}
	var cp *Checkpoint
	var err error
	if fs, ok := r.cfg.State.(findingState); ok {
		var found []Finding
		cp, found, err = fs.CheckpointFindings(ctx, tenant)
		rep.addFindings(found...)
	} else {
		cp, err = r.cfg.State.Checkpoint(ctx, tenant)
	}
	if err != nil {
		return rep, nil, err
	}
	if cp != nil {
		rep.StateReads++
		rep.CheckpointSeq = cp.Seq
	}
	head, err := r.cfg.Log.Head(ctx, tenant)
	if err != nil {
		return rep, nil, err
	}
	if head != nil {
		rep.Reads++
	}

	var from *anchor
	switch {
	case resume != nil:
		rep.Verified, rep.TrustedThrough = resume.Verified, resume.AnchorSeq
		if resume.Seq > 0 {
			from = &anchor{seq: resume.Seq, hash: resume.Hash, what: "resume position"}
		}
	case mode == Incremental && cp != nil:
		from = &anchor{seq: cp.Seq, hash: cp.Hash, what: "checkpoint"}
		rep.TrustedThrough = cp.Seq
	}
	v := chain.NewVerifier(tenant)
	var brk *chain.BreakError
	if from != nil {
		if brk, err = r.checkAnchor(ctx, tenant, from, &rep); err != nil {
			return rep, nil, err
		}
		v = chain.Resume(tenant, from.seq, from.hash)
	}
	// A walk that starts before the checkpoint compares hashes when it
	// passes it: the checkpoint witnesses what was verified there.
	witness := cp != nil && cp.Seq > v.LastSeq()

	bound := int64(0)
	if head != nil {
		bound = head.LastSeq
	}
	unbounded, done := false, false
	for brk == nil && !done {
		if !unbounded && v.LastSeq() >= bound {
			// At the head: look one row further.
			p, err := r.cfg.Log.Events(ctx, tenant, v.LastSeq(), 1)
			if err != nil {
				return rep, nil, err
			}
			rep.Reads += p.Reads
			if len(p.Raw) == 0 {
				done = true
				break
			}
			h2, err := r.cfg.Log.Head(ctx, tenant)
			if err != nil {
				return rep, nil, err
			}
			if h2 != nil {
				rep.Reads++
			}
			head = h2
			if h2 != nil && h2.LastSeq >= rawSeq(p.Raw[0]) {
				bound = h2.LastSeq // new commits since the walk began
				continue
			}
			unbounded = true // rows the head does not cover: walk them all, then the head breaks
			continue
		}
		if b.exhausted() {
			break
		}
		limit := r.cfg.PageSize
		if !unbounded && bound-v.LastSeq() < int64(limit) {
			limit = int32(bound - v.LastSeq())
		}
		limit = b.clamp(limit)
		var p eventstore.Page
		rows, inPlace := r.cfg.Log.(rowLog)
		if inPlace {
			p, err = rows.EventRows(ctx, tenant, v.LastSeq(), limit)
		} else {
			p, err = r.cfg.Log.Events(ctx, tenant, v.LastSeq(), limit)
		}
		if err != nil {
			return rep, nil, err
		}
		rep.Reads += p.Reads
		if len(p.Raw) == 0 {
			done = true // fewer events than the head claims: the head check says where
			break
		}
		for i := range p.Raw {
			var err error
			handled := false
			if inPlace {
				handled, err = v.NextItem(p.Raw[i])
			}
			if !handled {
				// Not certainly well formed (or a log that decodes): the
				// decoding path gives the verdict.
				var e envelope.Envelope
				var derr error
				if inPlace {
					e, derr = envelope.FromItem(p.Raw[i])
				} else {
					e, derr = p.Events[i], p.Errs[i]
				}
				if derr != nil {
					brk = malformed(tenant, v, p.Raw[i], derr)
					break
				}
				err = v.Next(&e)
			}
			if err != nil {
				if !errors.As(err, &brk) {
					return rep, nil, err
				}
				break
			}
			b.used++
			rep.Verified++
			if witness && v.LastSeq() == cp.Seq {
				witness = false
				if v.LastHash() != cp.Hash {
					brk = &chain.BreakError{Tenant: tenant, Seq: cp.Seq, Reason: ReasonCheckpointMismatch,
						Expected: "hash " + cp.Hash + " (verified at the checkpoint)", Got: "hash " + v.LastHash()}
				}
			}
		}
	}
	if brk == nil && done {
		if err := v.Head(head); err != nil && !errors.As(err, &brk) {
			return rep, nil, err
		}
	}
	if brk == nil && done && cp != nil && cp.Seq > v.LastSeq() {
		brk = &chain.BreakError{Tenant: tenant, Seq: v.LastSeq() + 1, Reason: ReasonCheckpointMismatch,
			Expected: "events through seq " + itoa(cp.Seq) + " (the checkpoint)", Got: "the log ends at seq " + itoa(v.LastSeq())}
	}
	if done || brk != nil {
		// Even past another break: the notary's view says what it saw.
		nb, err := r.compareNotary(ctx, tenant, head, &rep)
		if err != nil {
			return rep, nil, err
		}
		if brk == nil {
			brk = nb
		}
	}
	if head != nil {
		rep.LastSeq = head.LastSeq
	}
	rep.VerifiedThrough = v.LastSeq()

	var w *Walk
	switch {
	case brk != nil:
		f := false
		rep.ChainIntact, rep.Complete = &f, true
		rep.FirstBreak = &Break{Seq: brk.Seq, Reason: brk.Reason, Expected: brk.Expected, Got: brk.Got}
		rep.VerifiedThrough = min(v.LastSeq(), brk.Seq-1)
		// Incremental walks re-check the checkpointed event, not those before it.
		rep.CheckpointCoversBreak = cp != nil && brk.Seq < cp.Seq
		r.cfg.Metrics.Count(keys.MetricChainBreaks, 1, "Mode", string(mode))
		r.log.ErrorContext(ctx, "chain broken", slog.Int64(obs.KeySeq, brk.Seq),
			slog.String(obs.KeyReason, string(brk.Reason)), slog.String(obs.KeyExpected, brk.Expected), slog.String(obs.KeyGot, brk.Got),
			slog.String(obs.KeyMode, string(mode)), slog.Bool(obs.KeyCheckpointCoversBreak, rep.CheckpointCoversBreak))
	case done:
		t := true
		rep.ChainIntact, rep.Complete = &t, true
	default:
		id, err := newWalkID()
		if err != nil {
			return rep, nil, err
		}
		w = &Walk{ID: id, Tenant: tenant, Mode: mode, Seq: v.LastSeq(), Hash: v.LastHash(),
			Verified: rep.Verified, AnchorSeq: rep.TrustedThrough, ExpiresAt: r.cfg.Now().Add(r.cfg.WalkTTL)}
		if err := r.cfg.State.SaveWalk(ctx, *w); err != nil {
			return rep, nil, err
		}
	}
	// Only an unbroken walk moves the checkpoint, and only forward; signed
	// checkpoints only the notary moves.
	n, ok := r.cfg.State.(interface{ Notarized() bool })
	notarized := ok && n.Notarized()
	if brk == nil && !notarized && v.LastSeq() > 0 && (cp == nil || v.LastSeq() > cp.Seq) {
		err := r.cfg.State.AdvanceCheckpoint(ctx, tenant, Checkpoint{Seq: v.LastSeq(), Hash: v.LastHash()})
		var ice *InvalidCheckpointError
		switch {
		case errors.As(err, &ice):
			// Logged and counted by the state; the walk's answer stands.
			rep.addFindings(Finding{Kind: FindingCheckpointInvalid, Key: ice.Key, Reason: ice.Err.Error()})
		case err != nil:
			return rep, nil, err
		default:
			rep.CheckpointSeq = v.LastSeq()
		}
	}
	if err := r.deadLetters(ctx, tenant, &rep); err != nil {
		return rep, nil, err
	}
	if err := r.deliveryAudit(ctx, tenant, &rep); err != nil {
		return rep, nil, err
	}
	if rep.Complete {
		r.watermarkRollback(ctx, tenant, &rep)
	}
	r.log.InfoContext(ctx, "tenant reconciled", slog.String(obs.KeyMode, string(mode)),
		slog.Bool(obs.KeyComplete, rep.Complete), slog.Any(obs.KeyChainIntact, rep.ChainIntact), slog.Int64(obs.KeyVerified, rep.Verified),
		slog.Int64(obs.KeyVerifiedThrough, rep.VerifiedThrough), slog.Int(obs.KeyReads, rep.Reads), slog.Int(obs.KeyDeadLetterCount, rep.DeadLetterCount))
	return rep, w, nil
}

// checkAnchor re-reads the event a walk starts after and requires that it is
// still there, still hashes to its stored hash, and that the stored hash is
// the one verified before: rewriting a checkpointed event breaks here.
func (r *Reconciler) checkAnchor(ctx context.Context, tenant string, a *anchor, rep *Report) (*chain.BreakError, error) {
	p, err := r.cfg.Log.Events(ctx, tenant, a.seq-1, 1)
	if err != nil {
		return nil, err
	}
	rep.Reads += p.Reads
	brk := func(reason chain.Reason, expected, got string) *chain.BreakError {
		return &chain.BreakError{Tenant: tenant, Seq: a.seq, Reason: reason, Expected: expected, Got: got}
	}
	if len(p.Raw) == 0 || rawSeq(p.Raw[0]) != a.seq {
		got := "no event"
		if len(p.Raw) > 0 {
			got = "next event at seq " + itoa(rawSeq(p.Raw[0]))
		}
		return brk(chain.ReasonMissingSeq, "seq "+itoa(a.seq)+" (the "+a.what+")", got), nil
	}
	if p.Errs[0] != nil {
		return brk(chain.ReasonMalformed, "a valid stored event", p.Errs[0].Error()), nil
	}
	e := p.Events[0]
	if e.TenantID != tenant {
		return brk(chain.ReasonWrongTenant, strconv.Quote(tenant), strconv.Quote(e.TenantID)), nil
	}
	if err := chain.CheckStored(&e); err != nil {
		var ie *chain.IntegrityError
		if !errors.As(err, &ie) {
			return nil, err
		}
		return ie.Break(), nil
	}
	if e.Hash != a.hash {
		return brk(ReasonCheckpointMismatch, "hash "+a.hash+" (verified at the "+a.what+")", "hash "+e.Hash), nil
	}
	return nil, nil
}

// malformed names a row that does not decode. A row past the next expected
// seq is a gap first.
func malformed(tenant string, v *chain.Verifier, raw map[string]types.AttributeValue, err error) *chain.BreakError {
	want := v.LastSeq() + 1
	if s := rawSeq(raw); s > want {
		return &chain.BreakError{Tenant: tenant, Seq: want, Reason: chain.ReasonMissingSeq, Expected: "seq " + itoa(want), Got: "seq " + itoa(s)}
	}
	return &chain.BreakError{Tenant: tenant, Seq: want, Reason: chain.ReasonMalformed, Expected: "a valid stored event", Got: err.Error()}
}

func (r *Reconciler) deadLetters(ctx context.Context, tenant string, rep *Report) error {
	subs := map[string]bool{}
	n, cursor := 0, ""
	for {
		dls, next, err := r.cfg.DeadLetters.DeadLetters(ctx, tenant, cursor, 100)
		if err != nil {
			return err
		}
		rep.StateReads += len(dls)
		n += len(dls)
		for _, d := range dls {
			subs[d.Subscription] = true
			if d.Effect != "" {
				if rep.effectsUnknown == nil {
					rep.effectsUnknown = map[string]int{}
				}
				rep.effectsUnknown[d.Subscription]++
			}
		}
		if next == "" {
			rep.DeadLetterCount = n
			break
		}
		if n >= r.cfg.MaxDeadLetters {
			rep.DeadLettersTruncated = true
			if rep.DeadLetterCount, err = r.cfg.DeadLetters.CountDeadLetters(ctx, tenant); err != nil {
				return err
			}
			break
		}
		cursor = next
	}
	for s := range subs {
		rep.DeadLetters = append(rep.DeadLetters, s)
	}
	sort.Strings(rep.DeadLetters)
	return nil
}

func (r *Reconciler) loadWalk(ctx context.Context, tenant, id string, mode Mode) (*Walk, error) {
	w, err := r.cfg.State.Walk(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if w != nil && w.Mode != mode {
		return nil, fmt.Errorf("%w: it names a %s walk, not a %s one; omit the cursor to start a new walk", ErrBadCursor, w.Mode, mode)
	}
	if w == nil || !r.cfg.Now().Before(w.ExpiresAt) {
		return nil, fmt.Errorf("%w: the walk it continues is gone (walks are kept %s); omit the cursor to start a new walk", ErrCursorExpired, r.cfg.WalkTTL)
	}
	return w, nil
}

// budget bounds one call: a stop time and, optionally, a number of events.
type budget struct {
	now       func() time.Time
	stopAt    time.Time
	maxEvents int64
	used      int64
}

func (r *Reconciler) budget(ctx context.Context, maxEvents int64) *budget {
	now := r.cfg.Now()
	b := &budget{now: r.cfg.Now, stopAt: now.Add(r.cfg.MaxDuration), maxEvents: maxEvents}
	if dl, ok := ctx.Deadline(); ok {
		reserve := max(r.cfg.MinReserve, time.Until(dl)/10)
		b.stopAt = dl.Add(-reserve)
	}
	return b
}

func (b *budget) timeUp() bool { return !b.now().Before(b.stopAt) }

func (b *budget) exhausted() bool {
	return (b.maxEvents > 0 && b.used >= b.maxEvents) || b.timeUp()
}

// clamp keeps a page within the events left.
func (b *budget) clamp(limit int32) int32 {
	if b.maxEvents > 0 && int64(limit) > b.maxEvents-b.used {
		return int32(b.maxEvents - b.used)
	}
	return limit
}

func rawSeq(it map[string]types.AttributeValue) int64 {
	n, ok := it[keys.AttrSeq].(*types.AttributeValueMemberN)
	if !ok {
		return -1
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return -1
	}
	return v
}

func newWalkID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new walk id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
