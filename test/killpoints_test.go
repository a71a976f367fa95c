package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"

	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/examples/orders/notifications"
	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/lambdart"
	"github.com/fourlanes/fourlanes/twin/localaws"
	"github.com/fourlanes/fourlanes/twin/twintest"
)

// The kill points of issue 12: a process killed (SIGKILL) at the worst
// moment of each step between the producer and the subscriber, and
// afterwards every event is in the log once, chained, delivered once, its
// effect (an email) had once, and reconcile's delivery audit settled.
//
// No kill needs a hook in the code under test. Where a point has no output
// line to kill at, the test holds the process there: our own DynamoDB's
// fault injection (twin/ddb faults.go, armed over its admin API)
// lets a write commit and then holds its answer ("delay") or drops it
// ("drop"), so the process is killed after the write and before it learnt of
// it; for dlq-repair an SQS endpoint in front of the twin's holds its
// DeleteMessage. Only stream-filter is killed at an output line, which can
// race its answer, so that test repeats until the twin's journal shows an
// invocation ended by the kill.

// fault is one rule of the admin API, POST /_fourlanes/faults.
type fault struct {
	Action  string  `json:"action"`
	Table   string  `json:"table,omitempty"`
	Match   string  `json:"match,omitempty"`
	Kind    string  `json:"kind"`
	Count   int     `json:"count,omitempty"`
	Rate    float64 `json:"rate,omitempty"`
	Seed    uint64  `json:"seed,omitempty"`
	DelayMs int64   `json:"delayMs,omitempty"`
	Hits    int     `json:"hits,omitempty"` // listing only
}

// faults talks to the admin API of the DynamoDB the stack runs on, which
// may be in another process (make test exports one) and is shared by every
// test of the run, some in parallel: every rule names a table of this
// test's own stack, and list and clear see only the tables this test armed
// rules on (?table=), so one test's faults never touch another's.
type faults struct {
	t        *testing.T
	endpoint string
	mu       *sync.Mutex
	tables   *[]string // every table this test armed a rule on
}

func newFaults(t *testing.T) faults {
	t.Helper()
	ep, _ := twintest.Endpoints(t)
	f := faults{t: t, endpoint: strings.TrimRight(ep, "/") + "/_fourlanes/faults", mu: new(sync.Mutex), tables: new([]string)}
	t.Cleanup(f.clear)
	return f
}

// scope is the query naming this test's tables: empty when it armed none.
func (f faults) scope() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := url.Values{"table": *f.tables}
	return "?" + q.Encode()
}

func (f faults) do(method, query string, body any) []byte {
	f.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			f.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, f.endpoint+query, r)
	if err != nil {
		f.t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, f.endpoint+query, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		f.t.Fatalf("%s %s: %s: %s", method, f.endpoint+query, res.Status, out)
	}
	return out
}

// arm arms one rule, which must name a table of this test's stack.
func (f faults) arm(r fault) {
	f.t.Helper()
	if r.Table == "" {
		f.t.Fatalf("fault %+v names no table: a rule of the shared server must name this test's own", r)
	}
	f.mu.Lock()
	if !slices.Contains(*f.tables, r.Table) {
		*f.tables = append(*f.tables, r.Table)
	}
	f.mu.Unlock()
	f.do(http.MethodPost, "", r)
}

// list returns this test's rules still armed, with what is left of each and
// what each has hit.
func (f faults) list() []fault {
	f.t.Helper()
	q := f.scope()
	if q == "?" {
		return nil
	}
	var rules []fault
	if err := json.Unmarshal(f.do(http.MethodGet, q, nil), &rules); err != nil {
		f.t.Fatal(err)
	}
	return rules
}

// left returns how many requests the rules on (action, table) still hit.
func (f faults) left(action, table string) int {
	f.t.Helper()
	n := 0
	for _, r := range f.list() {
		if r.Action == action && r.Table == table {
			n += r.Count
		}
	}
	return n
}

// clear disarms this test's rules (those on the tables it armed rules on),
// and no other test's.
func (f faults) clear() {
	if q := f.scope(); q != "?" {
		f.do(http.MethodDelete, q, nil)
	}
}

// emitterEnv carries the emitter's orders from TestKillDuringEmit to the
// process it starts (this test binary, running TestEmitterProcess).
const emitterEnv = "FOURLANES_KILLPOINT_EMITTER"

