package notary_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/notary"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tamper"
)

// table is an events table in memory that records what its stream would
// carry (NEW_AND_OLD_IMAGES, one record per item change, in write order),
// and answers the notary's reads as the table would.
type table struct {
	t       *testing.T
	items   map[string]map[int64]envelope.Item // chain → seq → item
	records []events.DynamoDBEventRecord
	seq     int // stream sequence numbers
}

var _ notary.Log = (*table)(nil)

func newTable(t *testing.T) *table {
	return &table{t: t, items: map[string]map[int64]envelope.Item{}}
}

func (tb *table) write(name string, seq int64, it envelope.Item) {
	tb.t.Helper()
	if tb.items[name] == nil {
		tb.items[name] = map[int64]envelope.Item{}
	}
	old, had := tb.items[name][seq]
	rec := tb.record(name, seq)
	rec.EventName = "INSERT"
	if had {
		rec.EventName = "MODIFY"
		rec.Change.OldImage = tb.image(old)
	}
	rec.Change.NewImage = tb.image(it)
	tb.items[name][seq] = it
	tb.records = append(tb.records, rec)
}

func (tb *table) remove(name string, seq int64) {
	tb.t.Helper()
	old, had := tb.items[name][seq]
	if !had {
		tb.t.Fatalf("remove %s/%d: no such row", name, seq)
	}
	rec := tb.record(name, seq)
	rec.EventName = "REMOVE"
	rec.Change.OldImage = tb.image(old)
	delete(tb.items[name], seq)
	tb.records = append(tb.records, rec)
}

func (tb *table) record(name string, seq int64) events.DynamoDBEventRecord {
	tb.seq++
	return events.DynamoDBEventRecord{
		EventID: fmt.Sprintf("ev%d", tb.seq), EventVersion: "1.1", EventSource: "aws:dynamodb", AWSRegion: "eu-west-1",
		EventSourceArn: "arn:aws:dynamodb:eu-west-1:123456789012:table/events/stream/2026-12-01T00:00:00.000",
		Change: events.DynamoDBStreamRecord{
			Keys: map[string]events.DynamoDBAttributeValue{
				keys.AttrTenant: events.NewStringAttribute(name),
				keys.AttrSeq:    events.NewNumberAttribute(strconv.FormatInt(seq, 10)),
			},
			// Real sequence numbers are long decimal strings; these grow in length too.
			SequenceNumber: fmt.Sprintf("%d00000000000000000%d", tb.seq, tb.seq),
			StreamViewType: "NEW_AND_OLD_IMAGES",
		},
	}
}

func (tb *table) image(it envelope.Item) map[string]events.DynamoDBAttributeValue {
	tb.t.Helper()
	im, err := envelope.ToStreamImage(it)
	if err != nil {
		tb.t.Fatal(err)
	}
	return im
}

// drain returns the stream records written since the last drain, as the
// JSON Lambda hands a function (events.DynamoDBEvent).
func (tb *table) drain() notary.Event {
	tb.t.Helper()
	b, err := json.Marshal(events.DynamoDBEvent{Records: tb.records})
	if err != nil {
		tb.t.Fatal(err)
	}
	tb.records = nil
	var ev notary.Event
	if err := json.Unmarshal(b, &ev); err != nil {
		tb.t.Fatal(err)
	}
	return ev
}

func (tb *table) Head(_ context.Context, name string) (*chain.Head, error) {
	it, ok := tb.items[name][keys.HeadSeq]
	if !ok {
		return nil, nil
	}
	n, _ := strconv.ParseInt(it[keys.AttrLastSeq].(*types.AttributeValueMemberN).Value, 10, 64)
	return &chain.Head{TenantID: name, LastSeq: n, LastHash: it[keys.AttrLastHash].(*types.AttributeValueMemberS).Value}, nil
}

