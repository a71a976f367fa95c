package notary

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// MaxApplied is how many record ids a chain row remembers: more than a
// mapping's batch (100) holds, so a retried batch is recognised whole.
const MaxApplied = 256

// Kind names a finding (the EMF dimension "Finding").
type Kind string

// What the notary refuses to sign.
const (
	// Rewrite: an event row was overwritten (a MODIFY), or inserted twice.
	Rewrite Kind = "rewrite"
	// Removed: an event row or the head row was deleted.
	Removed Kind = "removed"
	// Rollback: the head moved back, or was rewritten at its seq.
	Rollback Kind = "rollback"
	// Gap: the head covers a seq that was never inserted.
	Gap Kind = "gap"
	// Link: an event's prev_hash is not its predecessor's hash, its hash
	// does not recompute, or the head's last_hash is not its event's hash.
	Link Kind = "link"
	// Planted: an event row the head does not cover, or one at a seq
	// already appended.
	Planted Kind = "planted"
	// Unseen: the head moved from a last_seq the notary never saw: appends
	// happened out of its sight (stopped longer than the stream keeps
	// records, or started after them), so it cannot vouch for them.
	Unseen Kind = "unseen"
	// RowChanged: another row of the log (an emit's idempotency-key row)
	// was overwritten or deleted. It does not break the chain.
	RowChanged Kind = "row_changed"
	// Unreadable: a record the notary cannot read.
	Unreadable Kind = "unreadable"
	// Occupied: the key of a checkpoint to sign already holds another
	// object; that seq stays unsigned.
	Occupied Kind = "checkpoint_occupied"
	// HeadShape: a head row that is not what an append writes (an
	// attribute besides the head's, a shards attribute outside 2 to
	// tenancy.MaxShards, a dedup_id not derived from its last_event_id).
	// Nothing the chain covers changed, so it does not break the chain:
	// what its events and hashes prove is still signed.
	HeadShape Kind = "head_shape"
)

// breaks reports whether a finding of kind k breaks its chain: RowChanged
// and HeadShape are about rows the chain does not cover.
func (k Kind) breaks() bool { return k != RowChanged && k != HeadShape }

// headAttrs is exactly what eventstore writes into a head row, with
// keys.AttrShards besides for a tenant with chain shards.
var headAttrs = []string{
	keys.AttrDedupID, keys.AttrKind, keys.AttrLastEventID, keys.AttrLastHash, keys.AttrLastSeq, keys.AttrSeq, keys.AttrTenant,
}

