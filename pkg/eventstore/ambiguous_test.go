package eventstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// twinDB is our own DynamoDB (`fourlanes dynamodb`) in a process of this
// test's own, so the test can inject its faults and move its clock without
// touching any other test's server.
type twinDB struct {
	client *dynamodb.Client // the SDK's default retryer (4 attempts, same token)
	bare   *dynamodb.Client // no SDK retries: every ambiguity reaches the store
	table  string
	skew   time.Duration // the server's clock runs this far ahead
}

func newTwinDB(t *testing.T) *twinDB {
	t.Helper()
	td := &twinDB{client: localaws.DynamoDBProcess(t)}
	td.bare = localaws.NewDynamoDB(aws.ToString(td.client.Options().BaseEndpoint), func(o *dynamodb.Options) { o.Retryer = aws.NopRetryer{} })
	td.table = localaws.UniqueName(t, "events")
	localaws.CreateTable(t, td.client, eventstore.TableSchema(td.table))
	return td
}

func (td *twinDB) store(t *testing.T, db eventstore.DynamoDB, mut func(*eventstore.Config)) *eventstore.Store {
	t.Helper()
	cfg := eventstore.Config{Table: td.table, Catalog: catalog, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond,
		OutcomeWithin: 300 * time.Millisecond, CallTimeout: 2 * time.Second}
	if mut != nil {
		mut(&cfg)
	}
	return mustStore(t, db, cfg)
}

// The fault kinds of our DynamoDB's admin API the tests inject.
const (
	faultDrop  = "drop"  // committed, its answer never sent
	faultError = "error" // InternalServerError, nothing written
	faultDelay = "delay" // committed, its answer held
)

func (td *twinDB) inject(t *testing.T, kind string, count int) {
	t.Helper()
	localaws.InjectFault(t, td.client, localaws.Fault{Action: "TransactWriteItems", Table: td.table, Kind: kind, Count: count})
}

// advance moves the server's clock d further ahead.
func (td *twinDB) advance(t *testing.T, d time.Duration) {
	t.Helper()
	td.skew += d
	localaws.SetClock(t, td.client, td.skew)
}

// checkLog verifies tenant's log holds exactly want events, at seqs 1..want,
// each id once, chained, with the head at want; and returns them.
func (td *twinDB) checkLog(t *testing.T, tenant string, want int) []envelope.Envelope {
	t.Helper()
	s := td.store(t, td.client, nil)
	(&fixture{db: td.client, table: td.table, store: s}).verify(t, tenant, int64(want))
	evs, err := s.AllEvents(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int64{}
	for _, e := range evs {
		if at, dup := seen[e.ID]; dup {
			t.Fatalf("event %s is in the log twice: seq %d and seq %d", e.ID, at, e.Seq)
		}
		seen[e.ID] = e.Seq
	}
	return evs
}

// wire sits between a store and the twin: it records every
// TransactWriteItems (token, body, the seqs of its event rows) and lets a
// test decide, per call, whether it reaches the server and what the store
// hears back.
type wire struct {
	eventstore.DynamoDB
	mu    sync.Mutex
	calls []sentTx
	on    func(n int, in *dynamodb.TransactWriteItemsInput, forward func() (*dynamodb.TransactWriteItemsOutput, error)) (*dynamodb.TransactWriteItemsOutput, error)
}

type sentTx struct {
	token string
	body  string
	seqs  []string
}

func (w *wire) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	body, err := json.Marshal(in.TransactItems)
	if err != nil {
		return nil, err
	}
	var seqs []string
	for _, it := range in.TransactItems {
		if it.Put == nil {
			continue
		}
		if k, _ := it.Put.Item[keys.AttrKind].(*types.AttributeValueMemberS); k != nil && k.Value == keys.KindEvent {
			seqs = append(seqs, it.Put.Item[keys.AttrSeq].(*types.AttributeValueMemberN).Value)
		}
	}
	w.mu.Lock()
	w.calls = append(w.calls, sentTx{token: aws.ToString(in.ClientRequestToken), body: string(body), seqs: seqs})
	n, on := len(w.calls), w.on
	w.mu.Unlock()
	forward := func() (*dynamodb.TransactWriteItemsOutput, error) {
		return w.DynamoDB.TransactWriteItems(ctx, in, o...)
	}
	if on == nil {
		return forward()
	}
	return on(n, in, forward)
}