type emitterSpec struct {
	Endpoint string `json:"endpoint"`
	Table    string `json:"table"`
	Tenant   string `json:"tenant"`
	Key      string `json:"key"`
	OrderID  string `json:"order_id"`
	// StallOnLostAnswer: when a TransactWriteItems gets no answer, say so
	// (lostPrefix) and stall instead of resending, until killed.
	StallOnLostAnswer bool `json:"stall_on_lost_answer"`
}

const (
	emittedPrefix = "EMITTED "
	lostPrefix    = "ANSWER LOST"
)

// stallOnLostAnswer is the emitter's HTTP client with StallOnLostAnswer. Our
// DynamoDB answers a resend of a committed token at once and ahead of any
// fault, so a dropped answer is followed by success within milliseconds:
// too soon to kill in between. Stalling here holds the process at that
// point (committed, answer lost, not yet resent), as a paused or starved
// process would be.
type stallOnLostAnswer struct{ next dynamodb.HTTPClient }

func (c stallOnLostAnswer) Do(r *http.Request) (*http.Response, error) {
	res, err := c.next.Do(r)
	if err != nil && strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".TransactWriteItems") {
		fmt.Println(lostPrefix + ": " + err.Error())
		time.Sleep(time.Hour) // until killed
	}
	return res, err
}