// headShape returns "" when a head image has exactly the shape an append
// writes, and otherwise what is odd about it.
func headShape(im map[string]events.DynamoDBAttributeValue) string {
	var odd []string
	var extra []string
	for name := range im {
		if name != keys.AttrShards && !slices.Contains(headAttrs, name) {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		odd = append(odd, fmt.Sprintf("attributes %s besides the head's", strings.Join(extra, ",")))
	}
	if v, ok := im[keys.AttrShards]; ok {
		n, err := num(im, keys.AttrShards)
		switch {
		case err != nil:
			odd = append(odd, fmt.Sprintf("%s of type %s, want a number of chain shards (2 to %d)", keys.AttrShards, dataType(v), tenancy.MaxShards))
		case n < 2 || n > tenancy.MaxShards:
			odd = append(odd, fmt.Sprintf("%s %d, want a number of chain shards (2 to %d)", keys.AttrShards, n, tenancy.MaxShards))
		}
	}
	if d, want := str(im, keys.AttrDedupID), eventstore.HeadDedupID(str(im, keys.AttrLastEventID)); d != want || str(im, keys.AttrLastEventID) == "" {
		odd = append(odd, fmt.Sprintf("%s %q not derived from its %s %q (want %q)", keys.AttrDedupID, d, keys.AttrLastEventID, str(im, keys.AttrLastEventID), want))
	}
	return strings.Join(odd, "; ")
}

func dataType(v events.DynamoDBAttributeValue) string {
	switch v.DataType() {
	case events.DataTypeString:
		return "S"
	case events.DataTypeNumber:
		return "N"
	case events.DataTypeBoolean:
		return "BOOL"
	case events.DataTypeBinary:
		return "B"
	case events.DataTypeNull:
		return "NULL"
	case events.DataTypeMap:
		return "M"
	case events.DataTypeList:
		return "L"
	}
	return "a set"
}

// Finding is one thing the notary refused to sign.
type Finding struct {
	Kind      Kind
	Chain     string // "" when the record's key cannot be read
	Seq       int64
	What      string
	EventID   string // the stream record's eventID
	StreamSeq string
}

func (f Finding) String() string {
	return fmt.Sprintf("%s at seq %d: %s", f.Kind, f.Seq, f.What)
}

// Pending is an event seen inserted and not yet covered by a head record.
type Pending struct {
	Seq      int64  `json:"seq"`
	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash"`
}

// State is what the notary keeps of one chain.
type State struct {
	Chain string
	// Seq and Hash: the last event seen appended (0 and the chain's genesis
	// before the first).
	Seq  int64
	Hash string
	// HeadSeq and HeadHash: the head as last seen on the stream.
	HeadSeq  int64
	HeadHash string
	// StreamSeq: the sequence number of the last stream record applied.
	StreamSeq string
	// Applied: the eventIDs of the last MaxApplied records applied, so a
	// retried (or bisected) batch skips what an earlier attempt applied.
	// Stream sequence numbers are not used for it: AWS promises their order
	// within a shard only, and a chain moves to a child shard on a split.
	Applied []string
	// Signed: the last seq signed.
	Signed int64
	// Since: the seq of the signed checkpoint the chain was started from
	// (Seeds; 0: from genesis). Records of seqs at or below it are history
	// the stream still holds from before the notary: the checkpoint vouches
	// for them, and they are passed over, except that the event and the
	// head at Since must carry its hash.
	Since   int64
	Pending []Pending
	// Broken: a finding was made; nothing of the chain is signed again.
	Broken bool
	// Findings counts what it refused to sign; FirstFinding (the cause) and
	// LastFinding say it in words.
	Findings     int
	FirstFinding string
	LastFinding  string
	// Version is bumped by every save; a save is conditional on it (0: the
	// row does not exist yet).
	Version int64
}

// NewState is a chain's state before its first record.
func NewState(chainName string) *State {
	g := chain.Genesis(chainName)
	return &State{Chain: chainName, Hash: g, HeadHash: g}
}

// Store keeps chain states. Save must fail with ErrConflict when the stored
// version is not st.Version, and bump st.Version on success.
type Store interface {
	Load(ctx context.Context, chainName string) (*State, error) // nil when none
	Save(ctx context.Context, st *State) error
}

// ErrConflict: the chain's row changed since it was loaded (two notaries on
// one shard, which a mapping never runs).
var ErrConflict = errors.New("notary state changed since it was read")

// Log is the read side of the events table the notary checks at the end of
// a batch. *eventstore.Store implements it.
type Log interface {
	Head(ctx context.Context, chainName string) (*chain.Head, error)
	Events(ctx context.Context, chainName string, after int64, limit int32) (eventstore.Page, error)
}

var _ Log = (*eventstore.Store)(nil)

// Signer signs and stores a checkpoint of a chain. *Checkpoints implements it.
type Signer interface {
	Sign(ctx context.Context, chainName string, seq int64, hash string) error
}

// Seeds returns a chain's newest signed checkpoint, verified, so a notary
// added to a live stack starts from what was signed before it. Optional.
type Seeds interface {
	Latest(ctx context.Context, chainName string) (seq int64, hash string, ok bool, err error)
}

// Config configures a Notary.
type Config struct {
	Store  Store  // required
	Log    Log    // required
	Signer Signer // required
	Seeds  Seeds
	Logger *slog.Logger
	// Metrics counts findings (NotaryFinding, by Finding) and signatures.
	Metrics *obs.Metrics
}

// Notary checks the events stream and signs what it saw appended.
type Notary struct {
	cfg Config
	log *slog.Logger
}

// New returns a Notary; it refuses a config without its stores.
func New(cfg Config) (*Notary, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("notary: Config.Store is nil; pass NewDynamoStore(db, stateTable)")
	case cfg.Log == nil:
		return nil, errors.New("notary: Config.Log is nil; pass the event store")
	case cfg.Signer == nil:
		return nil, errors.New("notary: Config.Signer is nil; pass the checkpoint signer")
	}
	n := &Notary{cfg: cfg, log: cfg.Logger}
	if n.log == nil {
		n.log = slog.Default()
	}
	return n, nil
}