func (w *wire) sent() []sentTx {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]sentTx(nil), w.calls...)
}

// lostAnswer is what the store hears when the connection drops after sending.
var lostAnswer = &smithyhttp.RequestSendError{Err: fmt.Errorf("read response: %w", io.ErrUnexpectedEOF)}

func batchings() map[string]eventstore.Batching {
	return map[string]eventstore.Batching{"group commit": eventstore.BatchPerTenant, "one transaction per event": eventstore.BatchNone}
}

// TestAmbiguousCommitDropped: the server commits, then drops the connection
// (faultDrop). With the SDK's own retries (same token: the
// resend is answered from the token) and without them (the store resends the
// identical request): one event, at seq 1, and the caller gets success.
func TestAmbiguousCommitDropped(t *testing.T) {
	for bname, batching := range batchings() {
		for cname, bare := range map[string]bool{"SDK retries": false, "no SDK retries": true} {
			t.Run(bname+"/"+cname, func(t *testing.T) {
				td := newTwinDB(t)
				client := td.client
				if bare {
					client = td.bare
				}
				w := &wire{DynamoDB: client}
				s := td.store(t, w, func(c *eventstore.Config) { c.Batching = batching })
				td.inject(t, faultDrop, 1)
				e, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{"n": 1})
				if err != nil {
					t.Fatalf("got %v, want success", err)
				}
				if e.Seq != 1 {
					t.Errorf("got seq %d, want 1", e.Seq)
				}
				evs := td.checkLog(t, "t1", 1)
				if evs[0].ID != e.ID {
					t.Errorf("log holds %s, Emit returned %s", evs[0].ID, e.ID)
				}
				calls := w.sent()
				if bare {
					if len(calls) != 2 || s.Stats().Ambiguous != 1 {
						t.Errorf("got %d calls, %d ambiguous; want the store's own resend: 2 calls, 1 ambiguous", len(calls), s.Stats().Ambiguous)
					}
				} else if len(calls) != 1 {
					t.Errorf("got %d calls, want 1 (the SDK resends inside the call)", len(calls))
				}
				for i, c := range calls[1:] {
					if c.token != calls[0].token || c.body != calls[0].body {
						t.Errorf("resend %d differs from the first request (token %s vs %s)", i+1, c.token, calls[0].token)
					}
				}
				if len(localaws.ArmedFaults(t, td.client)) != 0 {
					t.Error("the drop fault was never hit")
				}
				// The store knows nothing stale: the next emit is seq 2.
				if e, err := s.Emit(ctxFor("t1"), "order.paid", map[string]any{}); err != nil || e.Seq != 2 {
					t.Fatalf("next emit: seq %d, err %v; want seq 2", e.Seq, err)
				}
				td.checkLog(t, "t1", 2)
			})
		}
	}
}

