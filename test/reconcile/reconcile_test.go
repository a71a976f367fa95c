package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

func TestMain(m *testing.M) { localaws.Main(m) }

// testCatalog declares every type at schema version 1.
type testCatalog struct{}

func (testCatalog) Prepare(_ string, payload any) (int, map[string]any, error) {
	p, err := envelope.NormalizePayload(payload)
	return 1, p, err
}

// clock is a test clock; step advances it on every reading.
type clock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.t
	c.t = c.t.Add(c.step)
	return t
}

func (c *clock) jump(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is one events table and one state table in the local DynamoDB, with a
// reconcile handler on them.
type env struct {
	db          *dynamodb.Client
	store       *eventstore.Store
	eventsTable string
	stateTable  string
	dead        *delivery.DynamoStore
	handler     *reconcile.Handler
	logs        *bytes.Buffer
	emf         *bytes.Buffer
	clock       *clock
}

func newEnv(t *testing.T, tune func(*reconcile.Config)) *env {
	t.Helper()
	db := localaws.DynamoDB(t)
	e := &env{db: db, logs: &bytes.Buffer{}, emf: &bytes.Buffer{},
		clock: &clock{t: time.Date(2026, 11, 29, 19, 45, 0, 0, time.UTC)}}
	e.eventsTable = aws.ToString(localaws.CreateTable(t, db, eventstore.TableSchema(localaws.UniqueName(t, "events"))).TableName)
	e.stateTable = aws.ToString(localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "state"))).TableName)
	var err error
	e.store, err = eventstore.New(db, eventstore.Config{Table: e.eventsTable, Catalog: testCatalog{}})
	if err != nil {
		t.Fatal(err)
	}
	e.dead = delivery.NewDynamoStore(db, e.stateTable)
	cfg := reconcile.Config{
		Log: e.store, DeadLetters: e.dead, State: reconcile.NewDynamoState(db, e.stateTable),
		Logger: obs.NewLogger(e.logs, "debug"), Metrics: obs.NewMetrics(e.emf), Now: e.clock.Now,
	}
	if tune != nil {
		tune(&cfg)
	}
	r, err := reconcile.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.handler = reconcile.NewHandler(r, cfg.Logger)
	return e
}

// emit appends n events to tenant's log.
func (e *env) emit(t *testing.T, tenant string, n int) {
	t.Helper()
	ctx := tenancy.MustWithTenant(context.Background(), tenant)
	for i := 0; i < n; i++ {
		if _, err := e.store.Emit(ctx, "order.placed", map[string]any{"order_id": fmt.Sprintf("o-%d", i), "total_cents": 100 + i}); err != nil {
			t.Fatalf("emit %d for %s: %v", i, tenant, err)
		}
	}
}

func (e *env) key(tenant string, seq int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		keys.AttrTenant: &types.AttributeValueMemberS{Value: tenant},
		keys.AttrSeq:    &types.AttributeValueMemberN{Value: strconv.FormatInt(seq, 10)},
	}
}

func (e *env) item(t *testing.T, tenant string, seq int64) map[string]types.AttributeValue {
	t.Helper()
	out, err := e.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(e.eventsTable), Key: e.key(tenant, seq), ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		t.Fatalf("read %s seq %d: %v (found %v)", tenant, seq, err, out != nil && out.Item != nil)
	}
	return out.Item
}

func (e *env) put(t *testing.T, it map[string]types.AttributeValue) {
	t.Helper()
	if _, err := e.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(e.eventsTable), Item: it}); err != nil {
		t.Fatal(err)
	}
}

// editPayload rewrites one stored event's payload in place, leaving its hash:
// what an operator with write access to the table could do.
func (e *env) editPayload(t *testing.T, tenant string, seq int64) {
	t.Helper()
	it := e.item(t, tenant, seq)
	it[keys.AttrPayload] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"order_id": &types.AttributeValueMemberS{Value: "forged"}, "total_cents": &types.AttributeValueMemberN{Value: "1"},
	}}
	e.put(t, it)
}

