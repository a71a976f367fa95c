package ddb

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The expected numbers follow
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html
// with item sizes by attr's Size rule (name bytes + value bytes).
func TestConsumedCapacity(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "cap", tableSpec{gsiProj: types.ProjectionTypeKeysOnly})
	ctx := context.Background()
	key := map[string]av{"pk": s("a")}
	// "pk"+"a" = 3 bytes, "d" + 1,500 = 1,501: 1,504 bytes → 2 WCU.
	item := map[string]av{"pk": s("a"), "d": s(strings.Repeat("x", 1500))}
	out, err := e.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("cap"), Item: item, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToFloat64(out.ConsumedCapacity.CapacityUnits); got != 2 || aws.ToString(out.ConsumedCapacity.TableName) != "cap" {
		t.Fatalf("PutItem 1.5 KB: %v WCU, want 2", got)
	}
	// A smaller new version costs by the larger, old one: still 2.
	out, err = e.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("cap"), Item: key, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	if err != nil || aws.ToFloat64(out.ConsumedCapacity.CapacityUnits) != 2 {
		t.Fatalf("PutItem over 1.5 KB: %v, %v", err, out.ConsumedCapacity)
	}
	// Reads: 4 KB units, halved when eventually consistent.
	e.put(t, "cap", map[string]av{"pk": s("b"), "d": s(strings.Repeat("x", 5000))}) // 5,005 bytes: 2 units
	for _, c := range []struct {
		consistent bool
		want       float64
	}{{true, 2}, {false, 1}} {
		g, err := e.c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("cap"), Key: map[string]av{"pk": s("b")}, ConsistentRead: aws.Bool(c.consistent), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		if err != nil || aws.ToFloat64(g.ConsumedCapacity.CapacityUnits) != c.want {
			t.Fatalf("GetItem consistent=%v: %v, %v", c.consistent, err, g.ConsumedCapacity)
		}
	}
	// Transactions cost twice: the larger version is 5,005 + "e"+"1" = 5,007 bytes → 5 WCU → 10.
	tw, err := e.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal, TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: aws.String("cap"), Key: map[string]av{"pk": s("b")}, UpdateExpression: aws.String("SET e = :e"), ExpressionAttributeValues: map[string]av{":e": s("1")}}},
	}})
	if err != nil || len(tw.ConsumedCapacity) != 1 || aws.ToFloat64(tw.ConsumedCapacity[0].CapacityUnits) != 10 {
		t.Fatalf("TransactWriteItems: %v, %+v", err, tw.ConsumedCapacity)
	}
	// INDEXES: a write that adds a GSI entry costs that entry too.
	pu, err := e.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("cap"), ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes,
		Item: map[string]av{"pk": s("c"), "g1": s("x"), "g2": n("1")}})
	if err != nil {
		t.Fatal(err)
	}
	cc := pu.ConsumedCapacity
	if aws.ToFloat64(cc.CapacityUnits) != 2 || aws.ToFloat64(cc.Table.CapacityUnits) != 1 || aws.ToFloat64(cc.GlobalSecondaryIndexes["gsi"].CapacityUnits) != 1 {
		t.Fatalf("INDEXES: total %v, table %v, gsi %v", aws.ToFloat64(cc.CapacityUnits), cc.Table, cc.GlobalSecondaryIndexes)
	}
	// A change of a non-projected attribute costs the KEYS_ONLY index nothing.
	pu, err = e.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("cap"), ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes,
		Item: map[string]av{"pk": s("c"), "g1": s("x"), "g2": n("1"), "other": s("y")}})
	if err != nil || aws.ToFloat64(pu.ConsumedCapacity.CapacityUnits) != 1 || len(pu.ConsumedCapacity.GlobalSecondaryIndexes) != 0 {
		t.Fatalf("unprojected change: %v, %+v", err, pu.ConsumedCapacity)
	}
	// A changed index key moves the entry: two index writes.
	pu, err = e.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("cap"), ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes,
		Item: map[string]av{"pk": s("c"), "g1": s("z"), "g2": n("1")}})
	if err != nil || aws.ToFloat64(pu.ConsumedCapacity.GlobalSecondaryIndexes["gsi"].CapacityUnits) != 2 {
		t.Fatalf("moved index entry: %v, %+v", err, pu.ConsumedCapacity)
	}
	// NONE (and no parameter) returns nothing.
	pu, err = e.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("cap"), Item: key})
	if err != nil || pu.ConsumedCapacity != nil {
		t.Fatalf("no capacity asked: %v, %+v", err, pu.ConsumedCapacity)
	}
}

func TestCapacityUnits(t *testing.T) {
	for _, c := range []struct {
		size int
		w    float64
		r    float64
	}{{0, 1, 1}, {1, 1, 1}, {1024, 1, 1}, {1025, 2, 1}, {4096, 4, 1}, {4097, 5, 2}, {400 * 1024, 400, 100}} {
		if got := writeUnits(c.size); got != c.w {
			t.Errorf("writeUnits(%d) = %v, want %v", c.size, got, c.w)
		}
		if got := readUnits(c.size, true); got != c.r {
			t.Errorf("readUnits(%d) = %v, want %v", c.size, got, c.r)
		}
		if got := readUnits(c.size, false); got != c.r/2 {
			t.Errorf("readUnits(%d, eventual) = %v, want %v", c.size, got, c.r/2)
		}
	}
}
