package ddb

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestFaultDropCommitsWithoutAnswer(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "fdrop", tableSpec{})
	if err := e.db.InjectFault(Fault{Action: "PutItem", Table: "fdrop", Kind: FaultDropResponse}); err != nil {
		t.Fatal(err)
	}
	_, err := e.c.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("fdrop"), Item: map[string]av{"pk": s("a")}})
	if err == nil || strings.Contains(fmt.Sprint(err), "api error") {
		t.Fatalf("got %v, want a transport error", err)
	}
	if e.get(t, "fdrop", map[string]av{"pk": s("a")}) == nil {
		t.Fatal("the dropped request did not commit")
	}
	// Count 1: the next request is answered.
	e.put(t, "fdrop", map[string]av{"pk": s("b")})
}

func TestFaultErrorAndThrottleWriteNothing(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "ferr", tableSpec{})
	e.create(t, "fother", tableSpec{})
	ctx := context.Background()
	for _, c := range []struct {
		kind FaultKind
		code string
	}{{FaultInternalError, "InternalServerError"}, {FaultThrottle, "ProvisionedThroughputExceededException"}} {
		if err := e.db.InjectFault(Fault{Action: "TransactWriteItems", Table: "ferr", Kind: c.kind, Count: 2}); err != nil {
			t.Fatal(err)
		}
		// Another table's transaction is not hit.
		if _, err := e.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{incr("fother", "x")}}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			_, err := e.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{incr("ferr", "x")}})
			wantCode(t, err, c.code, "")
		}
		if e.get(t, "ferr", map[string]av{"pk": s("x")}) != nil {
			t.Fatalf("%s: written", c.kind)
		}
	}
	if _, err := e.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{incr("ferr", "x")}}); err != nil {
		t.Fatalf("after the faults ran out: %v", err)
	}
}