// rewrite re-seals events from seq on with an edited payload at seq, each
// hash recomputed and linked, and moves the head to the new last hash: a
// tampering no link check can see.
func (e *env) rewrite(t *testing.T, tenant string, from, last int64) {
	t.Helper()
	var prev string
	for s := from; s <= last; s++ {
		env, err := envelope.FromItem(e.item(t, tenant, s))
		if err != nil {
			t.Fatal(err)
		}
		if s == from {
			env.Payload["order_id"] = "forged"
		} else {
			env.PrevHash = prev
		}
		if err := chain.Seal(&env); err != nil {
			t.Fatal(err)
		}
		prev = env.Hash
		it, err := env.ToItem()
		if err != nil {
			t.Fatal(err)
		}
		e.put(t, it)
	}
	head := e.item(t, tenant, keys.HeadSeq)
	head[keys.AttrLastHash] = &types.AttributeValueMemberS{Value: prev}
	e.put(t, head)
}

func (e *env) deleteRow(t *testing.T, tenant string, seq int64) {
	t.Helper()
	if _, err := e.db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(e.eventsTable), Key: e.key(tenant, seq)}); err != nil {
		t.Fatal(err)
	}
}

// request is a Function URL request (payload format 2.0) for query, built
// from the fixture the way the Lambda service sends it.
func request(t *testing.T, method, path, query string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "function-url-request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["rawPath"], m["rawQueryString"] = path, query
	rc := m["requestContext"].(map[string]any)
	rc["http"].(map[string]any)["method"] = method
	rc["http"].(map[string]any)["path"] = path
	q, _ := url.ParseQuery(query)
	qs := map[string]any{}
	for k, v := range q {
		qs[k] = strings.Join(v, ",") // how Function URLs join repeated keys
	}
	if len(qs) > 0 {
		m["queryStringParameters"] = qs
	} else {
		delete(m, "queryStringParameters")
	}
	out, _ := json.Marshal(m)
	return out
}

// call invokes the handler as the Lambda runtime does and decodes the body.
func (e *env) call(t *testing.T, method, path, query string) (int, map[string]any) {
	t.Helper()
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "lambda-req-1"})
	raw, err := lambda.NewHandler(e.handler.Handle).Invoke(ctx, request(t, method, path, query))
	if err != nil {
		t.Fatalf("%s %s?%s: handler error %v", method, path, query, err)
	}
	var resp events.LambdaFunctionURLResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatalf("response %s: %v", raw, err)
	}
	if ct := resp.Headers["Content-Type"]; ct != "application/json" {
		t.Errorf("Content-Type: got %q, want application/json", ct)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
		t.Fatalf("body %q: %v", resp.Body, err)
	}
	return resp.StatusCode, body
}

func (e *env) get(t *testing.T, query string) map[string]any {
	t.Helper()
	status, body := e.call(t, "GET", "/", query)
	if status != 200 {
		t.Fatalf("GET /?%s: status %d %v, want 200", query, status, body)
	}
	return body
}

func num(t *testing.T, body map[string]any, field string) int64 {
	t.Helper()
	v, ok := body[field].(float64)
	if !ok {
		t.Fatalf("%s: got %v (%T), want a number in %v", field, body[field], body[field], body)
	}
	return int64(v)
}

// want checks fields of a report; a nil value means JSON null.
func want(t *testing.T, body map[string]any, fields map[string]any) {
	t.Helper()
	for k, w := range fields {
		got, ok := body[k]
		if !ok {
			t.Errorf("%s: missing from %v", k, body)
			continue
		}
		if n, isInt := w.(int); isInt {
			w = float64(n)
		}
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("%s: got %v, want %v", k, got, w)
		}
	}
}