// TestEmitterProcess is not a test of its own: TestKillDuringEmit runs this
// test binary again, in a process of its own, to emit one order.placed with
// an idempotency key the way a producer would (the SDK's default client and
// retries, the store's defaults), so that the process can be SIGKILLed while
// it waits for the answer.
func TestEmitterProcess(t *testing.T) {
	raw := os.Getenv(emitterEnv)
	if raw == "" {
		t.Skip("a helper process of TestKillDuringEmit")
	}
	var spec emitterSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	cat, err := example.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	db := localaws.NewDynamoDB(spec.Endpoint, func(o *dynamodb.Options) {
		if spec.StallOnLostAnswer {
			o.HTTPClient = stallOnLostAnswer{next: o.HTTPClient}
		}
	})
	store, err := eventstore.New(db, eventstore.Config{Table: spec.Table, Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := tenancy.WithTenant(context.Background(), spec.Tenant)
	if err != nil {
		t.Fatal(err)
	}
	e, err := store.EmitWith(ctx, eventstore.EmitInput{Type: orders.TypePlaced, Payload: placed(spec.Tenant, spec.OrderID), IdempotencyKey: spec.Key})
	if err != nil {
		t.Fatalf("emit: %v", err)
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(emittedPrefix + string(b))
}

func placed(tenant, orderID string) orders.PlacedV2 {
	return orders.PlacedV2{OrderID: orderID, CustomerEmail: "kill@" + tenant + ".example",
		Items: []orders.Item{{SKU: "sku-mug", Qty: 1}}, TotalCents: 1250, Currency: "EUR"}
}

// emitter is one run of the emitter process.
type emitter struct {
	cmd    *exec.Cmd
	stdout lockedBuffer
	stderr lockedBuffer
	done   chan error
}

// lockedBuffer is a bytes.Buffer the process writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (em *emitter) out() string { return em.stdout.String() }

func startEmitter(t *testing.T, spec emitterSpec) *emitter {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	em := &emitter{done: make(chan error, 1)}
	em.cmd = exec.Command(os.Args[0], "-test.run=^TestEmitterProcess$", "-test.count=1", "-test.v")
	em.cmd.Env = append(os.Environ(), emitterEnv+"="+string(raw), "AWS_REGION="+localaws.Region,
		"AWS_ACCESS_KEY_ID=fourlanes", "AWS_SECRET_ACCESS_KEY=local", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	em.cmd.Stdout, em.cmd.Stderr = &em.stdout, &em.stderr
	if err := em.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { em.done <- em.cmd.Wait() }()
	t.Cleanup(func() { _ = em.cmd.Process.Kill() })
	return em
}

// exited reports whether the process has ended, and how.
func (em *emitter) exited() (bool, error) {
	select {
	case err := <-em.done:
		em.done <- err
		return true, err
	default:
		return false, nil
	}
}

// result waits for the process to end and returns the event it printed.
func (em *emitter) result(t *testing.T) envelope.Envelope {
	t.Helper()
	select {
	case err := <-em.done:
		if err != nil {
			t.Fatalf("emitter: %v\nstdout: %s\nstderr: %s", err, em.stdout.String(), em.stderr.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("emitter did not end within 2 minutes\nstdout: %s", em.stdout.String())
	}
	for _, line := range strings.Split(em.stdout.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, emittedPrefix); ok {
			var e envelope.Envelope
			if err := json.Unmarshal([]byte(rest), &e); err != nil {
				t.Fatalf("emitter printed %q: %v", rest, err)
			}
			return e
		}
	}
	t.Fatalf("emitter printed no event:\n%s", em.stdout.String())
	return envelope.Envelope{}
}

// checkOnce checks that every event was delivered to the DURABLE subscriber
// and had its effect exactly once, and that no message is left in a DLQ.
func (s *stack) checkOnce(t *testing.T, events []envelope.Envelope) {
	t.Helper()
	s.waitDelivered(t, events)
	s.checkEmailsOnce(t, events)
	for _, q := range []string{keys.EnvPipeDLQURL, keys.EnvDurableDLQURL} {
		if n := s.depth(q); n != 0 {
			t.Errorf("%s holds %d messages, want 0: %q", q, n, s.peek(q))
		}
	}
}

// checkLog checks that tenant's log holds exactly want, chained.
func (s *stack) checkLog(t *testing.T, tenant string, want ...envelope.Envelope) {
	t.Helper()
	got := s.allEvents(t, tenant)
	if len(got) != len(want) {
		t.Fatalf("log of %s: %d events, want %d: %+v", tenant, len(got), len(want), got)
	}
	for i := range got {
		if got[i].ID != want[i].ID || got[i].Seq != want[i].Seq {
			t.Errorf("log of %s at %d: event %s seq %d, want %s seq %d", tenant, i, got[i].ID, got[i].Seq, want[i].ID, want[i].Seq)
		}
	}
	// Reconcile verifies incrementally: verified_through, not verified (the
	// events checked by this call), says how far the chain holds.
	var r struct {
		ChainIntact     *bool           `json:"chain_intact"`
		LastSeq         int64           `json:"last_seq"`
		VerifiedThrough int64           `json:"verified_through"`
		FirstBreak      json.RawMessage `json:"first_break"`
	}
	out := s.reconcileCLI("-url", s.url, "-tenant", tenant)
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("reconcile output %q: %v", out, err)
	}
	if r.ChainIntact == nil || !*r.ChainIntact || r.LastSeq != int64(len(want)) || r.VerifiedThrough != int64(len(want)) {
		t.Errorf("reconcile %s: chain_intact %v, last_seq %d, verified_through %d, first_break %s; want intact, %d, %d",
			tenant, r.ChainIntact != nil && *r.ChainIntact, r.LastSeq, r.VerifiedThrough, r.FirstBreak, len(want), len(want))
	}
}

// checkSettled waits until reconcile's delivery audit says every DURABLE
// subscription of tenant is settled through the head: nothing unsettled.
func (s *stack) checkSettled(t *testing.T, tenant string) {
	t.Helper()
	eventually(t, 60*time.Second, "the delivery audit of "+tenant+" settled", func() (bool, string) {
		var r struct {
			LastSeq       int64 `json:"last_seq"`
			Subscriptions []struct {
				Subscription   string `json:"subscription"`
				Watermark      int64  `json:"watermark"`
				Unsettled      int64  `json:"unsettled"`
				EffectsUnknown int    `json:"effects_unknown"`
			} `json:"subscriptions"`
		}
		out := s.reconcileCLI("-url", s.url, "-tenant", tenant)
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("reconcile output %q: %v", out, err)
		}
		if len(r.Subscriptions) == 0 {
			return false, "no subscriptions in the report: " + out
		}
		for _, sd := range r.Subscriptions {
			if sd.Unsettled != 0 || sd.Watermark != r.LastSeq || sd.EffectsUnknown != 0 {
				return false, out
			}
		}
		return true, ""
	})
}

// A producer process killed (SIGKILL) while Emit waits for the answer of a
// transaction that did commit: exactly one event, at one seq, chained,
// delivered once; the same emit run again with the same idempotency key
// returns that event and appends nothing.
//
//   - drop: the answer is dropped (commit, then the connection closes
//     unanswered); the process is killed before it resends.
//   - delay: the answer is held; the process is killed inside the call that
//     committed.
func TestKillDuringEmit(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, nil)
	fs := newFaults(t)
	ep, _ := twintest.Endpoints(t)
	table := s.env[keys.EnvEventsTable]
	const action = "TransactWriteItems"
	for _, tc := range []struct {
		name  string
		rule  fault
		stall bool
	}{
		{"drop", fault{Action: action, Table: table, Kind: "drop", Count: 1}, true},
		{"delay", fault{Action: action, Table: table, Kind: "delay", Count: 1, DelayMs: 60_000}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs.clear()
			tenant := "kill-emit-" + tc.name
			spec := emitterSpec{Endpoint: ep, Table: table, Tenant: tenant, Key: "checkout-" + uuid.NewString(), OrderID: uuid.NewString(), StallOnLostAnswer: tc.stall}
			fs.arm(tc.rule)
			em := startEmitter(t, spec)
			eventually(t, 60*time.Second, "the emit committed and the emitter is waiting", func() (bool, string) {
				if done, err := em.exited(); done {
					t.Fatalf("the emitter ended before the kill (%v): the fault did not hold it\nstdout: %s\nstderr: %s", err, em.stdout.String(), em.stderr.String())
				}
				hit := fs.left(action, table) == 0
				lost := !tc.stall || strings.Contains(em.out(), lostPrefix)
				evs := s.allEvents(t, tenant)
				return hit && lost && len(evs) == 1, fmt.Sprintf("fault hit %v, answer lost %v, %d events in the log", hit, lost, len(evs))
			})
			if err := em.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			err := <-em.done
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the emitter ended with %v, want killed by SIGKILL\nstdout: %s", err, em.stdout.String())
			}
			if strings.Contains(em.stdout.String(), emittedPrefix) {
				t.Fatalf("the emitter learnt the outcome before the kill: %s", em.stdout.String())
			}
			t.Logf("killed emitter's output:\n%s", em.stdout.String())
			fs.clear()

			committed := s.allEvents(t, tenant)
			s.checkLog(t, tenant, committed...)
			if committed[0].Payload["order_id"] != spec.OrderID {
				t.Fatalf("the event in the log is %+v, want order %s", committed[0], spec.OrderID)
			}
			// The producer, restarted, retries with its key.
			spec.StallOnLostAnswer = false
			again := startEmitter(t, spec).result(t)
			if again.ID != committed[0].ID || again.Seq != committed[0].Seq || again.Hash != committed[0].Hash {
				t.Errorf("the retry with the same key returned event %s seq %d, want the committed %s seq %d", again.ID, again.Seq, committed[0].ID, committed[0].Seq)
			}
			s.checkLog(t, tenant, committed...)
			s.checkOnce(t, committed)
			s.checkSettled(t, tenant)
		})
	}
}