func TestFaultDelayAndAdminAPI(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "fdelay", tableSpec{})
	post := func(body string) int {
		t.Helper()
		resp, err := http.Post(e.url+"/_fourlanes/faults", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(`{"action":"GetItem","kind":"delay","delayMs":200}`); code != http.StatusNoContent {
		t.Fatalf("POST: status %d", code)
	}
	if code := post(`{"action":"GetItem","kind":"nonsense"}`); code != http.StatusBadRequest {
		t.Fatalf("POST of a bad kind: status %d", code)
	}
	start := time.Now()
	e.get(t, "fdelay", map[string]av{"pk": s("a")})
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("delayed response came after %v", d)
	}
	if code := post(`{"action":"PutItem","kind":"error","count":5}`); code != http.StatusNoContent {
		t.Fatalf("POST: status %d", code)
	}
	if got := e.db.Faults(); len(got) != 1 || got[0].Count != 5 {
		t.Fatalf("armed: %+v", got)
	}
	req, _ := http.NewRequest(http.MethodDelete, e.url+"/_fourlanes/faults", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	e.put(t, "fdelay", map[string]av{"pk": s("a")})
}

// TestFaultStall: a stalled request waits before it runs. A caller that
// waits it out writes; one that goes away (its context cancelled: a killed
// process's connection closes) writes nothing, ever.
func TestFaultStall(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "fstall", tableSpec{})
	put := func(ctx context.Context, pk string) error {
		_, err := e.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("fstall"), Item: map[string]av{"pk": s(pk)}})
		return err
	}
	if err := e.db.InjectFault(Fault{Action: "PutItem", Table: "fstall", Kind: FaultStall}); err == nil {
		t.Fatal("a stall without a delay was armed")
	}
	if err := e.db.InjectFault(Fault{Action: "PutItem", Table: "fstall", Kind: FaultStall, Delay: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := put(context.Background(), "waited"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("stalled request answered after %v, want at least 200ms", d)
	}
	if e.get(t, "fstall", map[string]av{"pk": s("waited")}) == nil {
		t.Fatal("a stalled request that was waited out did not write")
	}

	// Match picks one kind of request: this rule passes "other" by.
	if err := e.db.InjectFault(Fault{Action: "PutItem", Table: "fstall", Match: `"abandoned"`, Kind: FaultStall, Delay: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := put(context.Background(), "other"); err != nil || time.Since(start) > time.Second {
		t.Fatalf("a request the rule does not match: %v after %v, want answered at once", err, time.Since(start))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := put(ctx, "abandoned"); err == nil {
		t.Fatal("the abandoned request succeeded")
	}
	time.Sleep(3500 * time.Millisecond) // past the stall: it must not run late
	if e.get(t, "fstall", map[string]av{"pk": s("abandoned")}) != nil {
		t.Fatal("the request whose caller went away was written")
	}
}

func TestPartitionBudget(t *testing.T) {
	clock := NewTestClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newDP(t, Options{Now: clock.Now, PartitionWCU: 10})
	e.create(t, "budget", tableSpec{sk: types.ScalarAttributeTypeN})
	ctx := context.Background()
	putN := func(pk string, i int) error {
		_, err := e.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("budget"), Item: map[string]av{"pk": s(pk), "sk": ni(i)}})
		return err
	}
	for i := 0; i < 10; i++ {
		if err := putN("hot", i); err != nil {
			t.Fatalf("write %d within the burst: %v", i, err)
		}
	}
	wantCode(t, putN("hot", 10), "ProvisionedThroughputExceededException", "")
	if err := putN("cold", 0); err != nil {
		t.Fatalf("another partition: %v", err)
	}
	// A transaction touching the exhausted partition is cancelled with that reason.
	_, err := e.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("budget"), Item: map[string]av{"pk": s("cold"), "sk": ni(1)}}},
		{Put: &types.Put{TableName: aws.String("budget"), Item: map[string]av{"pk": s("hot"), "sk": ni(11)}}},
	}})
	if got := fmt.Sprint(reasonCodes(err)); got != "[None ProvisionedThroughputExceeded]" {
		t.Fatalf("transaction: reasons %s (%v)", got, err)
	}
	if e.get(t, "budget", map[string]av{"pk": s("cold"), "sk": ni(1)}) != nil {
		t.Fatal("a cancelled transaction wrote")
	}
	clock.Advance(500 * time.Millisecond) // refills 5 WCU
	for i := 0; i < 5; i++ {
		if err := putN("hot", 20+i); err != nil {
			t.Fatalf("after refill, write %d: %v", i, err)
		}
	}
	wantCode(t, putN("hot", 30), "ProvisionedThroughputExceededException", "")
	// BatchWriteItem: throttled writes come back unprocessed; all throttled is an error.
	clock.Advance(time.Second)
	var reqs []types.WriteRequest
	for i := 0; i < 12; i++ {
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]av{"pk": s("hot"), "sk": ni(100 + i)}}})
	}
	out, err := e.c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"budget": reqs}})
	if err != nil || len(out.UnprocessedItems["budget"]) != 2 {
		t.Fatalf("batch: err %v, unprocessed %d, want 2", err, len(out.UnprocessedItems["budget"]))
	}
	_, err = e.c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: out.UnprocessedItems})
	wantCode(t, err, "ProvisionedThroughputExceededException", "")
}

// TestDroppedTransactionRetriedWithToken is the ambiguous outcome a client token exists
// for: the commit happened, the answer was lost, the retry with the same token succeeds
// without applying the transaction twice.
func TestDroppedTransactionRetriedWithToken(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "fretry", tableSpec{})
	ctx := context.Background()
	if err := e.db.InjectFault(Fault{Action: "TransactWriteItems", Kind: FaultDropResponse}); err != nil {
		t.Fatal(err)
	}
	in := &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String("append-1"), TransactItems: []types.TransactWriteItem{incr("fretry", "head")}}
	if _, err := e.c.TransactWriteItems(ctx, in); err == nil {
		t.Fatal("the dropped response reached the client")
	}
	if _, err := e.c.TransactWriteItems(ctx, in); err != nil {
		t.Fatalf("retry with the token: %v", err)
	}
	if got := strOf(t, e.get(t, "fretry", map[string]av{"pk": s("head")})["n"]); got != "1" {
		t.Fatalf("n = %s after a dropped commit and its retry, want 1", got)
	}
}

