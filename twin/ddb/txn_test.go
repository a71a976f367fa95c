package ddb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func reasonCodes(err error) []string {
	var tc *types.TransactionCanceledException
	if !errors.As(err, &tc) {
		return nil
	}
	out := make([]string, len(tc.CancellationReasons))
	for i, r := range tc.CancellationReasons {
		out[i] = aws.ToString(r.Code)
	}
	return out
}

func incr(table, pk string) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(table), Key: map[string]av{"pk": s(pk)},
		UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: map[string]av{":one": n("1")},
	}}
}

func TestTransactWriteCommitsAllOrNothing(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "tx1", tableSpec{})
	e.create(t, "tx2", tableSpec{})
	ctx := context.Background()
	e.put(t, "tx1", map[string]av{"pk": s("gone"), "v": s("x")})
	e.put(t, "tx2", map[string]av{"pk": s("guard"), "state": s("open")})
	_, err := e.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("tx1"), Item: map[string]av{"pk": s("new"), "v": s("1")}, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		incr("tx1", "ctr"),
		{Delete: &types.Delete{TableName: aws.String("tx1"), Key: map[string]av{"pk": s("gone")}}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String("tx2"), Key: map[string]av{"pk": s("guard")},
			ConditionExpression: aws.String("#s = :o"), ExpressionAttributeNames: map[string]string{"#s": "state"}, ExpressionAttributeValues: map[string]av{":o": s("open")}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if e.get(t, "tx1", map[string]av{"pk": s("new")}) == nil || e.get(t, "tx1", map[string]av{"pk": s("gone")}) != nil ||
		strOf(t, e.get(t, "tx1", map[string]av{"pk": s("ctr")})["n"]) != "1" {
		t.Fatal("the transaction did not apply every action")
	}

	// The second action's condition fails: nothing is written, reasons in order, ALL_OLD on the failed one.
	_, err = e.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		incr("tx1", "ctr"),
		{Put: &types.Put{TableName: aws.String("tx1"), Item: map[string]av{"pk": s("new"), "v": s("2")}, ConditionExpression: aws.String("attribute_not_exists(pk)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
		{Delete: &types.Delete{TableName: aws.String("tx2"), Key: map[string]av{"pk": s("guard")}}},
	}})
	wantCode(t, err, "TransactionCanceledException", "Transaction cancelled, please refer cancellation reasons for specific reasons [None, ConditionalCheckFailed, None]")
	var tc *types.TransactionCanceledException
	errors.As(err, &tc)
	if got := tc.CancellationReasons[1]; aws.ToString(got.Message) != "The conditional request failed" || strOf(t, got.Item["v"]) != "1" {
		t.Fatalf("reason: %+v", got)
	}
	if strOf(t, e.get(t, "tx1", map[string]av{"pk": s("ctr")})["n"]) != "1" || e.get(t, "tx2", map[string]av{"pk": s("guard")}) == nil {
		t.Fatal("a cancelled transaction wrote")
	}

	// An update that fails at run time is a ValidationError reason.
	_, err = e.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		incr("tx1", "ctr"),
		{Update: &types.Update{TableName: aws.String("tx1"), Key: map[string]av{"pk": s("new")},
			UpdateExpression: aws.String("SET v = v + :one"), ExpressionAttributeValues: map[string]av{":one": n("1")}}},
	}})
	if got := fmt.Sprint(reasonCodes(err)); got != "[None ValidationError]" {
		t.Fatalf("reasons: got %s (%v)", got, err)
	}

	// Two actions on one item, and unknown tables, are refused outright.
	_, err = e.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{incr("tx1", "ctr"), incr("tx1", "ctr")}})
	wantCode(t, err, "ValidationException", "Transaction request cannot include multiple operations on one item")
	_, err = e.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{incr("nope", "ctr")}})
	wantCode(t, err, "ResourceNotFoundException", "")
	many := make([]types.TransactWriteItem, 101)
	for i := range many {
		many[i] = incr("tx1", fmt.Sprint("k", i))
	}
	_, err = e.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: many})
	wantCode(t, err, "ValidationException", "100")
	if _, err := e.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: many[:100]}); err != nil {
		t.Fatalf("100 actions: %v", err)
	}
}

func TestClientRequestToken(t *testing.T) {
	e := newDP(t, Options{Conflicts: true, ConflictWindow: 300 * time.Millisecond})
	e.create(t, "tok", tableSpec{})
	ctx := context.Background()
	in := &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String("token-1"), TransactItems: []types.TransactWriteItem{incr("tok", "c")}}
	for i := 0; i < 3; i++ {
		if _, err := e.c.TransactWriteItems(ctx, in); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if got := strOf(t, e.get(t, "tok", map[string]av{"pk": s("c")})["n"]); got != "1" {
		t.Fatalf("repeats with one token: n = %s, want 1", got)
	}
	_, err := e.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String("token-1"), TransactItems: []types.TransactWriteItem{incr("tok", "other")}})
	wantCode(t, err, "IdempotentParameterMismatchException", "")

	// While the first call with a token runs, a second gets TransactionInProgressException.
	done := make(chan error, 1)
	go func() {
		_, err := e.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String("token-2"), TransactItems: []types.TransactWriteItem{incr("tok", "d")}})
		done <- err
	}()
	waitInflight(t, e.db, "tok")
	_, err = e.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String("token-2"), TransactItems: []types.TransactWriteItem{incr("tok", "d")}})
	wantCode(t, err, "TransactionInProgressException", "")
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// The token expires after 10 minutes: then the same call runs again.
	clock := NewTestClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e2 := newDP(t, Options{Now: clock.Now})
	e2.create(t, "tok", tableSpec{})
	in.ClientRequestToken = aws.String("token-3")
	if _, err := e2.c.TransactWriteItems(ctx, in); err != nil {
		t.Fatal(err)
	}
	clock.Advance(9 * time.Minute)
	if _, err := e2.c.TransactWriteItems(ctx, in); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)
	if _, err := e2.c.TransactWriteItems(ctx, in); err != nil {
		t.Fatal(err)
	}
	if got := strOf(t, e2.get(t, "tok", map[string]av{"pk": s("c")})["n"]); got != "2" {
		t.Fatalf("after expiry: n = %s, want 2", got)
	}
}