// stream-filter (the Pipe's enrichment) killed mid-invocation, once it has
// begun to answer a batch (its first output line, the record-age metric) and
// before the Pipe has its answer: the Pipe retries the batch, every event is
// delivered once, and nothing is sent to the Pipe's DLQ.
func TestKillStreamFilterMidInvocation(t *testing.T) {
	// Not parallel (see parallel in harness_test.go): the kill must land in the
	// microseconds between the line and the answer, which a loaded machine stretches.
	s := startStack(t, nil)
	filterID := s.fn[keys.FnStreamFilter]
	s.whenLine(func(fn string, l lambdart.Line) {
		if fn != filterID || l.RequestID == "" || !strings.Contains(l.Text, keys.MetricPipeRecordAge) {
			return
		}
		if f, err := s.tw.Function(fn); err == nil {
			f.KillRequest(l.RequestID)
		}
	})
	// A kill lands mid-invocation only when it beats the answer, which the
	// process sends microseconds after its last line; a late one kills an
	// idle process (harmless: the next batch starts a new one). The journal
	// says which invocations a kill ended.
	exits := func() []twin.Entry {
		return s.tw.Journal().Entries(func(e twin.Entry) bool {
			return e.Kind == twin.KindInvoke && e.Function == filterID && strings.Contains(e.Outcome, lambdart.ErrTypeExit)
		})
	}
	ctx := context.Background()
	tenants := []string{"acme", "globex"}
	if _, err := s.app.Workload(ctx, tenants, 2); err != nil {
		t.Fatal(err)
	}
	tries := 0
	for ; len(exits()) == 0 && tries < 80; tries++ {
		emitPlaced(t, s, tenants[tries%2])
		time.Sleep(150 * time.Millisecond) // one batch per emit: batches that merge give fewer chances
	}
	s.whenLine(nil)
	killed := exits()
	t.Logf("invocations ended by a kill (after %d extra emits):\n%s", tries, twin.FormatEntries(killed))
	if len(killed) == 0 {
		t.Fatal("no stream-filter invocation was killed mid-invocation: the answer always beat the kill")
	}
	events := s.allEvents(t, tenants...)
	s.checkOnce(t, events)
	if got := s.waitMessagesDone(t, len(events)); got != int64(len(events)) {
		t.Errorf("messages completed by the durable mapping: %d, want %d (one per event)", got, len(events))
	}
	for _, tenant := range tenants {
		if r := s.reconcile(tenant); r.ChainIntact == nil || !*r.ChainIntact {
			t.Errorf("reconcile %s: chain not intact: %s", tenant, r.FirstBreak)
		}
		s.checkSettled(t, tenant)
	}
}