func breakOf(t *testing.T, body map[string]any) (int64, string) {
	t.Helper()
	b, ok := body["first_break"].(map[string]any)
	if !ok {
		t.Fatalf("first_break: got %v, want a break in %v", body["first_break"], body)
	}
	return int64(b["seq"].(float64)), b["reason"].(string)
}

func TestIntactChain(t *testing.T) {
	e := newEnv(t, nil)
	e.emit(t, "acme", 5)
	body := e.get(t, "tenant=acme&full=true")
	want(t, body, map[string]any{
		"tenant": "acme", "chain_intact": true, "complete": true, "mode": "full", "last_seq": 5, "verified": 5,
		"verified_through": 5, "first_break": nil, "dead_letter_count": 0, "cursor": nil, "checkpoint_seq": 5,
	})
	if dl, ok := body["dead_letters"].([]any); !ok || len(dl) != 0 {
		t.Errorf("dead_letters: got %v, want []", body["dead_letters"])
	}
	// An unknown tenant is an empty, intact chain.
	want(t, e.get(t, "tenant=nobody"), map[string]any{"chain_intact": true, "last_seq": 0, "verified": 0})
}

// TestBreaks edits the stored log directly, as someone with write access to
// the table could, and expects the break at the right seq.
func TestBreaks(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tamper     func(t *testing.T, e *env)
		wantSeq    int64
		wantReason chain.Reason
	}{
		{"payload edited", func(t *testing.T, e *env) { e.editPayload(t, "acme", 3) }, 3, chain.ReasonHashMismatch},
		{"payload edited and rehashed", func(t *testing.T, e *env) {
			env, _ := envelope.FromItem(e.item(t, "acme", 3))
			env.Payload["order_id"] = "forged"
			_ = chain.Seal(&env)
			it, _ := env.ToItem()
			e.put(t, it)
		}, 4, chain.ReasonPrevMismatch},
		{"event deleted", func(t *testing.T, e *env) { e.deleteRow(t, "acme", 3) }, 3, chain.ReasonMissingSeq},
		{"tail truncated", func(t *testing.T, e *env) { e.deleteRow(t, "acme", 5) }, 5, chain.ReasonHeadMismatch},
		{"head forged", func(t *testing.T, e *env) {
			head := e.item(t, "acme", keys.HeadSeq)
			head[keys.AttrLastHash] = &types.AttributeValueMemberS{Value: strings.Repeat("0", 64)}
			e.put(t, head)
		}, 5, chain.ReasonHeadMismatch},
		{"row appended past the head", func(t *testing.T, e *env) {
			env, _ := envelope.FromItem(e.item(t, "acme", 5))
			env.Seq, env.PrevHash, env.ID = 6, env.Hash, "0190c5a8-7d4e-7c3b-9d1a-0000000000ff"
			_ = chain.Seal(&env)
			it, _ := env.ToItem()
			e.put(t, it)
		}, 6, chain.ReasonHeadMismatch},
		{"row undecodable", func(t *testing.T, e *env) {
			it := e.item(t, "acme", 2)
			it[keys.AttrHash] = &types.AttributeValueMemberS{Value: "not-a-hash"}
			e.put(t, it)
		}, 2, chain.ReasonMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.emit(t, "acme", 5)
			tc.tamper(t, e)
			for _, mode := range []string{"full=true", "full=false"} {
				body := e.get(t, "tenant=acme&"+mode)
				want(t, body, map[string]any{"chain_intact": false, "complete": true, "cursor": nil})
				if seq, reason := breakOf(t, body); seq != tc.wantSeq || reason != string(tc.wantReason) {
					t.Errorf("%s: first_break: got seq %d %q, want seq %d %q", mode, seq, reason, tc.wantSeq, tc.wantReason)
				}
				if got := num(t, body, "checkpoint_seq"); got != 0 {
					t.Errorf("%s: checkpoint_seq %d after a broken walk, want 0 (a break never moves it)", mode, got)
				}
			}
			logged := false
			for _, l := range lines(t, e.logs) {
				if l["msg"] == "chain broken" && l["level"] == "ERROR" && l[obs.KeyTenant] == "acme" && l[obs.KeySeq] == float64(tc.wantSeq) &&
					l[obs.KeyRequestID] == "lambda-req-1" {
					logged = true
				}
			}
			if !logged {
				t.Errorf("no ERROR log line for the break with tenant, seq and request id:\n%s", e.logs)
			}
			if n := emfCount(t, e.emf, keys.MetricChainBreaks); n != 2 {
				t.Errorf("ChainBreaks EMF: got %d, want 2", n)
			}
		})
	}
}

