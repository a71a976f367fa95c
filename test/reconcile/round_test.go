package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
)

// invoke calls the handler as EventBridge Scheduler does: a direct invoke of
// the Function URL request shape, with no IAM authorizer.
func (e *env) invoke(t *testing.T, query string) (int, map[string]any) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(request(t, "GET", "/", query), &m); err != nil {
		t.Fatal(err)
	}
	rc := m["requestContext"].(map[string]any)
	for _, k := range []string{"authorizer", "domainName", "domainPrefix", "apiId"} {
		delete(rc, k) // what the Function URL adds; the schedule's input has none of it
	}
	raw, _ := json.Marshal(m)
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "scheduler-1"})
	out, err := lambda.NewHandler(e.handler.Handle).Invoke(ctx, raw)
	if err != nil {
		t.Fatalf("invoke ?%s: handler error %v", query, err)
	}
	var resp events.LambdaFunctionURLResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("response %s: %v", out, err)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
		t.Fatalf("body %q: %v", resp.Body, err)
	}
	return resp.StatusCode, body
}

func strs(t *testing.T, body map[string]any, field string) []string {
	t.Helper()
	xs, ok := body[field].([]any)
	if !ok {
		t.Fatalf("%s: got %v, want a list in %v", field, body[field], body)
	}
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.(string)
	}
	return out
}

// runRound invokes scheduled=true (with query) until the round completes and
// returns how many times each tenant was reported done, and the invocations.
// base is the number of tenants the round had done before.
func (e *env) runRound(t *testing.T, query string, base int) (map[string]int, int) {
	t.Helper()
	done := map[string]int{}
	var started any
	for n := 1; n <= 100; n++ {
		status, body := e.invoke(t, query)
		if status != 200 {
			t.Fatalf("invocation %d: status %d %v, want 200", n, status, body)
		}
		if body["saved"] != true {
			t.Fatalf("invocation %d: saved %v, want true (no other invocation ran)", n, body["saved"])
		}
		if started == nil {
			started = body["round_started"]
		} else if body["round_started"] != started {
			t.Fatalf("invocation %d: round_started %v, want %v (the same round until it completes)", n, body["round_started"], started)
		}
		for _, tn := range strs(t, body, "tenants") {
			done[tn]++
		}
		total := base
		for _, c := range done {
			total += c
		}
		if got := num(t, body, "round_tenants"); got != int64(total) {
			t.Errorf("invocation %d: round_tenants %d, want %d (tenants done so far)", n, got, total)
		}
		if body["round_complete"] == true {
			return done, n
		}
	}
	t.Fatal("round not complete after 100 invocations")
	return nil, 0
}

// TestScheduledRounds: successive scheduled invocations, each bounded by its
// budget, resume from the cursor the state table keeps and together cover
// every tenant exactly once per round; the round after starts over.
func TestScheduledRounds(t *testing.T) {
	e := newEnv(t, func(c *reconcile.Config) {
		c.Rounds = c.State.(*reconcile.DynamoState)
		c.PageSize = 4
		c.MaxDuration = 25 * time.Second // the clock moves 1 s per reading
	})
	e.clock.step = time.Second
	var tenants []string
	for i := range 23 {
		tn := fmt.Sprintf("t-%02d", i)
		n := 1 + i%3
		if i == 7 {
			n = 40 // its walk outlasts one invocation's budget
		}
		e.emit(t, tn, n)
		tenants = append(tenants, tn)
	}
	e.editPayload(t, "t-11", 1)

	check := func(round int, done map[string]int, invocations, atLeast int) {
		t.Helper()
		if invocations < atLeast {
			t.Errorf("round %d: %d invocations, want several (the budget must split the round)", round, invocations)
		}
		var got []string
		for tn, c := range done {
			got = append(got, tn)
			if c != 1 {
				t.Errorf("round %d: tenant %s done %d times, want once", round, tn, c)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, tenants) {
			t.Errorf("round %d: tenants done %v, want %v", round, got, tenants)
		}
	}
	done, n := e.runRound(t, "scheduled=true&limit=3", 0)
	check(1, done, n, 3)
	t.Logf("round 1: %d invocations for %d tenants", n, len(tenants))

	// A walk interrupted by the budget resumed on the next invocation: t-07
	// was verified through its 40 events in all.
	var partial, whole bool
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, `"tenant reconciled"`) && strings.Contains(line, `"t-07"`) {
			partial = partial || strings.Contains(line, `"complete":false`)
			whole = whole || strings.Contains(line, `"complete":true`) && strings.Contains(line, `"verified":40`)
		}
	}
	if !partial || !whole {
		t.Errorf("t-07: walk interrupted %v, completed with 40 verified %v; want both", partial, whole)
	}
	if !strings.Contains(e.logs.String(), "scheduled round completed") {
		t.Error("no 'scheduled round completed' log line")
	}
	emf := e.emf.String()
	for _, m := range []string{keys.MetricRoundAge, keys.MetricRoundTenants, keys.MetricRoundsCompleted} {
		if !strings.Contains(emf, `"`+m+`"`) || !strings.Contains(emf, `"Mode":"incremental"`) {
			t.Errorf("EMF: no %s with Mode incremental in %s", m, emf)
		}
	}

	// The next round starts over, from the first tenant.
	e.clock.jump(15 * time.Minute)
	done, n = e.runRound(t, "scheduled=true&limit=3", 0)
	check(2, done, n, 2)

	// Full rounds keep their own cursor. resume=true (the hourly
	// continuation) never starts a round; it continues the one in progress.
	idle := func() {
		t.Helper()
		if status, body := e.invoke(t, "scheduled=true&full=true&resume=true&limit=3"); status != 200 || body["idle"] != true || len(strs(t, body, "tenants")) != 0 {
			t.Errorf("resume=true with no full round in progress: status %d %v, want 200, idle, no tenants", status, body)
		}
	}
	idle()
	status, body := e.invoke(t, "scheduled=true&full=true&limit=3")
	if status != 200 || body["round_complete"] == true {
		t.Fatalf("first full invocation: status %d %v, want 200 and a round in progress", status, body)
	}
	first := strs(t, body, "tenants")
	done, n = e.runRound(t, "scheduled=true&full=true&resume=true&limit=3", len(first))
	for _, tn := range first {
		done[tn]++
	}
	check(3, done, n+1, 3)
	idle()
	rd, err := reconcile.NewDynamoState(e.db, e.stateTable).Round(context.Background(), reconcile.Incremental)
	if err != nil {
		t.Fatal(err)
	}
	if !rd.Started.IsZero() || rd.Cursor != "" || rd.LastTenants != int64(len(tenants)) || rd.Completed.IsZero() {
		t.Errorf("incremental round row after completion: %+v, want no cursor, no start, last round %d tenants", rd, len(tenants))
	}
}