// shortConsumer shortens the consumer's timeout (4 s) and its queue's
// visibility timeout (15 s) together, as TestKillMidBatch does, so the
// killed batch comes back within seconds and finds the claim's lease (the
// invocation's deadline + 10 s) expired.
func shortConsumer(tm *cfn.Template) {
	for _, r := range tm.OfType(cfn.TypeMapping) {
		if _, stream := r.Prop("StartingPosition"); stream {
			continue
		}
		ref, _ := r.Prop("FunctionName")
		tm.Resources[tm.References(ref)[0]].SetProp(4, "Timeout")
		src, _ := r.Prop("EventSourceArn")
		tm.Resources[tm.References(src)[0]].SetProp(15, "VisibilityTimeout")
	}
}

// killConsumerWhenHeld waits until the rule on (action, table) has held one
// request of the durable consumer and kills the consumer's processes.
func (s *stack) killConsumerWhenHeld(t *testing.T, fs faults, action, table string) {
	t.Helper()
	eventually(t, 60*time.Second, "the consumer's "+action+" held by the fault", func() (bool, string) {
		n := fs.left(action, table)
		return n == 0, fmt.Sprintf("%d requests still to hit", n)
	})
	f, err := s.tw.Function(s.fn[keys.FnDurableConsumer])
	if err != nil {
		t.Fatal(err)
	}
	if n := f.Kill(); n == 0 {
		t.Fatal("no durable-consumer process to kill")
	}
	fs.clear()
}