// TestFaultRate: a rule with a rate hits each matching request with that
// probability, on every action with "*", with no limit unless it has a count
// too; a rate outside (0, 1] is refused.
func TestFaultRate(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "frate", tableSpec{})
	ctx := context.Background()
	get := func() error {
		_, err := e.c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("frate"), Key: map[string]av{"pk": s("a")}})
		return err
	}
	if err := e.db.InjectFault(Fault{Action: "*", Table: "frate", Kind: FaultInternalError, Rate: 0.3, Seed: 42}); err != nil {
		t.Fatal(err)
	}
	hits := 0
	for range 400 {
		if err := get(); err != nil {
			wantCode(t, err, "InternalServerError", "")
			hits++
		}
	}
	// 400 trials at 0.3: mean 120, standard deviation 9.2; five of them either side.
	if hits < 74 || hits > 166 {
		t.Errorf("rate 0.3 hit %d of 400 requests, want about 120", hits)
	}
	if fs := e.db.Faults(); len(fs) != 1 || fs[0].Count != -1 || fs[0].Hits != hits {
		t.Errorf("a rate without a count: armed %+v, want one rule left with no limit (-1) that says it hit %d", fs, hits)
	}
	e.db.ClearFaults()

	if err := e.db.InjectFault(Fault{Action: "GetItem", Table: "frate", Kind: FaultInternalError, Rate: 0.5, Count: 10, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	hits = 0
	for range 200 {
		if get() != nil {
			hits++
		}
	}
	if hits != 10 || len(e.db.Faults()) != 0 {
		t.Errorf("rate 0.5 with count 10: %d hits over 200 requests, rules left %+v; want 10, none", hits, e.db.Faults())
	}
	for _, bad := range []float64{-0.1, 1.5} {
		if err := e.db.InjectFault(Fault{Action: "GetItem", Table: "frate", Kind: FaultInternalError, Rate: bad}); err == nil || !strings.Contains(err.Error(), "rate") {
			t.Errorf("rate %v: got %v, want an error naming the rate", bad, err)
		}
	}
}

// TestAdminClock: the admin API's clock moves the server's clock for a test in
// another process: an item whose TTL is an hour away is swept once the clock
// runs two hours ahead, and GET reports the skew and the server's time.
func TestAdminClock(t *testing.T) {
	e := newDP(t, Options{TTLSweep: 10 * time.Millisecond})
	e.create(t, "fclock", tableSpec{})
	ctx := context.Background()
	if _, err := e.c.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("fclock"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("exp"), Enabled: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	e.put(t, "fclock", map[string]av{"pk": s("a"), "exp": &types.AttributeValueMemberN{Value: fmt.Sprint(time.Now().Add(time.Hour).Unix())}})
	post := func(body string) int {
		t.Helper()
		resp, err := http.Post(e.url+"/_fourlanes/clock", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(`{"skewMs":"soon"}`); code != http.StatusBadRequest {
		t.Errorf("a malformed clock: status %d, want 400", code)
	}
	time.Sleep(50 * time.Millisecond)
	if e.get(t, "fclock", map[string]av{"pk": s("a")}) == nil {
		t.Fatal("swept before the clock moved")
	}
	if code := post(`{"skewMs":7200000}`); code != http.StatusNoContent {
		t.Fatalf("POST: status %d", code)
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.get(t, "fclock", map[string]av{"pk": s("a")}) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the item whose TTL passed on the moved clock was not swept")
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Get(e.url + "/_fourlanes/clock")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct {
		SkewMs int64     `json:"skewMs"`
		Now    time.Time `json:"now"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || c.SkewMs != 7200000 || c.Now.Before(time.Now().Add(119*time.Minute)) {
		t.Errorf("GET: %+v %v; want skew 7200000 ms and the server's time two hours ahead", c, err)
	}
}

// TestPartitionBudgetStartEmpty: with PartitionStartEmpty a fresh partition has
// no second's burst saved: it takes only what has refilled since its first write.
func TestPartitionBudgetStartEmpty(t *testing.T) {
	clock := NewTestClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newDP(t, Options{Now: clock.Now, PartitionWCU: 10, PartitionStartEmpty: true})
	e.create(t, "budget", tableSpec{sk: types.ScalarAttributeTypeN})
	ctx := context.Background()
	putN := func(i int) error {
		_, err := e.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("budget"), Item: map[string]av{"pk": s("hot"), "sk": ni(i)}})
		return err
	}
	wantCode(t, putN(0), "ProvisionedThroughputExceededException", "")
	clock.Advance(300 * time.Millisecond) // refills 3 WCU
	for i := range 3 {
		if err := putN(1 + i); err != nil {
			t.Fatalf("after refill, write %d: %v", i, err)
		}
	}
	wantCode(t, putN(9), "ProvisionedThroughputExceededException", "")
	clock.Advance(10 * time.Second) // holds at most one second's worth, as always
	for i := range 10 {
		if err := putN(10 + i); err != nil {
			t.Fatalf("a second's burst, write %d: %v", i, err)
		}
	}
	wantCode(t, putN(99), "ProvisionedThroughputExceededException", "")
}

// TestFaultsScopedByTable: rules that name a table hit only that table, and
// the admin API lists and clears them by table (?table=), so tests sharing
// one server each clear their own rules without disarming another's; a
// DELETE without ?table= still clears every rule, and an empty ?table= is
// refused rather than read as "every table".
func TestFaultsScopedByTable(t *testing.T) {
	e := newDP(t, Options{})
	for _, tb := range []string{"fscope-a", "fscope-b"} {
		e.create(t, tb, tableSpec{})
	}
	ctx := context.Background()
	admin := e.url + "/_fourlanes/faults"
	do := func(method, query, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, admin+query, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	list := func(query string) []faultJSON {
		t.Helper()
		code, body := do(http.MethodGet, query, "")
		var fs []faultJSON
		if code != http.StatusOK || json.Unmarshal([]byte(body), &fs) != nil {
			t.Fatalf("GET %s: %d %s", query, code, body)
		}
		return fs
	}
	for _, tb := range []string{"fscope-a", "fscope-b"} {
		if code, body := do(http.MethodPost, "", `{"action":"GetItem","table":"`+tb+`","kind":"error","count":3}`); code != http.StatusNoContent {
			t.Fatalf("POST for %s: %d %s", tb, code, body)
		}
	}
	getErr := func(tb string) error {
		_, err := e.c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tb), Key: map[string]av{"pk": s("a")}})
		return err
	}
	// fa's rule hits fa only: fb's count is untouched.
	wantCode(t, getErr("fscope-a"), "InternalServerError", "")
	if fs := list("?table=fscope-b"); len(fs) != 1 || fs[0].Table != "fscope-b" || fs[0].Count != 3 {
		t.Fatalf("GET ?table=fscope-b after a hit on fa: %+v, want fb's rule alone with 3 left", fs)
	}
	if fs := list("?table=fscope-a"); len(fs) != 1 || fs[0].Count != 2 || fs[0].Hits != 1 {
		t.Fatalf("GET ?table=fscope-a: %+v, want fa's rule with 2 left and 1 hit", fs)
	}
	// Clearing fa leaves fb's rule armed and hitting.
	if code, body := do(http.MethodDelete, "?table=fscope-a", ""); code != http.StatusNoContent {
		t.Fatalf("DELETE ?table=fscope-a: %d %s", code, body)
	}
	if err := getErr("fscope-a"); err != nil {
		t.Fatalf("fa after its rules were cleared: %v", err)
	}
	wantCode(t, getErr("fscope-b"), "InternalServerError", "")
	if fs := list(""); len(fs) != 1 || fs[0].Table != "fscope-b" {
		t.Fatalf("GET after DELETE ?table=fscope-a: %+v, want fb's rule alone", fs)
	}
	// A server-wide rule is not cleared by a table's DELETE, only by a bare one.
	if code, body := do(http.MethodPost, "", `{"action":"PutItem","kind":"error","count":9}`); code != http.StatusNoContent {
		t.Fatalf("POST server-wide: %d %s", code, body)
	}
	do(http.MethodDelete, "?table=fscope-b&table=fscope-a", "")
	if fs := list(""); len(fs) != 1 || fs[0].Table != "" || fs[0].Action != "PutItem" {
		t.Fatalf("after DELETE ?table=fscope-b&table=fscope-a: %+v, want the server-wide rule alone", fs)
	}
	if code, _ := do(http.MethodDelete, "?table=", ""); code != http.StatusBadRequest {
		t.Fatalf("DELETE ?table= (empty): %d, want 400", code)
	}
	if fs := list(""); len(fs) != 1 {
		t.Fatalf("a refused DELETE cleared rules: %+v", fs)
	}
	do(http.MethodDelete, "", "")
	if fs := list(""); len(fs) != 0 {
		t.Fatalf("after a bare DELETE: %+v, want none", fs)
	}
	if err := getErr("fscope-b"); err != nil {
		t.Fatalf("fb after a bare DELETE: %v", err)
	}
}