// TestScheduledOnlyByDirectInvoke: a Function URL caller (SigV4-verified
// IAM identity) may not run the scheduled round; scheduled takes no tenant
// or cursor.
func TestScheduledOnlyByDirectInvoke(t *testing.T) {
	e := newEnv(t, func(c *reconcile.Config) { c.Rounds = c.State.(*reconcile.DynamoState) })
	e.emit(t, "t-a", 1)
	if status, body := e.call(t, "GET", "/", "scheduled=true"); status != 403 {
		t.Errorf("scheduled=true through the URL: status %d %v, want 403", status, body)
	}
	// A URL with auth type NONE would carry no authorizer; its domain name
	// still tells it from the schedule's direct invoke.
	noAuth := events.LambdaFunctionURLRequest{RawPath: "/", RawQueryString: "scheduled=true",
		RequestContext: events.LambdaFunctionURLRequestContext{DomainName: "abc.lambda-url.eu-west-1.on.aws",
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "GET", Path: "/"}}}
	if resp, _ := e.handler.Handle(context.Background(), noAuth); resp.StatusCode != 403 {
		t.Errorf("scheduled=true through a URL without IAM auth: status %d %s, want 403", resp.StatusCode, resp.Body)
	}
	for _, q := range []string{"scheduled=true&tenant=t-a", "scheduled=true&cursor=x", "scheduled=maybe", "resume=true", "scheduled=true&resume=x"} {
		if status, body := e.invoke(t, q); status != 400 {
			t.Errorf("%s: status %d %v, want 400", q, status, body)
		}
	}
	rd, err := reconcile.NewDynamoState(e.db, e.stateTable).Round(context.Background(), reconcile.Incremental)
	if err != nil || rd.Version != 0 {
		t.Errorf("round after refused calls: %+v %v, want none saved", rd, err)
	}
	if status, body := e.invoke(t, "scheduled=true"); status != 200 || body["round_complete"] != true {
		t.Errorf("direct invoke: status %d %v, want 200, round complete", status, body)
	}
}