// TestCheckpointReads: after a checkpoint, a call reads the head, the
// checkpointed event and the new events only.
func TestCheckpointReads(t *testing.T) {
	e := newEnv(t, nil)
	e.emit(t, "acme", 10)
	body := e.get(t, "tenant=acme")
	want(t, body, map[string]any{"mode": "incremental", "chain_intact": true, "verified": 10, "trusted_through": 0,
		"checkpoint_seq": 10, "reads": 11, "state_reads": 0})

	e.emit(t, "acme", 3)
	body = e.get(t, "tenant=acme")
	want(t, body, map[string]any{"chain_intact": true, "last_seq": 13, "verified": 3, "verified_through": 13,
		"trusted_through": 10, "checkpoint_seq": 13, "reads": 5, "state_reads": 1})

	body = e.get(t, "tenant=acme")
	want(t, body, map[string]any{"chain_intact": true, "verified": 0, "verified_through": 13, "reads": 2})

	// full ignores the checkpoint for where to start.
	body = e.get(t, "tenant=acme&full=true")
	want(t, body, map[string]any{"chain_intact": true, "verified": 13, "trusted_through": 0, "reads": 14})
}

// TestCheckpointCannotFoolFullWalk: incremental walks trust the checkpoint
// (documented); a full walk re-proves what it covers, and rewriting the
// checkpointed event itself is caught by both.
func TestCheckpointCannotFoolFullWalk(t *testing.T) {
	t.Run("edit before the checkpoint", func(t *testing.T) {
		e := newEnv(t, nil)
		e.emit(t, "acme", 6)
		want(t, e.get(t, "tenant=acme"), map[string]any{"chain_intact": true, "checkpoint_seq": 6})
		e.editPayload(t, "acme", 2)

		want(t, e.get(t, "tenant=acme"), map[string]any{"chain_intact": true, "trusted_through": 6}) // trusts the checkpoint
		full := e.get(t, "tenant=acme&full=true")
		want(t, full, map[string]any{"chain_intact": false, "checkpoint_covers_break": true, "checkpoint_seq": 6})
		if seq, reason := breakOf(t, full); seq != 2 || reason != string(chain.ReasonHashMismatch) {
			t.Errorf("full: first_break got seq %d %q, want 2 hash mismatch", seq, reason)
		}
	})
	t.Run("checkpointed event edited", func(t *testing.T) {
		e := newEnv(t, nil)
		e.emit(t, "acme", 6)
		e.get(t, "tenant=acme")
		e.editPayload(t, "acme", 6)
		for _, q := range []string{"tenant=acme", "tenant=acme&full=true"} {
			if seq, reason := breakOf(t, e.get(t, q)); seq != 6 || reason != string(chain.ReasonHashMismatch) {
				t.Errorf("%s: first_break got seq %d %q, want 6 hash mismatch", q, seq, reason)
			}
		}
	})
	t.Run("log rewritten consistently through the checkpoint", func(t *testing.T) {
		e := newEnv(t, nil)
		e.emit(t, "acme", 6)
		e.get(t, "tenant=acme")
		e.rewrite(t, "acme", 4, 6) // every link and the head agree again
		for _, tc := range []struct {
			q       string
			wantSeq int64
		}{{"tenant=acme", 6}, {"tenant=acme&full=true", 6}} {
			body := e.get(t, tc.q)
			if seq, reason := breakOf(t, body); seq != tc.wantSeq || reason != string(reconcile.ReasonCheckpointMismatch) {
				t.Errorf("%s: first_break got seq %d %q, want %d checkpoint mismatch", tc.q, seq, reason, tc.wantSeq)
			}
		}
	})
	t.Run("a broken walk does not move the checkpoint", func(t *testing.T) {
		e := newEnv(t, nil)
		e.emit(t, "acme", 6)
		e.get(t, "tenant=acme")
		e.emit(t, "acme", 2)
		e.editPayload(t, "acme", 8)
		body := e.get(t, "tenant=acme")
		want(t, body, map[string]any{"chain_intact": false, "checkpoint_seq": 6, "verified_through": 7})
		if seq, _ := breakOf(t, body); seq != 8 {
			t.Errorf("first_break seq: got %d, want 8", seq)
		}
	})
}