// durable-consumer killed between claiming and running the handler (the
// claim's UpdateItem committed, its answer held), and during the
// dead-letter write (the dead letter's TransactWriteItems committed, its
// answer held). The batch comes back: the first event is delivered once, its
// email sent once; the second is dead-lettered once, and settled.
func TestKillConsumer(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, shortConsumer)
	fs := newFaults(t)
	state := s.env[keys.EnvStateTable]
	ctx := context.Background()

	t.Run("between claim and handler", func(t *testing.T) {
		const tenant = "kill-claim"
		// The claim's UpdateItem (not the subscription's start, which the
		// first delivery for a tenant may write first).
		fs.arm(fault{Action: "UpdateItem", Table: state, Match: `"` + keys.StateEventClaimPrefix, Kind: "delay", DelayMs: 60_000})
		tctx, err := tenancy.WithTenant(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		e, err := s.app.Events.Emit(tctx, orders.TypePlaced, placed(tenant, uuid.NewString()))
		if err != nil {
			t.Fatal(err)
		}
		s.killConsumerWhenHeld(t, fs, "UpdateItem", state)
		c, ok := s.claim(e.ID, emailSub)
		if !ok || c.Status != "pending" {
			t.Fatalf("claim of %s after the kill: %+v (found %v), want pending: the kill was not between claim and handler", e.ID, c, ok)
		}
		if n := s.emailsSent(t)[emailKey(e)]; n != 0 {
			t.Fatalf("%d emails sent before the kill, want 0: the kill was not before the handler", n)
		}
		s.checkOnce(t, []envelope.Envelope{e})
		s.checkLog(t, tenant, e)
		s.checkSettled(t, tenant)
	})

	// The email's effect (pkg/effect): killed after its start was recorded
	// and before the send (the record's write committed, its answer held),
	// the redelivery sends it: once. Killed after the send and before its
	// done was recorded (that write held before it ran), the redelivery sends
	// it again, at least once, and says so by key.
	for _, c := range []struct {
		name, tenant string
		hold         fault
		emails       int // sent in all
	}{
		{"between the email's record and its send", "kill-effect-start",
			fault{Action: "UpdateItem", Table: state, Match: `"` + keys.StateEffectPrefix, Kind: "delay", DelayMs: 60_000}, 1},
		{"between the email's send and its record", "kill-effect-done",
			fault{Action: "UpdateItem", Table: state, Match: `":done"`, Kind: "stall", DelayMs: 60_000}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The rule matches only the effect's record (its key) or its
			// done (its value's name), never the claim's UpdateItem.
			fs.arm(c.hold)
			e, err := s.app.Events.Emit(tenancy.MustWithTenant(ctx, c.tenant), orders.TypePlaced, placed(c.tenant, uuid.NewString()))
			if err != nil {
				t.Fatal(err)
			}
			s.killConsumerWhenHeld(t, fs, "UpdateItem", state)
			k := effect.Key{EventID: e.ID, Subscription: emailSub, Name: notifications.EffectEmail}
			if r, ok, err := effect.NewDynamoStore(s.ddb, state).Get(ctx, k); err != nil || !ok || r.Status != effect.StatusStarted {
				t.Fatalf("effect %s after the kill: %+v (found %v, %v), want started: the kill was not inside the effect", k, r, ok, err)
			}
			if n, want := s.emailsSent(t)[emailKey(e)], c.emails-1; n != want {
				t.Fatalf("%d emails sent before the kill, want %d", n, want)
			}
			s.waitDelivered(t, []envelope.Envelope{e})
			s.checkEmailsAtLeastOnce(t, []envelope.Envelope{e}, c.emails-1)
			if n := s.emailsSent(t)[emailKey(e)]; n != c.emails {
				t.Errorf("%d emails sent in all, want %d", n, c.emails)
			}
			s.checkLog(t, c.tenant, e)
			s.checkSettled(t, c.tenant)
		})
	}

	t.Run("during the dead-letter write", func(t *testing.T) {
		const tenant = "kill-deadletter"
		fs.arm(fault{Action: "TransactWriteItems", Table: state, Kind: "delay", DelayMs: 60_000})
		e, err := s.app.EmitUnchecked(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		s.killConsumerWhenHeld(t, fs, "TransactWriteItems", state)
		if c, ok := s.claim(e.ID, emailSub); !ok || c.Status != "dead" {
			t.Fatalf("claim of %s after the kill: %+v (found %v), want dead: the dead letter did not commit before the kill", e.ID, c, ok)
		}
		eventually(t, 90*time.Second, "the killed message settled", func() (bool, string) {
			st, _ := s.tw.Poller(s.durableMap)
			return st.Delivered >= 2, fmt.Sprintf("durable mapping %+v", st)
		})
		r := s.reconcile(tenant)
		if r.DeadLetterCount != 1 {
			t.Errorf("reconcile %s: dead_letter_count %d, want 1: %v", tenant, r.DeadLetterCount, r.DeadLetters)
		}
		if n := len(s.grep(s.fn[keys.FnDurableConsumer], `"msg":"subscription dead-lettered"`)); n != 0 {
			t.Errorf("\"subscription dead-lettered\" logged %d times, want 0 (the first delivery was killed before it; the redelivery finds it dead)", n)
		}
		if n := s.emailsSent(t)[emailKey(e)]; n != 0 {
			t.Errorf("%d emails sent for the refused event, want 0", n)
		}
		for _, q := range []string{keys.EnvPipeDLQURL, keys.EnvDurableDLQURL} {
			if n := s.depth(q); n != 0 {
				t.Errorf("%s holds %d messages, want 0: %q", q, n, s.peek(q))
			}
		}
		s.checkLog(t, tenant, e)
		s.checkSettled(t, tenant)
	})
}