// TestSaveRoundConditional is the contract every Rounds keeps, on the
// in-memory fake and the local DynamoDB: of two invocations that read the
// same round, only the first save wins; the second gets ErrRoundMoved.
func TestSaveRoundConditional(t *testing.T) {
	for name, newRounds := range map[string]func(t *testing.T) reconcile.Rounds{
		"memory": func(*testing.T) reconcile.Rounds { return reconcile.NewMemoryState() },
		"dynamodb": func(t *testing.T) reconcile.Rounds {
			e := newEnv(t, nil)
			return reconcile.NewDynamoState(e.db, e.stateTable)
		},
	} {
		t.Run(name, func(t *testing.T) {
			st := newRounds(t)
			ctx := context.Background()
			prev, err := st.Round(ctx, reconcile.Incremental)
			if err != nil || prev.Version != 0 || prev.Mode != reconcile.Incremental {
				t.Fatalf("no round yet: got %+v, %v; want version 0", prev, err)
			}
			next := prev
			next.Version, next.Cursor, next.Started, next.Tenants = 1, "c1", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 7
			if err := st.SaveRound(ctx, prev, next); err != nil {
				t.Fatal(err)
			}
			other := next
			other.Cursor = "c2"
			if err := st.SaveRound(ctx, prev, other); !errors.Is(err, reconcile.ErrRoundMoved) {
				t.Errorf("second save from version 0: got %v, want ErrRoundMoved", err)
			}
			got, err := st.Round(ctx, reconcile.Incremental)
			if err != nil || got.Cursor != "c1" || got.Version != 1 || got.Tenants != 7 || !got.Started.Equal(next.Started) {
				t.Errorf("round: got %+v %v, want cursor c1 version 1, 7 tenants", got, err)
			}
			third := got
			third.Version, third.Cursor, third.Started, third.Completed, third.LastTenants = 2, "", time.Time{}, next.Started.Add(time.Hour), 9
			if err := st.SaveRound(ctx, got, third); err != nil {
				t.Errorf("save from version 1: %v", err)
			}
			if err := st.SaveRound(ctx, got, third); !errors.Is(err, reconcile.ErrRoundMoved) {
				t.Errorf("replayed save from version 1: got %v, want ErrRoundMoved", err)
			}
			got, err = st.Round(ctx, reconcile.Incremental)
			if err != nil || got.Cursor != "" || !got.Started.IsZero() || !got.Completed.Equal(third.Completed) || got.LastTenants != 9 {
				t.Errorf("completed round: got %+v %v, want no cursor, no start, completed with 9", got, err)
			}
			if full, err := st.Round(ctx, reconcile.Full); err != nil || full.Version != 0 {
				t.Errorf("full round: got %+v %v, want none (each mode has its own)", full, err)
			}
		})
	}
}

// flakyLog fails the first read of one tenant's events.
type flakyLog struct {
	reconcile.Log
	mu     sync.Mutex
	failOn string
	failed bool
}

func (f *flakyLog) Events(ctx context.Context, tenant string, after int64, limit int32) (eventstore.Page, error) {
	f.mu.Lock()
	fail := tenant == f.failOn && !f.failed
	f.failed = f.failed || fail
	f.mu.Unlock()
	if fail {
		return eventstore.Page{}, errors.New("injected read failure")
	}
	return f.Log.Events(ctx, tenant, after, limit)
}

// TestScheduledRoundKeepsProgressOnError: an invocation that fails mid-round
// saves the pages it finished; the next ones resume there, and the round
// still counts every tenant once.
func TestScheduledRoundKeepsProgressOnError(t *testing.T) {
	flaky := &flakyLog{}
	e := newEnv(t, func(c *reconcile.Config) {
		c.Rounds = c.State.(*reconcile.DynamoState)
		flaky.Log = c.Log
		c.Log = flaky
	})
	for i := range 10 {
		e.emit(t, fmt.Sprintf("t-%02d", i), 2)
	}
	order, _, err := e.store.Tenants(context.Background(), "", 0)
	if err != nil || len(order) != 10 {
		t.Fatalf("tenants: %v %v", order, err)
	}
	flaky.failOn = order[4] // on the second page of 3

	if status, body := e.invoke(t, "scheduled=true&limit=3"); status != 500 {
		t.Fatalf("invocation with a failing read: status %d %v, want 500", status, body)
	}
	rd, err := reconcile.NewDynamoState(e.db, e.stateTable).Round(context.Background(), reconcile.Incremental)
	if err != nil || rd.Tenants != 3 || rd.Cursor == "" || rd.Started.IsZero() {
		t.Fatalf("round after the failure: %+v %v, want the first page's 3 tenants and a cursor", rd, err)
	}
	done, _ := e.runRound(t, "scheduled=true&limit=3", 3)
	var rest []string
	for tn, c := range done {
		rest = append(rest, tn)
		if c != 1 {
			t.Errorf("tenant %s done %d times after the failure, want once", tn, c)
		}
	}
	slices.Sort(rest)
	want := slices.Clone(order[3:])
	slices.Sort(want)
	if !slices.Equal(rest, want) {
		t.Errorf("tenants done after the failure: %v, want %v (the first page was saved)", rest, want)
	}
}

// TestScheduledRoundBadStoredCursor: a stored cursor this release does not
// understand restarts the round's walk from the first tenant, not the round.
func TestScheduledRoundBadStoredCursor(t *testing.T) {
	e := newEnv(t, func(c *reconcile.Config) { c.Rounds = c.State.(*reconcile.DynamoState) })
	for _, tn := range []string{"t-a", "t-b", "t-c"} {
		e.emit(t, tn, 1)
	}
	st := reconcile.NewDynamoState(e.db, e.stateTable)
	started := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)
	if err := st.SaveRound(context.Background(), reconcile.Round{}, reconcile.Round{Mode: reconcile.Incremental, Cursor: "not-a-cursor", Started: started, Version: 1}); err != nil {
		t.Fatal(err)
	}
	status, body := e.invoke(t, "scheduled=true")
	if status != 200 || body["round_complete"] != true || len(strs(t, body, "tenants")) != 3 {
		t.Fatalf("invocation over a bad stored cursor: status %d %v, want the round completed over 3 tenants", status, body)
	}
	if body["round_started"] != started.Format(time.RFC3339) {
		t.Errorf("round_started %v, want %s (the same round)", body["round_started"], started.Format(time.RFC3339))
	}
}