// TestBoundedCalls: a walk over its budget answers complete=false with a
// cursor, and the cursor resumes it to the end.
func TestBoundedCalls(t *testing.T) {
	t.Run("max_events", func(t *testing.T) {
		e := newEnv(t, nil)
		e.emit(t, "acme", 25)
		for _, mode := range []string{"full", "incremental"} {
			q := "tenant=acme&max_events=10"
			if mode == "full" {
				q += "&full=true"
			}
			var body map[string]any
			var verified []int64
			for call := 0; call < 5; call++ {
				body = e.get(t, q)
				want(t, body, map[string]any{"mode": mode})
				verified = append(verified, num(t, body, "verified"))
				if body["complete"] == true {
					break
				}
				want(t, body, map[string]any{"chain_intact": nil, "first_break": nil})
				c, ok := body["cursor"].(string)
				if !ok || c == "" {
					t.Fatalf("%s call %d: incomplete without a cursor: %v", mode, call, body)
				}
				q = "tenant=acme&max_events=10&cursor=" + url.QueryEscape(c)
			}
			want(t, body, map[string]any{"complete": true, "chain_intact": true, "verified_through": 25, "cursor": nil})
			if mode == "full" && !slices.Equal(verified, []int64{10, 20, 25}) {
				t.Errorf("full: verified per call got %v, want [10 20 25]", verified)
			}
		}
	})
	t.Run("time", func(t *testing.T) {
		e := newEnv(t, func(c *reconcile.Config) { c.PageSize = 4; c.MaxDuration = 5 * time.Second })
		e.emit(t, "acme", 30)
		e.clock.step = time.Second
		q := "tenant=acme&full=true"
		calls := 0
		var body map[string]any
		for ; calls < 30; calls++ {
			body = e.get(t, q)
			if body["complete"] == true {
				break
			}
			q = "tenant=acme&cursor=" + url.QueryEscape(body["cursor"].(string))
		}
		if calls == 0 {
			t.Error("a 30-event walk with 4-event pages finished in one 5-second call of a clock that ticks 1 s per reading; want it bounded")
		}
		want(t, body, map[string]any{"complete": true, "chain_intact": true, "verified": 30, "mode": "full"})
	})
	t.Run("expired cursor", func(t *testing.T) {
		e := newEnv(t, nil)
		e.emit(t, "acme", 5)
		c := e.get(t, "tenant=acme&max_events=2")["cursor"].(string)
		e.clock.jump(25 * time.Hour)
		status, body := e.call(t, "GET", "/", "tenant=acme&cursor="+url.QueryEscape(c))
		if status != 400 || !strings.Contains(fmt.Sprint(body["error"]), "cursor") {
			t.Errorf("expired cursor: got %d %v, want 400 naming cursor", status, body)
		}
	})
}