// Event is a DynamoDB stream event (events.DynamoDBEvent's JSON) whose
// records are decoded one at a time, so a record the decoder refuses is a
// finding instead of a failed batch.
type Event struct {
	Records []json.RawMessage `json:"Records"`
}

// batch is one invocation's chain states, in the order first touched.
type batch struct {
	states map[string]*State
	order  []string
}

// Handle applies a batch of the events table's stream. Findings are logged
// and counted, never returned; an error (the state or the signer failing)
// fails the batch, which the mapping retries: records already applied are
// skipped.
func (n *Notary) Handle(ctx context.Context, ev Event) error {
	b := &batch{states: map[string]*State{}}
	for _, raw := range ev.Records {
		var rec events.DynamoDBEventRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			var head struct {
				EventID string `json:"eventID"`
			}
			_ = json.Unmarshal(raw, &head)
			n.report(ctx, nil, Finding{Kind: Unreadable, EventID: head.EventID, What: "stream record does not decode: " + err.Error()})
			continue
		}
		if err := n.apply(ctx, b, rec); err != nil {
			return err
		}
	}
	for _, name := range b.order {
		if err := n.settle(ctx, b.states[name]); err != nil {
			return err
		}
	}
	for _, name := range b.order {
		st := b.states[name]
		if !st.Broken && st.Seq > st.Signed {
			err := n.cfg.Signer.Sign(ctx, st.Chain, st.Seq, st.Hash)
			switch {
			case errors.Is(err, ErrOccupied):
				// Not a finding about the chain: the next advance is signed
				// under its own key.
				n.cfg.Metrics.Count(keys.MetricNotaryFinding, 1, "Finding", string(Occupied))
				n.log.ErrorContext(ctx, fmt.Sprintf("notary cannot sign chain %q at seq %d: %v", st.Chain, st.Seq, err),
					slog.String(obs.KeyFinding, string(Occupied)), slog.String(obs.KeyChain, st.Chain), slog.Int64(obs.KeySeq, st.Seq))
			case err != nil:
				return fmt.Errorf("sign chain %q at seq %d: %w", st.Chain, st.Seq, err)
			default:
				n.cfg.Metrics.Count(keys.MetricNotarySigned, 1, "Function", keys.FnNotary)
				n.log.InfoContext(ctx, "checkpoint signed", slog.String(obs.KeyChain, st.Chain),
					slog.Int64(obs.KeySeq, st.Seq), slog.String(obs.KeyHash, st.Hash))
			}
			st.Signed = st.Seq
		}
		if err := n.cfg.Store.Save(ctx, st); err != nil {
			return fmt.Errorf("save notary state of chain %q: %w", st.Chain, err)
		}
	}
	return nil
}

func (n *Notary) state(ctx context.Context, b *batch, name string) (*State, error) {
	if st := b.states[name]; st != nil {
		return st, nil
	}
	st, err := n.cfg.Store.Load(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("load notary state of chain %q: %w", name, err)
	}
	if st == nil {
		st = NewState(name)
		if n.cfg.Seeds != nil {
			seq, hash, ok, err := n.cfg.Seeds.Latest(ctx, name)
			if err != nil {
				return nil, fmt.Errorf("seed chain %q from its newest checkpoint: %w", name, err)
			}
			if ok {
				st.Seq, st.Hash, st.HeadSeq, st.HeadHash, st.Signed, st.Since = seq, hash, seq, hash, seq, seq
			}
		}
	}
	b.states[name] = st
	b.order = append(b.order, name)
	return st, nil
}