func (tb *table) Events(_ context.Context, name string, after int64, limit int32) (eventstore.Page, error) {
	var seqs []int64
	for s := range tb.items[name] {
		if s > after {
			seqs = append(seqs, s)
		}
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	var p eventstore.Page
	for _, s := range seqs {
		if len(p.Raw) == int(limit) {
			break
		}
		it := tb.items[name][s]
		e, err := envelope.FromItem(it)
		p.Raw, p.Events, p.Errs = append(p.Raw, it), append(p.Events, e), append(p.Errs, err)
	}
	return p, nil
}

// chainOf builds honest appends of one chain.
type chainOf struct {
	t    *testing.T
	name string
	evs  []envelope.Envelope
}

func (c *chainOf) next(payload string) envelope.Envelope {
	c.t.Helper()
	prev := chain.Genesis(c.name)
	if len(c.evs) > 0 {
		prev = c.evs[len(c.evs)-1].Hash
	}
	seq := int64(len(c.evs) + 1)
	e := envelope.Envelope{
		ID: fmt.Sprintf("0190c5a8-7d4e-7c3b-9d1a-%012d", seq), Type: "order.placed", TenantID: c.name,
		OccurredAt: "2026-12-01T03:00:00Z", SchemaVersion: 1, Payload: map[string]any{"order": payload},
		Seq: seq, PrevHash: prev,
	}
	if err := chain.Seal(&e); err != nil {
		c.t.Fatal(err)
	}
	c.evs = append(c.evs, e)
	return e
}

func item(t *testing.T, e envelope.Envelope) envelope.Item {
	t.Helper()
	it, err := e.ToItem()
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func headItem(name string, e envelope.Envelope) envelope.Item {
	return envelope.Item{
		keys.AttrTenant: &types.AttributeValueMemberS{Value: name}, keys.AttrSeq: &types.AttributeValueMemberN{Value: "0"},
		keys.AttrKind: &types.AttributeValueMemberS{Value: keys.KindHead}, keys.AttrLastSeq: &types.AttributeValueMemberN{Value: strconv.FormatInt(e.Seq, 10)},
		keys.AttrLastHash: &types.AttributeValueMemberS{Value: e.Hash}, keys.AttrLastEventID: &types.AttributeValueMemberS{Value: e.ID},
		keys.AttrDedupID: &types.AttributeValueMemberS{Value: eventstore.HeadDedupID(e.ID)},
	}
}

// emit appends n events in one transaction; headFirst puts the head's
// record before the events' (DynamoDB Streams does not order a
// transaction's items).
func (c *chainOf) emit(tb *table, n int, headFirst bool) {
	c.t.Helper()
	var evs []envelope.Envelope
	for i := range n {
		evs = append(evs, c.next(fmt.Sprintf("o%d-%d", len(c.evs), i)))
	}
	last := evs[len(evs)-1]
	if headFirst {
		tb.write(c.name, 0, headItem(c.name, last))
	}
	for _, e := range evs {
		tb.write(c.name, e.Seq, item(c.t, e))
	}
	if !headFirst {
		tb.write(c.name, 0, headItem(c.name, last))
	}
}

// signer records what it is asked to sign.
type signer struct{ signed []string }

func (s *signer) Sign(_ context.Context, name string, seq int64, hash string) error {
	s.signed = append(s.signed, fmt.Sprintf("%s@%d:%s", name, seq, hash))
	return nil
}

type rig struct {
	t       *testing.T
	tb      *table
	store   *notary.MemoryStore
	signer  *signer
	n       *notary.Notary
	logs    bytes.Buffer
	metrics bytes.Buffer
}

func newRig(t *testing.T) *rig {
	r := &rig{t: t, tb: newTable(t), store: &notary.MemoryStore{}, signer: &signer{}}
	n, err := notary.New(notary.Config{Store: r.store, Log: r.tb, Signer: r.signer,
		Logger: obs.NewLogger(&r.logs, "info"), Metrics: obs.NewMetrics(&r.metrics)})
	if err != nil {
		t.Fatal(err)
	}
	r.n = n
	return r
}

func (r *rig) run() {
	r.t.Helper()
	if err := r.n.Handle(context.Background(), r.tb.drain()); err != nil {
		r.t.Fatalf("Handle: %v", err)
	}
}

func (r *rig) state(name string) *notary.State {
	r.t.Helper()
	st, err := r.store.Load(context.Background(), name)
	if err != nil || st == nil {
		r.t.Fatalf("state of %s: %v %v", name, st, err)
	}
	return st
}

// errorMessages returns the messages of the ERROR lines logged.
func (r *rig) errorMessages() []string {
	r.t.Helper()
	var out []string
	for _, l := range bytes.Split(bytes.TrimSpace(r.logs.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err == nil && m["level"] == "ERROR" {
			out = append(out, fmt.Sprint(m["msg"]))
		}
	}
	return out
}

// findings returns the finding kinds of the ERROR lines logged.
func (r *rig) findings() []string {
	r.t.Helper()
	var out []string
	for _, l := range bytes.Split(bytes.TrimSpace(r.logs.Bytes()), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			r.t.Fatalf("log line %q: %v", l, err)
		}
		if m["level"] == "ERROR" {
			out = append(out, fmt.Sprint(m[obs.KeyFinding]))
		}
	}
	return out
}

// TestHonestAppendsAreSigned: single emits, group commits, a transaction
// whose head record comes first, and one split across two batches all
// advance the chain, and each batch signs the chain's last seq, nothing
// else. A retried batch changes nothing.
func TestHonestAppendsAreSigned(t *testing.T) {
	r := newRig(t)
	c := &chainOf{t: t, name: "acme"}
	c.emit(r.tb, 1, false)
	c.emit(r.tb, 3, true)
	c.emit(r.tb, 1, false)
	ev := r.tb.drain()
	if err := r.n.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if err := r.n.Handle(context.Background(), ev); err != nil { // the mapping retries a batch
		t.Fatal(err)
	}
	want := []string{"acme@5:" + c.evs[4].Hash}
	if fmt.Sprint(r.signer.signed) != fmt.Sprint(want) {
		t.Fatalf("signed %v, want %v", r.signer.signed, want)
	}

	// A transaction split across batches: the events in one, the head in the next.
	c.emit(r.tb, 2, false)
	all := r.tb.drain()
	for _, part := range [][]json.RawMessage{all.Records[:2], all.Records[2:]} {
		if err := r.n.Handle(context.Background(), notary.Event{Records: part}); err != nil {
			t.Fatal(err)
		}
	}
	st := r.state("acme")
	if st.Seq != 7 || st.Hash != c.evs[6].Hash || st.Broken || len(st.Pending) != 0 || st.Signed != 7 {
		t.Fatalf("state %+v, want seq 7 signed, unbroken, nothing pending", st)
	}
	if f := r.findings(); len(f) != 0 {
		t.Fatalf("findings on honest appends: %v\n%s", f, r.logs.String())
	}
	if got := len(r.signer.signed); got != 2 {
		t.Errorf("%d signatures, want 2 (one per batch that advanced)", got)
	}
}

// TestAttacksAreNeverSigned: each attack on the table is a finding (ERROR
// line, EMF NotaryFinding by kind, the chain row marked broken) and nothing
// after it is signed.
func TestAttacksAreNeverSigned(t *testing.T) {
	tests := []struct {
		name   string
		attack func(t *testing.T, tb *table, c *chainOf)
		want   notary.Kind
	}{
		{"rewrite after the checkpoint, rest and head re-hashed", func(t *testing.T, tb *table, c *chainOf) {
			forged := append([]envelope.Envelope(nil), c.evs[:2]...)
			prev := c.evs[1].Hash
			for i := 2; i < len(c.evs); i++ {
				e := c.evs[i]
				if i == 2 {
					e.Payload = map[string]any{"order": "forged"}
				}
				e.PrevHash = prev
				if err := chain.Seal(&e); err != nil {
					t.Fatal(err)
				}
				prev = e.Hash
				tb.write(c.name, e.Seq, item(t, e))
				forged = append(forged, e)
			}
			tb.write(c.name, 0, headItem(c.name, forged[len(forged)-1]))
		}, notary.Rewrite},
		{"tail deleted, head rolled back", func(t *testing.T, tb *table, c *chainOf) {
			tb.remove(c.name, 4)
			tb.remove(c.name, 3)
			tb.write(c.name, 0, headItem(c.name, c.evs[1]))
		}, notary.Removed},
		{"head rolled back alone", func(t *testing.T, tb *table, c *chainOf) {
			tb.write(c.name, 0, headItem(c.name, c.evs[1]))
		}, notary.Rollback},
		{"planted row at head+1", func(t *testing.T, tb *table, c *chainOf) {
			e := c.next("planted")
			tb.write(c.name, e.Seq, item(t, e))
		}, notary.Planted},
		{"head advanced over a seq never inserted", func(t *testing.T, tb *table, c *chainOf) {
			e := c.next("ghost")
			tb.write(c.name, 0, headItem(c.name, e))
		}, notary.Gap},
		{"appended event that does not link", func(t *testing.T, tb *table, c *chainOf) {
			e := c.next("unlinked")
			e.PrevHash = strings.Repeat("ab", 32)
			if err := chain.Seal(&e); err != nil {
				t.Fatal(err)
			}
			tb.write(c.name, e.Seq, item(t, e))
			tb.write(c.name, 0, headItem(c.name, e))
		}, notary.Link},
		{"event whose hash does not recompute", func(t *testing.T, tb *table, c *chainOf) {
			e := c.next("x")
			e.Payload = map[string]any{"order": "changed after sealing"}
			tb.write(c.name, e.Seq, item(t, e))
			tb.write(c.name, 0, headItem(c.name, e))
		}, notary.Link},
		{"head rewritten at its seq", func(t *testing.T, tb *table, c *chainOf) {
			e := c.evs[3]
			e.Hash = strings.Repeat("cd", 32)
			tb.write(c.name, 0, headItem(c.name, e))
		}, notary.Rollback},
		{"head removed", func(t *testing.T, tb *table, c *chainOf) {
			tb.remove(c.name, 0)
		}, notary.Removed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			c := &chainOf{t: t, name: "acme"}
			c.emit(r.tb, 2, false)
			r.run() // signed at 2: the checkpoint
			c.emit(r.tb, 2, false)
			r.run() // signed at 4
			tt.attack(t, r.tb, c)
			// And an honest-looking emit after the attack, on top of whatever the table holds now.
			r.run()
			signed := append([]string(nil), r.signer.signed...)
			if want := []string{"acme@2:" + c.evs[1].Hash, "acme@4:" + c.evs[3].Hash}; fmt.Sprint(signed) != fmt.Sprint(want) {
				t.Fatalf("signed %v, want only the honest %v", signed, want)
			}
			f := r.findings()
			if len(f) == 0 || f[0] != string(tt.want) {
				t.Fatalf("findings %v, want first %s\n%s", f, tt.want, r.logs.String())
			}
			st := r.state("acme")
			if !st.Broken || st.Findings < 1 || !strings.HasPrefix(st.LastFinding, "") || st.Seq > 4 {
				t.Errorf("state %+v, want broken with findings, the chain at most at 4", st)
			}
			if !strings.Contains(r.metrics.String(), `"`+keys.MetricNotaryFinding+`":1`) ||
				!strings.Contains(r.metrics.String(), `"Finding":"`+string(tt.want)+`"`) {
				t.Errorf("no EMF %s with Finding %s:\n%s", keys.MetricNotaryFinding, tt.want, r.metrics.String())
			}
			// Nothing of a broken chain is signed again, even an honest-shaped advance.
			h, _ := r.tb.Head(context.Background(), "acme")
			if h != nil {
				e := envelope.Envelope{ID: "0190c5a8-7d4e-7c3b-9d1a-999999999999", Type: "order.placed", TenantID: "acme",
					OccurredAt: "2026-12-01T03:00:00Z", SchemaVersion: 1, Payload: map[string]any{}, Seq: h.LastSeq + 1, PrevHash: h.LastHash}
				if err := chain.Seal(&e); err != nil {
					t.Fatal(err)
				}
				if _, taken := r.tb.items["acme"][e.Seq]; !taken {
					r.tb.write("acme", e.Seq, item(t, e))
					r.tb.write("acme", 0, headItem("acme", e))
					r.run()
				}
			}
			if len(r.signer.signed) != 2 {
				t.Errorf("signed %v after the attack, want nothing more", r.signer.signed)
			}
		})
	}
}

// TestUnseenAppends: a notary whose chain row stands at seq 2 and whose
// next record is a head advance from 4 (the stream no longer holds 3 and 4:
// it was stopped longer than the stream keeps records) says it cannot vouch
// for them, and signs nothing.
func TestUnseenAppends(t *testing.T) {
	r := newRig(t)
	c := &chainOf{t: t, name: "acme"}
	c.emit(r.tb, 2, false)
	r.run()
	c.emit(r.tb, 2, false)
	r.tb.drain() // trimmed from the stream
	c.emit(r.tb, 1, false)
	r.run()
	if f := r.findings(); len(f) != 1 || f[0] != string(notary.Unseen) {
		t.Fatalf("findings %v, want [unseen]\n%s", f, r.logs.String())
	}
	if len(r.signer.signed) != 1 {
		t.Errorf("signed %v, want only seq 2", r.signer.signed)
	}
}

// TestUnreadableRecords: a record that does not decode, or an event image
// that is not an event, is a finding; the rest of the batch is applied.
func TestUnreadableRecords(t *testing.T) {
	r := newRig(t)
	c := &chainOf{t: t, name: "acme"}
	c.emit(r.tb, 1, false)
	ev := r.tb.drain()
	bad := []json.RawMessage{
		json.RawMessage(`{"eventID":"x1","eventName":"INSERT","dynamodb":{"Keys":{"tenant_id":{"Q":"t"}}}}`),
		json.RawMessage(`{"eventID":"x2","eventName":"INSERT","dynamodb":{"Keys":{"tenant_id":{"S":"globex"},"seq":{"N":"1"}},"NewImage":{"kind":{"S":"event"}},"SequenceNumber":"1"}}`),
	}
	ev.Records = append(bad, ev.Records...)
	if err := r.n.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if f := r.findings(); len(f) != 2 || f[0] != string(notary.Unreadable) || f[1] != string(notary.Unreadable) {
		t.Fatalf("findings %v, want two unreadable\n%s", f, r.logs.String())
	}
	if len(r.signer.signed) != 1 || !strings.HasPrefix(r.signer.signed[0], "acme@1:") {
		t.Errorf("signed %v, want acme at 1 (another chain's bad record does not stop it)", r.signer.signed)
	}
	if st := r.state("globex"); !st.Broken {
		t.Errorf("globex %+v, want broken", st)
	}
}

// TestFixture: the aws-lambda-go shaped fixture of one honest append (event
// INSERT then head INSERT, as a first Emit writes them) is signed.
func TestFixture(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "first-emit.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev notary.Event
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	r := newRig(t)
	// The table holds what the records say it holds.
	var de events.DynamoDBEvent
	if err := json.Unmarshal(b, &de); err != nil {
		t.Fatal(err)
	}
	for _, rec := range de.Records {
		it, err := envelope.ItemFromStreamImage(rec.Change.NewImage)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseInt(rec.Change.Keys[keys.AttrSeq].Number(), 10, 64)
		if r.tb.items["acme"] == nil {
			r.tb.items["acme"] = map[int64]envelope.Item{}
		}
		r.tb.items["acme"][n] = it
	}
	if err := r.n.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if f := r.findings(); len(f) != 0 {
		t.Fatalf("findings %v\n%s", f, r.logs.String())
	}
	if len(r.signer.signed) != 1 || !strings.HasPrefix(r.signer.signed[0], "acme@1:") {
		t.Fatalf("signed %v, want acme at 1", r.signer.signed)
	}
}

// occupied answers every Sign with ErrOccupied.
type occupied struct{ calls int }

func (o *occupied) Sign(context.Context, string, int64, string) error {
	o.calls++
	return fmt.Errorf("checkpoint key taken: %w", notary.ErrOccupied)
}

// TestOccupiedCheckpointKey: a checkpoint key that already holds another
// object is reported (ERROR, NotaryFinding checkpoint_occupied), the batch
// succeeds, and the next advance is signed under its own key: the chain is
// not broken by what someone put in the bucket.
func TestOccupiedCheckpointKey(t *testing.T) {
	r := newRig(t)
	o := &occupied{}
	n, err := notary.New(notary.Config{Store: r.store, Log: r.tb, Signer: o, Logger: obs.NewLogger(&r.logs, "info"), Metrics: obs.NewMetrics(&r.metrics)})
	if err != nil {
		t.Fatal(err)
	}
	c := &chainOf{t: t, name: "acme"}
	c.emit(r.tb, 1, false)
	if err := n.Handle(context.Background(), r.tb.drain()); err != nil {
		t.Fatalf("Handle: %v, want the batch to succeed", err)
	}
	if f := r.findings(); len(f) != 1 || f[0] != string(notary.Occupied) {
		t.Fatalf("findings %v, want [%s]", f, notary.Occupied)
	}
	st := r.state("acme")
	if st.Broken || st.Signed != 1 || st.Seq != 1 {
		t.Errorf("state %+v, want seq 1 passed over (signed 1), not broken", st)
	}
	c.emit(r.tb, 1, false)
	if err := n.Handle(context.Background(), r.tb.drain()); err != nil {
		t.Fatal(err)
	}
	if o.calls != 2 {
		t.Errorf("%d signatures asked, want 2 (the next advance is signed under its own key)", o.calls)
	}
}

// TestStoreFailureFailsTheBatch: a state the notary cannot save fails the
// batch (the mapping retries it); nothing is lost, and the retry applies it.
func TestStoreFailureFailsTheBatch(t *testing.T) {
	r := newRig(t)
	c := &chainOf{t: t, name: "acme"}
	c.emit(r.tb, 2, false)
	ev := r.tb.drain()
	// Another writer saved the chain's row first.
	if err := r.store.Save(context.Background(), notary.NewState("acme")); err != nil {
		t.Fatal(err)
	}
	bad := &conflicting{Store: r.store}
	n, err := notary.New(notary.Config{Store: bad, Log: r.tb, Signer: r.signer, Logger: obs.NewLogger(&r.logs, "info")})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Handle(context.Background(), ev); err == nil {
		t.Fatal("Handle with a conflicting state: nil error, want the batch failed")
	}
	if err := r.n.Handle(context.Background(), ev); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if st := r.state("acme"); st.Seq != 2 || st.Broken {
		t.Errorf("after the retry: %+v, want seq 2, not broken", st)
	}
}

// conflicting loads nothing, so its save conflicts with the stored row.
type conflicting struct{ notary.Store }

func (conflicting) Load(context.Context, string) (*notary.State, error) { return nil, nil }

// seeds starts chains from a signed checkpoint.
type seeds map[string]struct {
	seq  int64
	hash string
}

func (s seeds) Latest(_ context.Context, name string) (int64, string, bool, error) {
	c, ok := s[name]
	return c.seq, c.hash, ok, nil
}

// TestStartsFromSignedCheckpoint: a notary added to a live stack starts a
// chain from its newest signed checkpoint. The stream replays history from
// before it (an event and head at and below the checkpoint), which is
// passed over; what follows is checked and signed. A replayed event at the
// checkpoint's seq with another hash is a finding.
func TestStartsFromSignedCheckpoint(t *testing.T) {
	for _, forged := range []bool{false, true} {
		t.Run(fmt.Sprintf("forged=%v", forged), func(t *testing.T) {
			r := newRig(t)
			c := &chainOf{t: t, name: "acme"}
			c.emit(r.tb, 2, false)
			c.emit(r.tb, 1, false)
			seedHash := c.evs[2].Hash
			if forged {
				seedHash = strings.Repeat("ef", 32)
			}
			n, err := notary.New(notary.Config{Store: r.store, Log: r.tb, Signer: r.signer, Logger: obs.NewLogger(&r.logs, "info"),
				Seeds: seeds{"acme": {3, seedHash}}})
			if err != nil {
				t.Fatal(err)
			}
			c.emit(r.tb, 2, true) // a transaction after the checkpoint
			if err := n.Handle(context.Background(), r.tb.drain()); err != nil {
				t.Fatal(err)
			}
			f := r.findings()
			if forged {
				if len(f) == 0 || f[0] != string(notary.Link) || len(r.signer.signed) != 0 {
					t.Fatalf("findings %v, signed %v: want a link finding at the checkpoint and nothing signed", f, r.signer.signed)
				}
				return
			}
			if len(f) != 0 {
				t.Fatalf("findings %v on replayed history\n%s", f, r.logs.String())
			}
			if want := []string{"acme@5:" + c.evs[4].Hash}; fmt.Sprint(r.signer.signed) != fmt.Sprint(want) {
				t.Errorf("signed %v, want %v", r.signer.signed, want)
			}
		})
	}
}

// TestTamperWatchChangesAreFindings: the notary is the events stream's one
// watcher (tamper-watch reads only the state table's stream: DynamoDB
// serves two readers per shard, the Pipe and the notary). Each change
// tamper-watch reported on the log (pkg/tamper's Change) is a notary
// finding, of the kind the alarm text and docs/notary.md name for it.
// tamper's unreadable is TestUnreadableRecords.
func TestTamperWatchChangesAreFindings(t *testing.T) {
	otherRow := func(kind string) envelope.Item {
		return envelope.Item{
			keys.AttrTenant: &types.AttributeValueMemberS{Value: "acme"}, keys.AttrSeq: &types.AttributeValueMemberN{Value: "-1"},
			keys.AttrKind: &types.AttributeValueMemberS{Value: kind},
		}
	}
	tests := []struct {
		change string // pkg/tamper's Change
		name   string
		attack func(t *testing.T, tb *table, c *chainOf)
		want   notary.Kind
	}{
		{"event_modified", "event row overwritten in place", func(t *testing.T, tb *table, c *chainOf) {
			e := c.evs[0]
			e.Payload = map[string]any{"order": "forged"}
			tb.write(c.name, e.Seq, item(t, e))
		}, notary.Rewrite},
		{"event_removed", "event row deleted", func(t *testing.T, tb *table, c *chainOf) {
			tb.remove(c.name, 1)
		}, notary.Removed},
		{"head_removed", "head row deleted", func(t *testing.T, tb *table, c *chainOf) {
			tb.remove(c.name, 0)
		}, notary.Removed},
		{"head_modified", "head moved back", func(t *testing.T, tb *table, c *chainOf) {
			tb.write(c.name, 0, headItem(c.name, c.evs[0]))
		}, notary.Rollback},
		{"head_modified", "head advanced by more than one transaction commits", func(t *testing.T, tb *table, c *chainOf) {
			e := c.next("far")
			e.Seq += tamper.MaxAdvance + 1
			tb.write(c.name, 0, headItem(c.name, e))
		}, notary.Gap},
		{"head_modified", "head advanced keeping its last_hash", func(t *testing.T, tb *table, c *chainOf) {
			e := c.next("kept")
			tb.write(c.name, e.Seq, item(t, e))
			h := headItem(c.name, e)
			h[keys.AttrLastHash] = &types.AttributeValueMemberS{Value: c.evs[1].Hash}
			tb.write(c.name, 0, h)
		}, notary.Link},
		{"head_modified", "head image of another kind", func(t *testing.T, tb *table, c *chainOf) {
			h := headItem(c.name, c.evs[1])
			h[keys.AttrKind] = &types.AttributeValueMemberS{Value: "event"}
			tb.write(c.name, 0, h)
		}, notary.Unreadable},
		{"row_modified", "idempotency-key row overwritten", func(t *testing.T, tb *table, c *chainOf) {
			tb.write(c.name, -1, otherRow("idem"))
			tb.write(c.name, -1, otherRow("forged"))
		}, notary.RowChanged},
		{"row_removed", "idempotency-key row deleted", func(t *testing.T, tb *table, c *chainOf) {
			tb.write(c.name, -1, otherRow("idem"))
			tb.remove(c.name, -1)
		}, notary.RowChanged},
	}
	for _, tt := range tests {
		t.Run(tt.change+"/"+tt.name, func(t *testing.T) {
			r := newRig(t)
			c := &chainOf{t: t, name: "acme"}
			c.emit(r.tb, 2, false)
			r.run()
			if f := r.findings(); len(f) != 0 {
				t.Fatalf("honest appends: findings %v", f)
			}
			tt.attack(t, r.tb, c)
			r.run()
			f := r.findings()
			if len(f) == 0 || f[0] != string(tt.want) {
				t.Fatalf("findings %v, want first %s\n%s", f, tt.want, r.logs.String())
			}
			if !strings.Contains(r.metrics.String(), `"Finding":"`+string(tt.want)+`"`) {
				t.Errorf("no EMF %s with Finding %s:\n%s", keys.MetricNotaryFinding, tt.want, r.metrics.String())
			}
			if len(r.signer.signed) != 1 {
				t.Errorf("signed %v, want only the honest seq 2", r.signer.signed)
			}
		})
	}
}

// TestHeadShapeIsLoudButSigned: a head advance whose chain links (events
// inserted, hashes right) but whose head row is not what an append writes
// (an extra attribute, shards outside 2 to 32 or not a number, a dedup_id
// not derived from its last_event_id) is a head_shape finding (ERROR line,
// NotaryFinding, the chain row's findings), on the head's INSERT as on a
// MODIFY; the chain is whole, so it is not broken and the advance is
// signed, and later advances too. A tenant's valid shards attribute is no
// finding.
func TestHeadShapeIsLoudButSigned(t *testing.T) {
	tests := []struct {
		name  string
		shape func(h envelope.Item)
		want  string // in the finding's what; "" for no finding
	}{
		{"extra attribute", func(h envelope.Item) { h["note"] = &types.AttributeValueMemberS{Value: "x"} }, "attributes note besides the head's"},
		{"shards 1", func(h envelope.Item) { h[keys.AttrShards] = &types.AttributeValueMemberN{Value: "1"} }, "shards 1, want a number of chain shards (2 to 32)"},
		{"shards 33", func(h envelope.Item) { h[keys.AttrShards] = &types.AttributeValueMemberN{Value: "33"} }, "shards 33"},
		{"shards not a number", func(h envelope.Item) { h[keys.AttrShards] = &types.AttributeValueMemberS{Value: "4"} }, "shards of type S"},
		{"dedup_id not derived", func(h envelope.Item) { h[keys.AttrDedupID] = &types.AttributeValueMemberS{Value: "head-other"} }, `dedup_id "head-other" not derived`},
		{"dedup_id missing", func(h envelope.Item) { delete(h, keys.AttrDedupID) }, `dedup_id "" not derived`},
		{"valid shards", func(h envelope.Item) { h[keys.AttrShards] = &types.AttributeValueMemberN{Value: "4"} }, ""},
	}
	for _, tt := range tests {
		for _, first := range []bool{true, false} {
			name := tt.name + "/modify"
			if first {
				name = tt.name + "/insert"
			}
			t.Run(name, func(t *testing.T) {
				r := newRig(t)
				c := &chainOf{t: t, name: "acme"}
				if !first {
					c.emit(r.tb, 2, false)
					r.run()
				}
				e := c.next("odd")
				r.tb.write(c.name, e.Seq, item(t, e))
				h := headItem(c.name, e)
				tt.shape(h)
				r.tb.write(c.name, 0, h)
				r.run()
				c.emit(r.tb, 1, false) // an honest advance after it
				r.run()

				f := r.findings()
				st := r.state(c.name)
				wantSigned := 2
				if !first {
					wantSigned = 3
				}
				if len(r.signer.signed) != wantSigned || st.Seq != e.Seq+1 || st.Broken {
					t.Errorf("signed %v, chain at %d, broken %v; want every advance signed (%d), through seq %d, not broken", r.signer.signed, st.Seq, st.Broken, wantSigned, e.Seq+1)
				}
				if tt.want == "" {
					if len(f) != 0 || st.Findings != 0 {
						t.Errorf("findings %v (row: %d), want none\n%s", f, st.Findings, r.logs.String())
					}
					return
				}
				if len(f) != 1 || f[0] != string(notary.HeadShape) {
					t.Fatalf("findings %v, want one %s\n%s", f, notary.HeadShape, r.logs.String())
				}
				if msg := r.errorMessages(); len(msg) != 1 || !strings.Contains(msg[0], tt.want) || !strings.Contains(msg[0], "still signed") {
					t.Errorf("the finding's line %q does not say %q and that the chain is still signed", msg, tt.want)
				}
				if !strings.Contains(r.metrics.String(), `"Finding":"`+string(notary.HeadShape)+`"`) {
					t.Errorf("no EMF %s with Finding %s:\n%s", keys.MetricNotaryFinding, notary.HeadShape, r.metrics.String())
				}
				if st.Findings != 1 || !strings.HasPrefix(st.FirstFinding, string(notary.HeadShape)) {
					t.Errorf("chain row: findings %d, first %q; want the head_shape finding recorded", st.Findings, st.FirstFinding)
				}
			})
		}
	}
}