func TestAllTenantsPaged(t *testing.T) {
	e := newEnv(t, nil)
	tenants := []string{"t-a", "t-b", "t-c", "t-d", "t-e"}
	for i, tn := range tenants {
		e.emit(t, tn, i+1)
	}
	e.editPayload(t, "t-c", 2)

	seen := map[string]map[string]any{}
	q := "limit=2"
	pages := 0
	for ; pages < 10; pages++ {
		body := e.get(t, q)
		ts := body["tenants"].([]any)
		if len(ts) > 2 {
			t.Errorf("page %d: %d tenants, want at most 2", pages, len(ts))
		}
		for _, x := range ts {
			r := x.(map[string]any)
			if _, dup := seen[r["tenant"].(string)]; dup {
				t.Errorf("tenant %v listed twice", r["tenant"])
			}
			seen[r["tenant"].(string)] = r
		}
		if body["complete"] == true {
			want(t, body, map[string]any{"cursor": nil})
			break
		}
		q = "limit=2&cursor=" + url.QueryEscape(body["cursor"].(string))
	}
	if len(seen) != len(tenants) {
		t.Fatalf("tenants seen: got %d (%v), want %v", len(seen), keysOf(seen), tenants)
	}
	for i, tn := range tenants {
		r := seen[tn]
		if tn == "t-c" {
			want(t, r, map[string]any{"chain_intact": false})
			if seq, _ := breakOf(t, r); seq != 2 {
				t.Errorf("t-c break seq: got %d, want 2", seq)
			}
			continue
		}
		want(t, r, map[string]any{"chain_intact": true, "last_seq": i + 1})
	}

	// Bounded across tenants: the in-progress tenant resumes from its walk.
	seen = map[string]map[string]any{}
	q = "max_events=2&full=true"
	for pages = 0; pages < 20; pages++ {
		body := e.get(t, q)
		for _, x := range body["tenants"].([]any) {
			r := x.(map[string]any)
			if r["complete"] == true {
				seen[r["tenant"].(string)] = r
			}
		}
		if body["complete"] == true {
			break
		}
		q = "max_events=2&cursor=" + url.QueryEscape(body["cursor"].(string))
	}
	if len(seen) != len(tenants) {
		t.Fatalf("bounded: completed tenants %v, want %v", keysOf(seen), tenants)
	}
	if r := seen["t-e"]; r["verified"] != 5.0 || r["chain_intact"] != true {
		t.Errorf("t-e resumed across calls: got verified %v intact %v, want 5 true", r["verified"], r["chain_intact"])
	}
}

func TestDeadLetters(t *testing.T) {
	e := newEnv(t, nil)
	e.emit(t, "acme", 2)
	ctx := context.Background()
	now := time.Now()
	for i, sub := range []string{"search.index", "notifications.order-email", "notifications.order-email"} {
		k := delivery.Key{EventID: fmt.Sprintf("ev-%d", i), Subscription: sub}
		req := delivery.ClaimRequest{Key: k, Tenant: "acme", Type: "order.placed", Seq: 1, SchemaVersion: 1, Token: "tok",
			Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}
		if _, err := e.dead.Claim(ctx, req); err != nil {
			t.Fatal(err)
		}
		if err := e.dead.Kill(ctx, k, "tok", delivery.DeadLetter{Tenant: "acme", EventID: k.EventID, Subscription: sub,
			Type: "order.placed", Seq: 1, SchemaVersion: 1, Error: "boom", Attempts: 3, DeadAt: now}, false); err != nil {
			t.Fatal(err)
		}
	}
	body := e.get(t, "tenant=acme")
	want(t, body, map[string]any{"dead_letter_count": 3, "dead_letters": []any{"notifications.order-email", "search.index"}})
}

