package ddb

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestBatchWriteAndGet(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "bt1", tableSpec{})
	e.create(t, "bt2", tableSpec{sk: types.ScalarAttributeTypeN})
	ctx := context.Background()
	e.put(t, "bt1", map[string]av{"pk": s("doomed")})
	var w1, w2 []types.WriteRequest
	for i := 0; i < 12; i++ {
		w1 = append(w1, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]av{"pk": s(fmt.Sprint("k", i)), "v": ni(i)}}})
		w2 = append(w2, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]av{"pk": s("p"), "sk": ni(i)}}})
	}
	w1 = append(w1, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: map[string]av{"pk": s("doomed")}}})
	out, err := e.c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"bt1": w1, "bt2": w2},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.UnprocessedItems) != 0 || len(out.ConsumedCapacity) != 2 {
		t.Fatalf("unprocessed %v, capacity %v", out.UnprocessedItems, out.ConsumedCapacity)
	}
	for _, c := range out.ConsumedCapacity {
		want := map[string]float64{"bt1": 13, "bt2": 12}[aws.ToString(c.TableName)]
		if aws.ToFloat64(c.CapacityUnits) != want {
			t.Fatalf("%s: %v WCU, want %v", aws.ToString(c.TableName), aws.ToFloat64(c.CapacityUnits), want)
		}
	}
	if e.get(t, "bt1", map[string]av{"pk": s("doomed")}) != nil {
		t.Fatal("the delete request did not delete")
	}

	// 26 requests, and two on one item, are refused.
	w3 := append(append([]types.WriteRequest{}, w1...), w2...)
	_, err = e.c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"bt1": w3[:26]}})
	wantCode(t, err, "ValidationException", "25")
	_, err = e.c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"bt1": {w1[0], w1[0]}}})
	wantCode(t, err, "ValidationException", "Provided list of item keys contains duplicates")

	keys := []map[string]av{}
	for i := 0; i < 14; i++ {
		keys = append(keys, map[string]av{"pk": s(fmt.Sprint("k", i))}) // k12, k13 do not exist
	}
	got, err := e.c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
		RequestItems: map[string]types.KeysAndAttributes{
			"bt1": {Keys: keys, ProjectionExpression: aws.String("v"), ConsistentRead: aws.Bool(true)},
			"bt2": {Keys: []map[string]av{{"pk": s("p"), "sk": ni(3)}}},
		},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Responses["bt1"]) != 12 || len(got.Responses["bt2"]) != 1 || len(got.UnprocessedKeys) != 0 {
		t.Fatalf("responses: %d and %d items, unprocessed %v", len(got.Responses["bt1"]), len(got.Responses["bt2"]), got.UnprocessedKeys)
	}
	for _, it := range got.Responses["bt1"] {
		if len(it) != 1 || it["v"] == nil {
			t.Fatalf("projection: %v", it)
		}
	}
	for _, c := range got.ConsumedCapacity {
		// Each item (missing ones too) rounds up to one 4 KB unit; bt2 is eventually consistent.
		want := map[string]float64{"bt1": 14, "bt2": 0.5}[aws.ToString(c.TableName)]
		if aws.ToFloat64(c.CapacityUnits) != want {
			t.Fatalf("%s: %v RCU, want %v", aws.ToString(c.TableName), aws.ToFloat64(c.CapacityUnits), want)
		}
	}
	many := make([]map[string]av, 101)
	for i := range many {
		many[i] = map[string]av{"pk": s(fmt.Sprint("m", i))}
	}
	_, err = e.c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"bt1": {Keys: many}}})
	wantCode(t, err, "ValidationException", "Too many items requested for the BatchGetItem call")
	_, err = e.c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"bt1": {Keys: many[:100]}}})
	if err != nil {
		t.Fatalf("100 keys: %v", err)
	}
	_, err = e.c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"bt1": {Keys: []map[string]av{many[0], many[0]}}}})
	wantCode(t, err, "ValidationException", "Provided list of item keys contains duplicates")
}