// TestAmbiguousUndecidedThenSettle: the commit's answer is lost and the
// network stays down for the whole OutcomeWithin: the caller gets an
// *OutcomeUnknownError naming tenant, event id and seq, and Settle says
// committed. When nothing was written (5xx throughout), Settle says unknown
// until another event takes the seq, then not committed.
func TestAmbiguousUndecidedThenSettle(t *testing.T) {
	t.Run("committed", func(t *testing.T) {
		td := newTwinDB(t)
		w := &wire{DynamoDB: td.bare}
		w.on = func(n int, in *dynamodb.TransactWriteItemsInput, forward func() (*dynamodb.TransactWriteItemsOutput, error)) (*dynamodb.TransactWriteItemsOutput, error) {
			if n == 1 {
				_, _ = forward() // commits; its answer is lost
			}
			return nil, lostAnswer
		}
		s := td.store(t, w, nil)
		_, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{})
		var ou *eventstore.OutcomeUnknownError
		if !errors.As(err, &ou) || !errors.Is(err, eventstore.ErrOutcomeUnknown) {
			t.Fatalf("got %v, want an *OutcomeUnknownError", err)
		}
		t.Log(err)
		evs := td.checkLog(t, "t1", 1)
		if ou.Tenant != "t1" || ou.EventID != evs[0].ID || ou.Seq != 1 || ou.Attempts < 2 {
			t.Errorf("got %+v, want tenant t1, event %s, seq 1, attempts >= 2", ou, evs[0].ID)
		}
		for _, want := range []string{`"t1"`, ou.EventID, "seq 1"} {
			if !contains(err.Error(), want) {
				t.Errorf("message %q does not say %s", err, want)
			}
		}
		for i, c := range w.sent() {
			if c.token != w.sent()[0].token || c.body != w.sent()[0].body {
				t.Fatalf("call %d is not the identical request", i+1)
			}
		}
		// Settle, from another process.
		other := td.store(t, td.client, nil)
		st, err := other.Settle(context.Background(), ou.Tenant, ou.EventID, ou.Seq)
		if err != nil || st.Outcome != eventstore.OutcomeCommitted || st.Event.ID != ou.EventID || st.Event.Seq != 1 {
			t.Fatalf("settle: got %+v, %v; want committed at seq 1", st, err)
		}
	})
	t.Run("not committed", func(t *testing.T) {
		td := newTwinDB(t)
		td.inject(t, faultError, 1000)
		s := td.store(t, td.client, nil)
		_, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{})
		var ou *eventstore.OutcomeUnknownError
		if !errors.As(err, &ou) || ou.Seq != 1 || ou.Tenant != "t1" {
			t.Fatalf("got %v, want an *OutcomeUnknownError for seq 1 of t1", err)
		}
		st, err := s.Settle(context.Background(), ou.Tenant, ou.EventID, ou.Seq)
		if err != nil || st.Outcome != eventstore.OutcomeUnknown {
			t.Fatalf("settle while nothing took seq 1: got %v, %v; want unknown", st.Outcome, err)
		}
		localaws.ClearFaults(t, td.client)
		e, err := s.Emit(ctxFor("t1"), "order.paid", map[string]any{})
		if err != nil || e.Seq != 1 {
			t.Fatalf("next emit: seq %d, err %v; want seq 1 (nothing was written)", e.Seq, err)
		}
		st, err = s.Settle(context.Background(), ou.Tenant, ou.EventID, ou.Seq)
		if err != nil || st.Outcome != eventstore.OutcomeNotCommitted || st.Holder != e.ID {
			t.Fatalf("settle: got %+v, %v; want not committed, seq held by %s", st, err, e.ID)
		}
		td.checkLog(t, "t1", 1)
	})
}