// waitInflight polls until some transaction holds an item of the table.
func waitInflight(t *testing.T, db *DB, table string) {
	t.Helper()
	tb, err := db.table(table)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		tb.mu.RLock()
		n := len(tb.extra.inflight)
		tb.mu.RUnlock()
		if n > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no transaction became in-flight")
}

func TestTransactionConflicts(t *testing.T) {
	e := newDP(t, Options{Conflicts: true, ConflictWindow: 300 * time.Millisecond})
	e.create(t, "cfl", tableSpec{})
	ctx := context.Background()
	e.put(t, "cfl", map[string]av{"pk": s("x")})
	done := make(chan error, 1)
	go func() {
		_, err := e.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{incr("cfl", "x"), incr("cfl", "y")}})
		done <- err
	}()
	waitInflight(t, e.db, "cfl")
	_, err := e.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{incr("cfl", "z"), incr("cfl", "y")}})
	if got := fmt.Sprint(reasonCodes(err)); got != "[None TransactionConflict]" {
		t.Fatalf("second transaction: reasons %s (%v)", got, err)
	}
	_, err = e.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("cfl"), Item: map[string]av{"pk": s("x")}})
	wantCode(t, err, "TransactionConflictException", "")
	_, err = e.c.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{{Get: &types.Get{TableName: aws.String("cfl"), Key: map[string]av{"pk": s("x")}}}}})
	if got := fmt.Sprint(reasonCodes(err)); got != "[TransactionConflict]" {
		t.Fatalf("TransactGetItems: reasons %s (%v)", got, err)
	}
	// A plain read sees the committed item, and an unrelated write goes ahead.
	if e.get(t, "cfl", map[string]av{"pk": s("x")}) == nil {
		t.Fatal("GetItem during the transaction")
	}
	e.put(t, "cfl", map[string]av{"pk": s("free")})
	if err := <-done; err != nil {
		t.Fatalf("first transaction: %v", err)
	}
	if strOf(t, e.get(t, "cfl", map[string]av{"pk": s("x")})["n"]) != "1" || e.get(t, "cfl", map[string]av{"pk": s("z")}) != nil {
		t.Fatal("wrong outcome")
	}
	// Afterwards the items are free again.
	e.put(t, "cfl", map[string]av{"pk": s("x")})
}

// TestTransactionsSerialize: without Conflicts, concurrent transactions on one item
// queue and every one commits; with Conflicts, every one either commits or is
// cancelled with TransactionConflict, and the counter counts exactly the commits.
func TestTransactionsSerialize(t *testing.T) {
	for _, conflicts := range []bool{false, true} {
		t.Run(fmt.Sprint("conflicts=", conflicts), func(t *testing.T) {
			e := newDP(t, Options{Conflicts: conflicts, ConflictWindow: time.Millisecond})
			e.create(t, "ser", tableSpec{})
			const workers, each = 6, 15
			var mu sync.Mutex
			commits, conflicted := 0, 0
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < each; i++ {
						_, err := e.c.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{incr("ser", "hot"), incr("ser", fmt.Sprint("w", w))}})
						mu.Lock()
						switch {
						case err == nil:
							commits++
						case fmt.Sprint(reasonCodes(err)) != "[]":
							conflicted++
						default:
							t.Errorf("transaction: %v", err)
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			got := strOf(t, e.get(t, "ser", map[string]av{"pk": s("hot")})["n"])
			if got != fmt.Sprint(commits) || commits+conflicted != workers*each {
				t.Fatalf("hot = %s, commits %d, conflicts %d", got, commits, conflicted)
			}
			if !conflicts && commits != workers*each {
				t.Fatalf("without Conflicts only %d of %d committed", commits, workers*each)
			}
			t.Logf("commits %d, conflicts %d", commits, conflicted)
		})
	}
}

func TestTransactGetItems(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "tg1", tableSpec{})
	e.put(t, "tg1", map[string]av{"pk": s("a"), "v": s("1"), "w": s("2")})
	out, err := e.c.TransactGetItems(context.Background(), &dynamodb.TransactGetItemsInput{
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		TransactItems: []types.TransactGetItem{
			{Get: &types.Get{TableName: aws.String("tg1"), Key: map[string]av{"pk": s("a")}, ProjectionExpression: aws.String("v")}},
			{Get: &types.Get{TableName: aws.String("tg1"), Key: map[string]av{"pk": s("missing")}}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Responses) != 2 || len(out.Responses[0].Item) != 1 || strOf(t, out.Responses[0].Item["v"]) != "1" || out.Responses[1].Item != nil {
		t.Fatalf("responses: %+v", out.Responses)
	}
	if got := aws.ToFloat64(out.ConsumedCapacity[0].CapacityUnits); got != 4 {
		t.Fatalf("capacity: got %v, want 4 (2 RCU per item in a transaction)", got)
	}
}