// apply applies one record to its chain's state.
func (n *Notary) apply(ctx context.Context, b *batch, rec events.DynamoDBEventRecord) error {
	f := Finding{EventID: rec.EventID, StreamSeq: rec.Change.SequenceNumber}
	name, seq, err := key(rec.Change.Keys)
	if err != nil {
		f.Chain, f.What = name, err.Error()
		f.Kind = Unreadable
		n.report(ctx, nil, f)
		return nil
	}
	f.Chain, f.Seq = name, seq
	st, err := n.state(ctx, b, name)
	if err != nil {
		return err
	}
	if rec.EventID != "" && slices.Contains(st.Applied, rec.EventID) {
		return nil // applied by an earlier attempt of this batch
	}
	defer func() {
		if rec.EventID != "" {
			st.Applied = append(st.Applied, rec.EventID)
			if len(st.Applied) > MaxApplied {
				st.Applied = slices.Delete(st.Applied, 0, len(st.Applied)-MaxApplied)
			}
		}
		if rec.Change.SequenceNumber != "" {
			st.StreamSeq = rec.Change.SequenceNumber
		}
	}()
	ev := rec.EventName
	switch {
	case ev != "INSERT" && ev != "MODIFY" && ev != "REMOVE":
		f.Kind, f.What = Unreadable, fmt.Sprintf("unknown eventName %q", ev)
	case seq < 0:
		if ev == "INSERT" {
			return nil
		}
		f.Kind, f.What = RowChanged, fmt.Sprintf("%s of a row of kind %q", ev, str(rec.Change.OldImage, keys.AttrKind))
	case seq == keys.HeadSeq && ev == "REMOVE":
		f.Kind, f.What = Removed, fmt.Sprintf("head row deleted (it stood at last_seq %d)", st.HeadSeq)
	case seq == keys.HeadSeq:
		return n.head(ctx, st, rec, f)
	case ev == "REMOVE":
		f.Kind, f.What = Removed, fmt.Sprintf("event row deleted (hash %s)", orDash(str(rec.Change.OldImage, keys.AttrHash)))
	case ev == "MODIFY":
		f.Kind, f.What = Rewrite, fmt.Sprintf("event row overwritten (hash %s, now %s)",
			orDash(str(rec.Change.OldImage, keys.AttrHash)), orDash(str(rec.Change.NewImage, keys.AttrHash)))
	default:
		return n.insert(ctx, st, rec, f)
	}
	n.report(ctx, st, f)
	return nil
}

// insert takes an event row's INSERT into pending.
func (n *Notary) insert(ctx context.Context, st *State, rec events.DynamoDBEventRecord, f Finding) error {
	e, err := envelope.FromStreamImage(rec.Change.NewImage)
	if err != nil {
		f.Kind, f.What = Unreadable, "event row does not decode: "+err.Error()
		n.report(ctx, st, f)
		return nil
	}
	if e.Seq != f.Seq {
		f.Kind, f.What = Unreadable, fmt.Sprintf("image seq %d is not the key's", e.Seq)
		n.report(ctx, st, f)
		return nil
	}
	if err := chain.CheckStored(&e); err != nil {
		f.Kind, f.What = Link, "stored event does not verify on its own: "+err.Error()
		n.report(ctx, st, f)
		return nil
	}
	if st.Broken {
		return nil // nothing of a broken chain is signed again: keep nothing for it
	}
	if f.Seq <= st.Since && st.Seq == st.Since {
		if f.Seq == st.Since && e.Hash != st.Hash {
			f.Kind, f.What = Link, fmt.Sprintf("event at the starting checkpoint's seq %d has hash %s, the checkpoint %s", f.Seq, e.Hash, st.Hash)
			n.report(ctx, st, f)
		}
		return nil // history the starting checkpoint vouches for
	}
	if f.Seq <= st.Seq {
		f.Kind, f.What = Planted, fmt.Sprintf("insert at seq %d, already appended (the chain stands at %d)", f.Seq, st.Seq)
		n.report(ctx, st, f)
		return nil
	}
	if i := slices.IndexFunc(st.Pending, func(p Pending) bool { return p.Seq == f.Seq }); i >= 0 {
		f.Kind, f.What = Rewrite, fmt.Sprintf("seq %d inserted twice (hash %s, then %s)", f.Seq, st.Pending[i].Hash, e.Hash)
		n.report(ctx, st, f)
		return nil
	}
	st.Pending = append(st.Pending, Pending{Seq: e.Seq, PrevHash: e.PrevHash, Hash: e.Hash})
	slices.SortFunc(st.Pending, func(a, b Pending) int { return int(a.Seq - b.Seq) })
	n.resolve(ctx, st, f)
	return nil
}