// holdingSQS is an SQS endpoint for dlq-repair in front of the twin's: it
// passes every request through, except the first DeleteMessage on the queue
// it is told to hold, which it never forwards: it reports the receipt handle
// and keeps the request waiting until released (then answers 500). dlq-repair
// is killed while it waits, after everything it did before the delete.
type holdingSQS struct {
	proxy *httputil.ReverseProxy
	held  chan string

	mu      sync.Mutex
	queue   string
	release chan struct{}
}

func newHoldingSQS(t *testing.T, target string) (*holdingSQS, string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	h := &holdingSQS{proxy: httputil.NewSingleHostReverseProxy(u), held: make(chan string, 1)}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv.URL
}

// hold holds the next DeleteMessage on queue.
func (h *holdingSQS) hold(queue string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.queue, h.release = queue, make(chan struct{})
}

// let answers the held request.
func (h *holdingSQS) let() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.release)
}

func (h *holdingSQS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".DeleteMessage") {
		var in struct{ QueueUrl, ReceiptHandle string }
		_ = json.Unmarshal(body, &in)
		h.mu.Lock()
		hold := h.queue != "" && in.QueueUrl == h.queue
		release := h.release
		if hold {
			h.queue = ""
		}
		h.mu.Unlock()
		if hold {
			h.held <- in.ReceiptHandle
			select {
			case <-release:
			case <-r.Context().Done():
			}
			http.Error(w, "held by the test and never forwarded", http.StatusInternalServerError)
			return
		}
	}
	h.proxy.ServeHTTP(w, r)
}

// runCLI runs the fourlanes CLI like stack.run, and returns its error
// instead of failing the test (for a run whose function is killed).
func (s *stack) runCLI(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.cli, args...)
	cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL_LAMBDA="+s.tw.InvokeEndpoint(), "AWS_REGION="+localaws.Region,
		"AWS_ACCESS_KEY_ID=fourlanes", "AWS_SECRET_ACCESS_KEY=local", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	out, err := cmd.Output()
	return string(out), err
}