// TestAmbiguousGroupCommit: a batch of several callers meets a dropped
// answer, then (second case) a network down for good: every caller gets its
// own seq, or its own outcome-unknown error naming its own event; never a
// duplicate.
func TestAmbiguousGroupCommit(t *testing.T) {
	const callers = 8
	for _, tc := range []struct {
		name      string
		fault     string
		partition bool // after the faulted call, nothing reaches the server
		committed bool
	}{
		{"dropped answer, resent", faultDrop, false, true},
		{"dropped answer, network down", faultDrop, true, true},
		{"5xx throughout", faultError, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := newTwinDB(t)
			release, answered := make(chan struct{}), make(chan struct{})
			w := &wire{DynamoDB: td.bare}
			w.on = func(n int, in *dynamodb.TransactWriteItemsInput, forward func() (*dynamodb.TransactWriteItemsOutput, error)) (*dynamodb.TransactWriteItemsOutput, error) {
				switch {
				case n == 1: // the leader's lone first event: hold it while the batch forms
					out, err := forward()
					close(answered)
					<-release
					return out, err
				case n == 2 || !tc.partition:
					return forward()
				}
				return nil, lostAnswer
			}
			s := td.store(t, w, nil)
			results := make([]error, callers)
			envs := make([]envelope.Envelope, callers)
			var wg sync.WaitGroup
			emit := func(i int) {
				defer wg.Done()
				envs[i], results[i] = s.Emit(ctxFor("t1"), "order.placed", map[string]any{"i": i})
			}
			wg.Add(1)
			go emit(0)
			<-answered // the server has committed the first event
			for i := 1; i < callers; i++ {
				wg.Add(1)
				go emit(i)
			}
			waitFor(t, func() bool { return eventstore.PendingForTest(s, "t1") == callers-1 })
			count := 1
			if tc.fault == faultError {
				count = 1000
			}
			td.inject(t, tc.fault, count)
			close(release)
			wg.Wait()

			calls := w.sent()
			if len(calls) < 2 || len(calls[1].seqs) != callers-1 {
				t.Fatalf("second transaction carried %v, want the %d waiting callers", calls[1].seqs, callers-1)
			}
			if results[0] != nil || envs[0].Seq != 1 {
				t.Fatalf("first caller: seq %d, %v", envs[0].Seq, results[0])
			}
			want := 1
			if tc.committed {
				want = callers
			}
			evs := td.checkLog(t, "t1", want)
			ids := map[string]bool{}
			for _, e := range evs {
				ids[e.ID] = true
			}
			seqs := map[int64]bool{}
			for i := 1; i < callers; i++ {
				var ou *eventstore.OutcomeUnknownError
				switch {
				case !tc.partition && tc.committed:
					if results[i] != nil || !ids[envs[i].ID] {
						t.Errorf("caller %d: got %v (event in log: %v), want success", i, results[i], ids[envs[i].ID])
					}
				case errors.As(results[i], &ou):
					if ou.Tenant != "t1" || ou.Seq < 2 || ou.Seq > callers || seqs[ou.Seq] {
						t.Errorf("caller %d: got %+v, want its own seq in 2..%d", i, ou, callers)
					}
					seqs[ou.Seq] = true
					st, err := s.Settle(context.Background(), ou.Tenant, ou.EventID, ou.Seq)
					wantOutcome := eventstore.OutcomeUnknown
					if tc.committed {
						wantOutcome = eventstore.OutcomeCommitted
					}
					if err != nil || st.Outcome != wantOutcome {
						t.Errorf("caller %d: settle got %v, %v; want %v", i, st.Outcome, err, wantOutcome)
					}
					if tc.committed != ids[ou.EventID] {
						t.Errorf("caller %d: event %s in the log: %v, want %v", i, ou.EventID, ids[ou.EventID], tc.committed)
					}
					delete(ids, ou.EventID)
				default:
					t.Errorf("caller %d: got %v, want an *OutcomeUnknownError", i, results[i])
				}
			}
			for i, c := range calls[2:] {
				if c.token != calls[1].token || c.body != calls[1].body {
					t.Errorf("call %d is not the identical resend of the batch", i+3)
				}
			}
		})
	}
}

// TestTransactionInProgressDoesNotReseal: the first request commits but the
// store hears TransactionInProgress (what the SDK's retry of it gets while it
// runs). The store used to re-read the head and seal the same event at seq 2;
// now it resends the identical request and learns it committed.
func TestTransactionInProgressDoesNotReseal(t *testing.T) {
	for bname, batching := range batchings() {
		t.Run(bname, func(t *testing.T) {
			td := newTwinDB(t)
			w := &wire{DynamoDB: td.client}
			w.on = func(n int, in *dynamodb.TransactWriteItemsInput, forward func() (*dynamodb.TransactWriteItemsOutput, error)) (*dynamodb.TransactWriteItemsOutput, error) {
				out, err := forward()
				if n <= 2 {
					return nil, &types.TransactionInProgressException{Message: aws.String("The transaction with the given request token is already in progress.")}
				}
				return out, err
			}
			s := td.store(t, w, func(c *eventstore.Config) { c.Batching = batching })
			e, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{})
			if err != nil || e.Seq != 1 {
				t.Fatalf("got seq %d, %v; want success at seq 1", e.Seq, err)
			}
			td.checkLog(t, "t1", 1)
			calls := w.sent()
			if len(calls) != 3 {
				t.Fatalf("got %d calls, want 3", len(calls))
			}
			for _, c := range calls {
				if c.token != calls[0].token || c.body != calls[0].body || c.seqs[0] != "1" {
					t.Errorf("a resend was re-sealed: token %s seqs %v, first %s %v", c.token, c.seqs, calls[0].token, calls[0].seqs)
				}
			}
		})
	}
}