// head applies a head row's INSERT or MODIFY.
func (n *Notary) head(ctx context.Context, st *State, rec events.DynamoDBEventRecord, f Finding) error {
	nu := rec.Change.NewImage
	last, err := num(nu, keys.AttrLastSeq)
	hash := str(nu, keys.AttrLastHash)
	if err != nil || str(nu, keys.AttrKind) != keys.KindHead || hash == "" {
		f.Kind, f.What = Unreadable, "head image without kind head, a number last_seq and a last_hash"
		n.report(ctx, st, f)
		return nil
	}
	f.Seq = last
	if odd := headShape(nu); odd != "" {
		sf := f
		sf.Kind, sf.What = HeadShape, fmt.Sprintf("head row (%s, last_seq %d) is not what an append writes: %s", rec.EventName, last, odd)
		n.report(ctx, st, sf)
	}
	from := int64(0) // an INSERT: the chain had no head
	if rec.EventName == "MODIFY" {
		if from, err = num(rec.Change.OldImage, keys.AttrLastSeq); err != nil {
			f.Kind, f.What = Unreadable, "head MODIFY without an old image's last_seq (the stream must be NEW_AND_OLD_IMAGES)"
			n.report(ctx, st, f)
			return nil
		}
	}
	if seeded := st.Since > 0 && st.Seq == st.Since; seeded && last <= st.Since {
		// History from before the starting checkpoint, replayed by the stream.
		if last == st.Since && hash != st.Hash {
			f.Kind, f.What = Rollback, fmt.Sprintf("head at the starting checkpoint's seq %d has last_hash %s, the checkpoint %s", last, hash, st.Hash)
			n.report(ctx, st, f)
		}
		return nil
	} else if seeded && from < st.Since {
		from = st.Since // a transaction across the starting checkpoint: its earlier events are history
	}
	was, wasHash := st.HeadSeq, st.HeadHash
	st.HeadSeq, st.HeadHash = last, hash
	switch {
	case last < was:
		f.Kind, f.What = Rollback, fmt.Sprintf("head moved back from last_seq %d to %d", was, last)
	case last == was && hash != wasHash:
		f.Kind, f.What = Rollback, fmt.Sprintf("head rewritten at last_seq %d: last_hash %s, was %s", last, hash, wasHash)
	case last == was:
		return nil // nothing moved
	case from != was:
		f.Kind, f.What = Unseen, fmt.Sprintf("head moved from last_seq %d, but the notary last saw it at %d: seqs %d to %d were appended out of its sight (stopped longer than the stream keeps records?)",
			from, was, was+1, from)
	default:
		n.resolve(ctx, st, f)
		return nil
	}
	n.report(ctx, st, f)
	return nil
}

// resolve advances the chain over pending events the head covers, when all
// of them have been seen.
func (n *Notary) resolve(ctx context.Context, st *State, f Finding) {
	if st.Broken || st.HeadSeq <= st.Seq {
		return
	}
	var run []Pending
	for _, p := range st.Pending {
		if p.Seq > st.Seq && p.Seq <= st.HeadSeq {
			run = append(run, p)
		}
	}
	if int64(len(run)) != st.HeadSeq-st.Seq {
		return // some of the head's events are still to come
	}
	hash := st.Hash
	for _, p := range run {
		if p.PrevHash != hash {
			f.Kind, f.Seq = Link, p.Seq
			f.What = fmt.Sprintf("prev_hash %s is not the hash of seq %d as appended (%s)", p.PrevHash, p.Seq-1, hash)
			n.report(ctx, st, f)
			return
		}
		hash = p.Hash
	}
	if hash != st.HeadHash {
		f.Kind, f.Seq = Link, st.HeadSeq
		f.What = fmt.Sprintf("head last_hash %s is not the hash of seq %d (%s)", st.HeadHash, st.HeadSeq, hash)
		n.report(ctx, st, f)
		return
	}
	st.Seq, st.Hash = st.HeadSeq, hash
	st.Pending = slices.DeleteFunc(st.Pending, func(p Pending) bool { return p.Seq <= st.Seq })
}