func TestBadRequests(t *testing.T) {
	e := newEnv(t, nil)
	e.emit(t, "acme", 3)
	acmeCursor := e.get(t, "tenant=acme&max_events=1&full=true")["cursor"].(string)
	for _, tc := range []struct {
		method, path, query string
		status              int
		param               string
	}{
		{"GET", "/", "tenant=", 400, "tenant"},
		{"GET", "/", "tenant=" + strings.Repeat("x", 129), 400, "tenant"},
		{"GET", "/", "tenant=acme%20corp", 400, "not allowed"},
		{"GET", "/", "tenant=t%C3%A9", 400, "not allowed"},
		{"GET", "/", "tenant=acme&full=yes", 400, "full"},
		{"GET", "/", "limit=0", 400, "limit"},
		{"GET", "/", "limit=101", 400, "limit"},
		{"GET", "/", "tenant=acme&limit=5", 400, "limit"},
		{"GET", "/", "tenant=acme&max_events=0", 400, "max_events"},
		{"GET", "/", "tenant=acme&max_events=lots", 400, "max_events"},
		{"GET", "/", "tenant=acme&tenant=other", 400, "tenant"},
		{"GET", "/", "tennant=acme", 400, `"tennant"`},
		{"GET", "/", "tenant=acme&cursor=garbage", 400, "cursor"},
		{"GET", "/", "tenant=other&cursor=" + url.QueryEscape(acmeCursor), 400, "tenant=acme"},
		{"GET", "/", "tenant=acme&full=false&cursor=" + url.QueryEscape(acmeCursor), 400, "full"},
		{"GET", "/", "cursor=" + url.QueryEscape(acmeCursor), 400, "cursor"},
		{"POST", "/", "tenant=acme", 405, "GET"},
		{"GET", "/admin", "", 404, "/admin"},
	} {
		t.Run(tc.method+" "+tc.path+"?"+tc.query, func(t *testing.T) {
			status, body := e.call(t, tc.method, tc.path, tc.query)
			msg, _ := body["error"].(string)
			if status != tc.status || !strings.Contains(msg, tc.param) {
				t.Errorf("got %d %v, want %d with an error naming %s", status, body, tc.status, tc.param)
			}
			if body["request_id"] != "lambda-req-1" {
				t.Errorf("request_id: got %v, want lambda-req-1", body["request_id"])
			}
		})
	}
}

// failingLog fails every read, as a throttled or unreachable table would.
type failingLog struct{ reconcile.Log }

func (failingLog) Head(context.Context, string) (*chain.Head, error) {
	return nil, fmt.Errorf("read head: %w", &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")})
}

func (failingLog) ChainsOf(context.Context, string) ([]string, error) {
	return nil, fmt.Errorf("chains: %w", &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")})
}

func TestInternalErrorIs500(t *testing.T) {
	e := newEnv(t, func(c *reconcile.Config) { c.Log = failingLog{c.Log} })
	status, body := e.call(t, "GET", "/", "tenant=acme")
	if status != 500 || body["request_id"] != "lambda-req-1" || !strings.Contains(fmt.Sprint(body["error"]), "lambda-req-1") {
		t.Errorf("got %d %v, want 500 with the request id", status, body)
	}
	if strings.Contains(fmt.Sprint(body["error"]), "slow down") {
		t.Errorf("500 body leaks the internal error: %v", body)
	}
	found := false
	for _, l := range lines(t, e.logs) {
		if l["msg"] == "reconcile failed" && strings.Contains(fmt.Sprint(l[obs.KeyErr]), "slow down") && l[obs.KeyRequestID] == "lambda-req-1" {
			found = true
		}
	}
	if !found {
		t.Errorf("internal error not logged with its cause and request id:\n%s", e.logs)
	}
}

func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		out = append(out, m)
	}
	return out
}

func emfCount(t *testing.T, buf *bytes.Buffer, name string) int {
	t.Helper()
	n := 0
	for _, m := range lines(t, buf) {
		if v, ok := m[name].(float64); ok {
			n += int(v)
		}
	}
	return n
}

func keysOf(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