// TestDefiniteCancellationReseals: a rival moves the head first. Without an
// ambiguous answer before it, the head condition's failure re-seals at the
// next seq with a new token; after an ambiguous answer, the identical resend
// fails on the head, the store checks the seq holds the rival's event, then
// re-seals. And if a copy did commit but the resend is not answered from the
// token (the 10-minute window has passed, or a server ignores tokens), the
// check finds our own event and reports success.
func TestDefiniteCancellationReseals(t *testing.T) {
	for _, tc := range []struct {
		name string
		// first: what happens to call 1
		first    func(td *twinDB, rival func(), forward func() (*dynamodb.TransactWriteItemsOutput, error)) (*dynamodb.TransactWriteItemsOutput, error)
		wantSeq  int64
		wantLog  int
		tokens   string // per call: same letter, same token
		forgetOK bool   // resends reach the server as new requests
	}{
		{"head moved", func(_ *twinDB, rival func(), forward func() (*dynamodb.TransactWriteItemsOutput, error)) (*dynamodb.TransactWriteItemsOutput, error) {
			rival()
			return forward()
		}, 2, 2, "ab", false},
		{"ambiguous, then head moved", func(_ *twinDB, rival func(), _ func() (*dynamodb.TransactWriteItemsOutput, error)) (*dynamodb.TransactWriteItemsOutput, error) {
			rival()
			return nil, lostAnswer
		}, 2, 2, "aab", false},
		{"committed, token forgotten", func(_ *twinDB, _ func(), forward func() (*dynamodb.TransactWriteItemsOutput, error)) (*dynamodb.TransactWriteItemsOutput, error) {
			_, _ = forward()
			return nil, lostAnswer
		}, 1, 1, "aa", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := newTwinDB(t)
			rivalStore := td.store(t, td.client, nil)
			rival := func() {
				if _, err := rivalStore.Emit(ctxFor("t1"), "order.placed", map[string]any{"rival": true}); err != nil {
					t.Error(err)
				}
			}
			w := &wire{DynamoDB: td.bare}
			w.on = func(n int, in *dynamodb.TransactWriteItemsInput, forward func() (*dynamodb.TransactWriteItemsOutput, error)) (*dynamodb.TransactWriteItemsOutput, error) {
				if n == 1 {
					return tc.first(td, rival, forward)
				}
				if tc.forgetOK {
					// A server past the token window: a resend is a new request.
					cp := *in
					cp.ClientRequestToken = aws.String(fmt.Sprintf("forgotten-%d", n))
					return td.bare.TransactWriteItems(context.Background(), &cp)
				}
				return forward()
			}
			s := td.store(t, w, func(c *eventstore.Config) { c.Batching = eventstore.BatchNone })
			e, err := s.Emit(ctxFor("t1"), "order.paid", map[string]any{})
			if err != nil || e.Seq != tc.wantSeq {
				t.Fatalf("got seq %d, %v; want success at seq %d", e.Seq, err, tc.wantSeq)
			}
			evs := td.checkLog(t, "t1", tc.wantLog)
			if evs[e.Seq-1].ID != e.ID {
				t.Errorf("seq %d holds %s, want ours %s", e.Seq, evs[e.Seq-1].ID, e.ID)
			}
			calls := w.sent()
			if len(calls) != len(tc.tokens) {
				t.Fatalf("got %d calls, want %d", len(calls), len(tc.tokens))
			}
			for i := range calls {
				for j := range calls {
					if same := tc.tokens[i] == tc.tokens[j]; same != (calls[i].token == calls[j].token) {
						t.Errorf("calls %d and %d: same token %v, want %v", i+1, j+1, !same, same)
					}
				}
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAmbiguousCommitDelayed: the server commits, then holds the answer past
// the store's CallTimeout (faultDelay): the call ends in a deadline, the
// store resends the identical request and hears success from the token.
func TestAmbiguousCommitDelayed(t *testing.T) {
	td := newTwinDB(t)
	w := &wire{DynamoDB: td.client}
	s := td.store(t, w, func(c *eventstore.Config) { c.CallTimeout = 200 * time.Millisecond; c.OutcomeWithin = 5 * time.Second })
	localaws.InjectFault(t, td.client, localaws.Fault{Action: "TransactWriteItems", Table: td.table, Kind: faultDelay, DelayMs: 2000})
	e, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{})
	if err != nil || e.Seq != 1 {
		t.Fatalf("got seq %d, %v; want success at seq 1", e.Seq, err)
	}
	td.checkLog(t, "t1", 1)
	calls := w.sent()
	if len(calls) != 2 || calls[1].token != calls[0].token || calls[1].body != calls[0].body {
		t.Errorf("got %d calls, want the first and its identical resend", len(calls))
	}
}