// settle checks, at the end of a batch, what the stream left open against
// the table: an insert its head does not cover is planted; a seq the head
// covers that is not in the table is a gap. What is covered and in the table
// waits for its record (a transaction split across batches).
func (n *Notary) settle(ctx context.Context, st *State) error {
	if st.Broken {
		return nil
	}
	var above []Pending
	for _, p := range st.Pending {
		if p.Seq > st.HeadSeq {
			above = append(above, p)
		}
	}
	if len(above) > 0 {
		h, err := n.cfg.Log.Head(ctx, st.Chain)
		if err != nil {
			return fmt.Errorf("read head of chain %q: %w", st.Chain, err)
		}
		last := int64(0)
		if h != nil {
			last = h.LastSeq
		}
		for _, p := range above {
			if p.Seq > last {
				n.report(ctx, st, Finding{Kind: Planted, Chain: st.Chain, Seq: p.Seq,
					What: fmt.Sprintf("event row at seq %d (hash %s) that the head (last_seq %d) does not cover", p.Seq, p.Hash, last)})
				return nil
			}
		}
	}
	if st.HeadSeq <= st.Seq {
		return nil
	}
	limit := int32(min(st.HeadSeq-st.Seq, 1000))
	page, err := n.cfg.Log.Events(ctx, st.Chain, st.Seq, limit)
	if err != nil {
		return fmt.Errorf("read events of chain %q: %w", st.Chain, err)
	}
	in := map[int64]bool{}
	for _, it := range page.Raw {
		in[rawSeq(it)] = true
	}
	for s := st.Seq + 1; s <= st.Seq+int64(limit); s++ {
		if !in[s] && !slices.ContainsFunc(st.Pending, func(p Pending) bool { return p.Seq == s }) {
			n.report(ctx, st, Finding{Kind: Gap, Chain: st.Chain, Seq: s,
				What: fmt.Sprintf("the head (last_seq %d) covers seq %d, which was never seen inserted and is not in the table", st.HeadSeq, s)})
			return nil
		}
	}
	return nil
}

// report logs and counts a finding; with a chain state, it records it there
// and, unless it leaves the chain whole, marks the chain broken.
func (n *Notary) report(ctx context.Context, st *State, f Finding) {
	if st != nil {
		st.Findings++
		st.LastFinding = f.String()
		if st.FirstFinding == "" {
			st.FirstFinding = st.LastFinding
		}
		if f.Kind.breaks() {
			st.Broken = true
		}
	}
	outcome := "not signed"
	if !f.Kind.breaks() {
		outcome = "the chain is whole: what it covers is still signed"
	}
	n.cfg.Metrics.Count(keys.MetricNotaryFinding, 1, "Finding", string(f.Kind))
	n.log.ErrorContext(ctx, fmt.Sprintf("notary finding: %s of chain %q at seq %d: %s; %s", f.Kind, f.Chain, f.Seq, f.What, outcome),
		slog.String(obs.KeyFinding, string(f.Kind)),
		slog.String(obs.KeyChain, f.Chain),
		slog.Int64(obs.KeySeq, f.Seq),
		slog.String(obs.KeyWhat, f.What),
		slog.String(obs.KeyStreamEventID, f.EventID),
		slog.String(obs.KeyStreamSeq, f.StreamSeq))
}

// key reads the chain and the seq from a record's key.
func key(k map[string]events.DynamoDBAttributeValue) (string, int64, error) {
	t, ok := k[keys.AttrTenant]
	if !ok || t.DataType() != events.DataTypeString {
		return "", 0, fmt.Errorf("key has no string %s", keys.AttrTenant)
	}
	s, ok := k[keys.AttrSeq]
	if !ok || s.DataType() != events.DataTypeNumber {
		return t.String(), 0, fmt.Errorf("key has no number %s", keys.AttrSeq)
	}
	n, err := strconv.ParseInt(s.Number(), 10, 64)
	if err != nil {
		return t.String(), 0, fmt.Errorf("key %s %q is not an integer", keys.AttrSeq, s.Number())
	}
	return t.String(), n, nil
}

func str(im map[string]events.DynamoDBAttributeValue, name string) string {
	v, ok := im[name]
	if !ok || v.DataType() != events.DataTypeString {
		return ""
	}
	return v.String()
}

func num(im map[string]events.DynamoDBAttributeValue, name string) (int64, error) {
	v, ok := im[name]
	if !ok || v.DataType() != events.DataTypeNumber {
		return 0, fmt.Errorf("%s is not a number", name)
	}
	return strconv.ParseInt(v.Number(), 10, 64)
}

func rawSeq(it map[string]types.AttributeValue) int64 {
	v, ok := it[keys.AttrSeq].(*types.AttributeValueMemberN)
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