// dlq-repair killed between delivering a DURABLE DLQ message's event and
// deleting the message, and between re-parking an open message (the send)
// and deleting the original. The durable mapping is disabled, so only
// dlq-repair delivers, from messages the test puts on the DURABLE DLQ as
// the redrive would. Each: the message is not lost (it comes back when its
// visibility ends: made visible here with the held receipt handle), later
// runs empty the DLQ, and the email is sent exactly once.
func TestKillDLQRepair(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, func(tm *cfn.Template) {
		for _, r := range tm.OfType(cfn.TypeMapping) {
			if _, stream := r.Prop("StartingPosition"); !stream {
				r.SetProp(false, "Enabled")
			}
		}
	})
	ctx := context.Background()
	repairID := s.fn[keys.FnDLQRepair]
	f, err := s.tw.Function(repairID)
	if err != nil {
		t.Fatal(err)
	}
	h, endpoint := newHoldingSQS(t, s.tw.SQSEndpoint())
	// The twin gives each function its endpoints at creation, in the map
	// its processes start with (Spec shares it); dlq-repair has not run yet,
	// so its first process starts with this one.
	if n := f.Running(); n != 0 {
		t.Fatalf("dlq-repair has %d processes before the test: they would keep the twin's SQS endpoint", n)
	}
	f.Spec().Env["AWS_ENDPOINT_URL_SQS"] = endpoint
	dlq := s.env[keys.EnvDurableDLQURL]
	front := localaws.NewSQS(s.tw.SQSEndpoint())
	name, err := s.tw.FunctionName(repairID)
	if err != nil {
		t.Fatal(err)
	}

	// park emits one order.placed for tenant and puts it on the DURABLE DLQ.
	park := func(t *testing.T, tenant string) envelope.Envelope {
		t.Helper()
		tctx, err := tenancy.WithTenant(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		e, err := s.app.Events.Emit(tctx, orders.TypePlaced, placed(tenant, uuid.NewString()))
		if err != nil {
			t.Fatal(err)
		}
		body, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := front.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(dlq), MessageBody: aws.String(string(body)),
			MessageGroupId: aws.String(tenant), MessageDeduplicationId: aws.String(e.ID)}); err != nil {
			t.Fatal(err)
		}
		return e
	}
	// killAtDelete runs dlq-repair until it holds at the DLQ delete, checks
	// with atDelete what it did before, kills it and makes the message it
	// was deleting visible again.
	killAtDelete := func(t *testing.T, atDelete func()) {
		t.Helper()
		h.hold(dlq)
		done := make(chan error, 1)
		go func() { _, err := s.runCLI("repair", "-function", name); done <- err }()
		var handle string
		select {
		case handle = <-h.held:
		case err := <-done:
			t.Fatalf("dlq-repair ended (%v) without deleting from the DLQ", err)
		case <-time.After(3 * time.Minute):
			t.Fatal("dlq-repair did not delete from the DLQ within 3 minutes")
		}
		atDelete()
		if n := f.Kill(); n == 0 {
			t.Fatal("no dlq-repair process to kill")
		}
		h.let()
		t.Logf("the killed repair run: %v", <-done)
		if _, err := front.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(dlq), ReceiptHandle: aws.String(handle), VisibilityTimeout: 0}); err != nil {
			t.Fatalf("make the message the killed run was deleting visible again: %v", err)
		}
	}
	// drainDLQ runs dlq-repair until the DURABLE DLQ is empty.
	drainDLQ := func(t *testing.T) {
		t.Helper()
		eventually(t, 3*time.Minute, "dlq-repair empties the DURABLE DLQ", func() (bool, string) {
			// Exit 0 when all is fixed, 1 when some repair stays open.
			out, err := s.runCLI("repair", "-function", name)
			var r repairReport
			if jerr := json.Unmarshal([]byte(out), &r); jerr != nil {
				t.Fatalf("repair: %v; output %q: %v", err, out, jerr)
			}
			n := s.depth(keys.EnvDurableDLQURL)
			return n == 0, fmt.Sprintf("%d messages left; last report: fixed %d, open %d: %s", n, r.Fixed, r.Open, out)
		})
	}

	t.Run("between delivery and delete", func(t *testing.T) {
		e := park(t, "kill-repair-deliver")
		killAtDelete(t, func() {
			if c, ok := s.claim(e.ID, emailSub); !ok || c.Status != "completed" {
				t.Errorf("claim of %s at the delete: %+v (found %v), want completed: the kill is not after the delivery", e.ID, c, ok)
			}
		})
		if n := s.depth(keys.EnvDurableDLQURL); n != 1 {
			t.Errorf("DURABLE DLQ after the kill: %d messages, want 1 (the one being deleted)", n)
		}
		drainDLQ(t)
		s.checkOnce(t, []envelope.Envelope{e})
		s.checkSettled(t, e.TenantID)
	})

	t.Run("between re-park send and delete", func(t *testing.T) {
		const tenant = "kill-repair-repark"
		e := park(t, tenant)
		// Another delivery holds the claim for 20 s: dlq-repair leaves the
		// message open and re-parks it.
		now := time.Now()
		if _, err := delivery.NewDynamoStore(s.ddb, s.env[keys.EnvStateTable]).Claim(ctx, delivery.ClaimRequest{
			Key: delivery.Key{EventID: e.ID, Subscription: emailSub}, Tenant: tenant, Type: e.Type, Seq: e.Seq, SchemaVersion: e.SchemaVersion,
			Token: "held-by-the-test", Now: now, LeaseUntil: now.Add(20 * time.Second), ExpiresAt: now.Add(time.Hour),
		}); err != nil {
			t.Fatal(err)
		}
		killAtDelete(t, func() {
			if n := s.depth(keys.EnvDurableDLQURL); n != 2 {
				t.Errorf("DURABLE DLQ at the delete: %d messages, want 2 (the re-parked copy and the original)", n)
			}
		})
		if n := s.depth(keys.EnvDurableDLQURL); n != 2 {
			t.Errorf("DURABLE DLQ after the kill: %d messages, want 2 (the re-parked copy and the original)", n)
		}
		drainDLQ(t)
		s.checkOnce(t, []envelope.Envelope{e})
		s.checkSettled(t, tenant)
	})
}
