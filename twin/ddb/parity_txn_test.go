package ddb_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/twin/ddb"
)

// TestParityConditionalCheckFailed: the error, its message, and the old item returned
// when ReturnValuesOnConditionCheckFailure is ALL_OLD (and not otherwise).
func TestParityConditionalCheckFailed(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{})
	old := item{"pk": s("c"), "v": n("1"), "tags": ss("x")}
	p.put(tbl, old)
	cond := aws.String("attribute_not_exists(pk)")
	for _, rv := range []types.ReturnValuesOnConditionCheckFailure{"", types.ReturnValuesOnConditionCheckFailureNone, types.ReturnValuesOnConditionCheckFailureAllOld} {
		name := "ReturnValuesOnConditionCheckFailure=" + string(rv)
		calls := map[string]error{}
		_, calls["PutItem"] = p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: item{"pk": s("c")},
			ConditionExpression: cond, ReturnValuesOnConditionCheckFailure: rv})
		_, calls["UpdateItem"] = p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: item{"pk": s("c")},
			UpdateExpression: aws.String("SET v = :two"), ExpressionAttributeValues: item{":two": n("2")},
			ConditionExpression: cond, ReturnValuesOnConditionCheckFailure: rv})
		_, calls["DeleteItem"] = p.c.DeleteItem(p.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(tbl), Key: item{"pk": s("c")},
			ConditionExpression: cond, ReturnValuesOnConditionCheckFailure: rv})
		for op, err := range calls {
			wantErr(t, op+" "+name, err, "ConditionalCheckFailedException", docAPICondFailed, "The conditional request failed")
			var ccf *types.ConditionalCheckFailedException
			if !errors.As(err, &ccf) {
				continue
			}
			want := item(nil)
			if rv == types.ReturnValuesOnConditionCheckFailureAllOld {
				want = old
			}
			wantItem(t, op+" "+name+": Item", ccf.Item, want, docAPICondFailed)
		}
	}
	wantItem(t, "item after failed conditions", p.get(tbl, item{"pk": s("c")}), old, docAPIPut)

	t.Run("condition on a missing item", func(t *testing.T) {
		_, err := p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: item{"pk": s("none")},
			UpdateExpression: aws.String("SET v = :two"), ExpressionAttributeValues: item{":two": n("2")},
			ConditionExpression: aws.String("attribute_exists(pk)"), ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
		wantErr(t, "update of a missing item with attribute_exists", err, "ConditionalCheckFailedException", docAPIUpdate)
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) && ccf.Item != nil {
			t.Errorf("missing item: got Item %s, want none (doc %s)", render(ccf.Item), docAPICondFailed)
		}
		if got := p.get(tbl, item{"pk": s("none")}); got != nil {
			t.Errorf("missing item: got %s created, want nothing (doc %s)", render(got), docAPIUpdate)
		}
	})
}

// TestParityReturnValues: PutItem/DeleteItem NONE and ALL_OLD; UpdateItem's five.
func TestParityReturnValues(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{})
	base := item{"pk": s("r"), "a": n("1"), "b": n("2")}
	cases := []struct {
		rv   types.ReturnValue
		want item
	}{
		{types.ReturnValueNone, nil},
		{types.ReturnValueAllOld, base},
		{types.ReturnValueUpdatedOld, item{"a": n("1"), "b": n("2")}},
		{types.ReturnValueAllNew, item{"pk": s("r"), "a": n("10"), "c": s("c")}},
		{types.ReturnValueUpdatedNew, item{"a": n("10"), "c": s("c")}},
	}
	for _, c := range cases {
		t.Run("UpdateItem "+string(c.rv), func(t *testing.T) {
			p.put(tbl, base)
			out, err := p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: item{"pk": s("r")},
				UpdateExpression: aws.String("SET a = :ten, c = :c REMOVE b"), ExpressionAttributeValues: item{":ten": n("10"), ":c": s("c")},
				ReturnValues: c.rv})
			if wantOK(t, string(c.rv), err, docAPIUpdate) {
				wantItem(t, "UpdateItem ReturnValues "+string(c.rv), out.Attributes, c.want, docAPIUpdate)
			}
		})
	}
	t.Run("UpdateItem UPDATED_NEW of a nested path", func(t *testing.T) {
		p.put(tbl, item{"pk": s("r"), "m": mapv(item{"a": mapv(item{"b": n("1"), "keep": s("k")}), "sib": s("o")})})
		out, err := p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: item{"pk": s("r")},
			UpdateExpression: aws.String("SET m.a.b = :two"), ExpressionAttributeValues: item{":two": n("2")}, ReturnValues: types.ReturnValueUpdatedNew})
		// "UPDATED_NEW - Returns only the updated attributes": for a nested SET, the
		// changed fragment only, not its siblings (granularity as captured against AWS
		// by the dynamodb-conformance suite: github.com/nubo-db/dynoxide/issues/36).
		if wantOK(t, "UPDATED_NEW nested", err, docAPIUpdate) {
			wantItem(t, "UPDATED_NEW of m.a.b (only the updated path)", out.Attributes, item{"m": mapv(item{"a": mapv(item{"b": n("2")})})}, docAPIUpdate)
		}
		out, err = p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: item{"pk": s("r")},
			UpdateExpression: aws.String("SET m.a.b = :three"), ExpressionAttributeValues: item{":three": n("3")}, ReturnValues: types.ReturnValueUpdatedOld})
		if wantOK(t, "UPDATED_OLD nested", err, docAPIUpdate) {
			wantItem(t, "UPDATED_OLD of m.a.b (only the updated path)", out.Attributes, item{"m": mapv(item{"a": mapv(item{"b": n("2")})})}, docAPIUpdate)
		}
		out, err = p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: item{"pk": s("r")},
			UpdateExpression: aws.String("REMOVE m.sib"), ReturnValues: types.ReturnValueUpdatedNew})
		if wantOK(t, "UPDATED_NEW of a REMOVE", err, docAPIUpdate) && out.Attributes != nil {
			t.Errorf("UPDATED_NEW of a REMOVE-only update: got Attributes %s, want none (nothing has a new value) (doc %s)", render(out.Attributes), docAPIUpdate)
		}
	})
	t.Run("PutItem", func(t *testing.T) {
		p.put(tbl, base)
		out, err := p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: item{"pk": s("r")}, ReturnValues: types.ReturnValueAllOld})
		if wantOK(t, "PutItem ALL_OLD", err, docAPIPut) {
			wantItem(t, "PutItem ALL_OLD", out.Attributes, base, docAPIPut)
		}
		out, err = p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: item{"pk": s("new")}, ReturnValues: types.ReturnValueAllOld})
		if wantOK(t, "PutItem ALL_OLD of a new item", err, docAPIPut) {
			wantItem(t, "PutItem ALL_OLD of a new item", out.Attributes, nil, docAPIPut)
		}
		_, err = p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: item{"pk": s("r")}, ReturnValues: types.ReturnValueAllNew})
		wantErr(t, "PutItem ALL_NEW", err, "ValidationException", docAPIPut)
	})
	// Mirrors PutItem's case on purpose: each API's ReturnValues rules go through its own call.
	t.Run("DeleteItem", func(t *testing.T) {
		p.put(tbl, base)
		out, err := p.c.DeleteItem(p.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(tbl), Key: item{"pk": s("r")}, ReturnValues: types.ReturnValueAllOld})
		if wantOK(t, "DeleteItem ALL_OLD", err, docAPIDelete) {
			wantItem(t, "DeleteItem ALL_OLD", out.Attributes, base, docAPIDelete)
		}
		_, err = p.c.DeleteItem(p.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(tbl), Key: item{"pk": s("r")}, ReturnValues: types.ReturnValueUpdatedNew})
		wantErr(t, "DeleteItem UPDATED_NEW", err, "ValidationException", docAPIDelete)
	})
}

// sized returns an item of exactly size bytes by AWS's rule: pk (2 + len(key)) and
// "d" (1 + padding).
func sized(key string, size int) item {
	return item{"pk": s(key), "d": s(strings.Repeat("x", size-(2+len(key))-1))}
}

// TestParityConsumedCapacity: units by AWS's size rules (read-write-operations.html):
// writes 1 WCU per 1 KB (rounded up), the larger of the old and new item; reads 1 RCU
// per 4 KB strongly consistent, half eventually consistent; transactions twice that;
// Query sums the items then rounds; BatchGetItem rounds each item.
func TestParityConsumedCapacity(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{})
	total := types.ReturnConsumedCapacityTotal
	units := func(cc *types.ConsumedCapacity) float64 {
		if cc == nil {
			return -1
		}
		return aws.ToFloat64(cc.CapacityUnits)
	}
	sum := func(ccs []types.ConsumedCapacity) float64 {
		if ccs == nil {
			return -1
		}
		t := 0.0
		for _, c := range ccs {
			t += aws.ToFloat64(c.CapacityUnits)
		}
		return t
	}
	check := func(what string, err error, got, want float64) {
		t.Helper()
		if !wantOK(t, what, err, docReadWrite) {
			return
		}
		if got != want {
			t.Errorf("%s: got %v capacity units, want %v (doc %s)", what, got, want, docReadWrite)
		}
	}

	out, err := p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: sized("a", 1024), ReturnConsumedCapacity: total})
	check("PutItem of 1,024 bytes", err, units(out.ConsumedCapacity), 1)
	out, err = p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: sized("b", 1025), ReturnConsumedCapacity: total})
	check("PutItem of 1,025 bytes", err, units(out.ConsumedCapacity), 2)
	out, err = p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: sized("c", 3000), ReturnConsumedCapacity: total})
	check("PutItem of 3,000 bytes", err, units(out.ConsumedCapacity), 3)
	out, err = p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: sized("c", 100), ReturnConsumedCapacity: total})
	check("PutItem of 100 bytes over 3,000 (the larger counts)", err, units(out.ConsumedCapacity), 3)
	if out != nil && out.ConsumedCapacity != nil && aws.ToString(out.ConsumedCapacity.TableName) != tbl {
		t.Errorf("ConsumedCapacity.TableName: got %q, want %q (doc %s)", aws.ToString(out.ConsumedCapacity.TableName), tbl, docReadWrite)
	}

	uout, err := p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: item{"pk": s("b")},
		UpdateExpression: aws.String("REMOVE d"), ReturnConsumedCapacity: total})
	check("UpdateItem shrinking 1,025 bytes (the larger counts)", err, units(uout.ConsumedCapacity), 2)
	dout, err := p.c.DeleteItem(p.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(tbl), Key: item{"pk": s("a")}, ReturnConsumedCapacity: total})
	check("DeleteItem of 1,024 bytes", err, units(dout.ConsumedCapacity), 1)
	dout, err = p.c.DeleteItem(p.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(tbl), Key: item{"pk": s("none")}, ReturnConsumedCapacity: total})
	check("DeleteItem of a missing item", err, units(dout.ConsumedCapacity), 1)

	p.put(tbl, sized("r4k", 4096))
	p.put(tbl, sized("r4k1", 4097))
	p.put(tbl, sized("r100", 100))
	get := func(key string, consistent bool) (float64, error) {
		out, err := p.c.GetItem(p.ctx, &dynamodb.GetItemInput{TableName: aws.String(tbl), Key: item{"pk": s(key)},
			ConsistentRead: aws.Bool(consistent), ReturnConsumedCapacity: total})
		if err != nil {
			return 0, err
		}
		return units(out.ConsumedCapacity), nil
	}
	for _, c := range []struct {
		key        string
		consistent bool
		want       float64
	}{
		{"r4k", true, 1}, {"r4k1", true, 2}, {"r4k", false, 0.5}, {"r4k1", false, 1}, {"r100", false, 0.5}, {"none", true, 1}, {"none", false, 0.5},
	} {
		got, err := get(c.key, c.consistent)
		check(fmt.Sprintf("GetItem %s ConsistentRead=%v", c.key, c.consistent), err, got, c.want)
	}

	t.Run("Query sums then rounds", func(t *testing.T) {
		qt := p.table(tableSpec{hash: "pk", hashType: "S", rng: "sk", rngType: "N"})
		for i := 0; i < 3; i++ { // 3 × 1,500 bytes = 4,500 bytes: 2 units strongly consistent
			it := item{"pk": s("q"), "sk": n(strconv.Itoa(i))}
			it["d"] = s(strings.Repeat("x", 1500-3-4-1))
			p.put(qt, it)
		}
		for _, c := range []struct {
			consistent bool
			want       float64
		}{{true, 2}, {false, 1}} {
			out, err := p.c.Query(p.ctx, &dynamodb.QueryInput{TableName: aws.String(qt), KeyConditionExpression: aws.String("pk = :q"),
				ExpressionAttributeValues: item{":q": s("q")}, ConsistentRead: aws.Bool(c.consistent), ReturnConsumedCapacity: total})
			check(fmt.Sprintf("Query of 4,500 bytes ConsistentRead=%v", c.consistent), err, units(out.ConsumedCapacity), c.want)
		}
	})
	t.Run("a filter does not change what a Query consumes", func(t *testing.T) {
		qt := p.table(tableSpec{hash: "pk", hashType: "S", rng: "sk", rngType: "N"})
		for i := 0; i < 3; i++ {
			p.put(qt, item{"pk": s("q"), "sk": n(strconv.Itoa(i)), "d": s(strings.Repeat("x", 1500-3-4-1))})
		}
		out, err := p.c.Query(p.ctx, &dynamodb.QueryInput{TableName: aws.String(qt), KeyConditionExpression: aws.String("pk = :q"),
			FilterExpression: aws.String("attribute_not_exists(d)"), ExpressionAttributeValues: item{":q": s("q")},
			ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: total})
		check("Query of 4,500 bytes filtered to nothing", err, units(out.ConsumedCapacity), 2)
		sout, err := p.c.Scan(p.ctx, &dynamodb.ScanInput{TableName: aws.String(qt), ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: total})
		check("Scan of 4,500 bytes", err, units(sout.ConsumedCapacity), 2)
		iout, err := p.c.Query(p.ctx, &dynamodb.QueryInput{TableName: aws.String(qt), KeyConditionExpression: aws.String("pk = :q"),
			ExpressionAttributeValues: item{":q": s("q")}, ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes})
		if wantOK(t, "Query INDEXES", err, docReadWrite) {
			if cc := iout.ConsumedCapacity; cc == nil || cc.Table == nil || aws.ToFloat64(cc.Table.CapacityUnits) != 2 {
				t.Errorf("ReturnConsumedCapacity INDEXES: got %+v, want Table.CapacityUnits 2 (doc %s)", cc, docReadWrite)
			}
		}
		nout, err := p.c.Query(p.ctx, &dynamodb.QueryInput{TableName: aws.String(qt), KeyConditionExpression: aws.String("pk = :q"),
			ExpressionAttributeValues: item{":q": s("q")}})
		if wantOK(t, "Query without ReturnConsumedCapacity", err, docReadWrite) && nout.ConsumedCapacity != nil {
			t.Errorf("ConsumedCapacity without ReturnConsumedCapacity: got %+v, want none (doc %s)", nout.ConsumedCapacity, docReadWrite)
		}
	})
	t.Run("BatchGetItem rounds each item", func(t *testing.T) {
		p.put(tbl, sized("bg1", 1536)) // 1.5 KB → 4 KB
		p.put(tbl, sized("bg2", 6656)) // 6.5 KB → 8 KB: 12 KB in all, 3 units
		out, err := p.c.BatchGetItem(p.ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			tbl: {Keys: []item{{"pk": s("bg1")}, {"pk": s("bg2")}}, ConsistentRead: aws.Bool(true)},
		}, ReturnConsumedCapacity: total})
		if err == nil {
			check("BatchGetItem of 1.5 KB and 6.5 KB", err, sum(out.ConsumedCapacity), 3)
		} else {
			wantOK(t, "BatchGetItem", err, docBatchGet)
		}
	})
	t.Run("transactions count double", func(t *testing.T) {
		out, err := p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{ReturnConsumedCapacity: total,
			TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String(tbl), Item: sized("t1", 500)}},
				{Put: &types.Put{TableName: aws.String(tbl), Item: sized("t2", 1025)}},
			}})
		if err == nil {
			check("TransactWriteItems of 500 and 1,025 bytes", err, sum(out.ConsumedCapacity), 2*1+2*2)
		} else {
			wantOK(t, "TransactWriteItems", err, docAPITxWrite)
		}
		gout, err := p.c.TransactGetItems(p.ctx, &dynamodb.TransactGetItemsInput{ReturnConsumedCapacity: total,
			TransactItems: []types.TransactGetItem{
				{Get: &types.Get{TableName: aws.String(tbl), Key: item{"pk": s("r100")}}},
				{Get: &types.Get{TableName: aws.String(tbl), Key: item{"pk": s("r4k1")}}},
			}})
		if err == nil {
			check("TransactGetItems of 100 and 4,097 bytes", err, sum(gout.ConsumedCapacity), 2*1+2*2)
		} else {
			wantOK(t, "TransactGetItems", err, docAPITxGet)
		}
	})
}

// TestParityTransactions: all or nothing; one CancellationReason per action, in order;
// the old item on a failed condition when asked; TransactGetItems in request order.
func TestParityTransactions(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{})
	other := p.table(tableSpec{hash: "id", hashType: "N"})
	p.put(tbl, item{"pk": s("exists"), "v": n("1")})
	p.put(tbl, item{"pk": s("del"), "v": n("1")})

	t.Run("a failed condition writes nothing", func(t *testing.T) {
		_, err := p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(tbl), Item: item{"pk": s("new1")}}},
			{Update: &types.Update{TableName: aws.String(tbl), Key: item{"pk": s("exists")}, UpdateExpression: aws.String("SET v = :two"),
				ConditionExpression: aws.String("v = :nine"), ExpressionAttributeValues: item{":two": n("2"), ":nine": n("9")},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
			{Delete: &types.Delete{TableName: aws.String(tbl), Key: item{"pk": s("del")}}},
			{Put: &types.Put{TableName: aws.String(other), Item: item{"id": n("1")}, ConditionExpression: aws.String("attribute_exists(id)")}},
			{ConditionCheck: &types.ConditionCheck{TableName: aws.String(tbl), Key: item{"pk": s("nothing")}, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		}})
		wantErr(t, "cancelled transaction", err, "TransactionCanceledException", docAPITxWrite,
			"Transaction cancelled, please refer cancellation reasons for specific reasons [None, ConditionalCheckFailed, None, ConditionalCheckFailed, None]")
		var tce *types.TransactionCanceledException
		if asTCE(err, &tce) {
			want := "None ConditionalCheckFailed None ConditionalCheckFailed None"
			if got := strings.Join(reasonCodes(tce), " "); got != want {
				t.Errorf("CancellationReasons: got %s, want %s (doc %s)", got, want, docAPITxWrite)
			}
			if len(tce.CancellationReasons) == 5 {
				wantItem(t, "reason 1 Item (ALL_OLD)", tce.CancellationReasons[1].Item, item{"pk": s("exists"), "v": n("1")}, docAPITxWrite)
				wantItem(t, "reason 3 Item (not asked)", tce.CancellationReasons[3].Item, nil, docAPITxWrite)
				if m := aws.ToString(tce.CancellationReasons[1].Message); m != "The conditional request failed" {
					t.Errorf("reason 1 Message: got %q, want %q (doc %s)", m, "The conditional request failed", docAPITxWrite)
				}
			}
		}
		wantItem(t, "put of the cancelled transaction", p.get(tbl, item{"pk": s("new1")}), nil, docTxAPIs)
		wantItem(t, "update of the cancelled transaction", p.get(tbl, item{"pk": s("exists")}), item{"pk": s("exists"), "v": n("1")}, docTxAPIs)
		wantItem(t, "delete of the cancelled transaction", p.get(tbl, item{"pk": s("del")}), item{"pk": s("del"), "v": n("1")}, docTxAPIs)
	})
	t.Run("a transaction that passes writes everything", func(t *testing.T) {
		_, err := p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(tbl), Item: item{"pk": s("new1")}, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
			{Update: &types.Update{TableName: aws.String(tbl), Key: item{"pk": s("exists")}, UpdateExpression: aws.String("SET v = :two"),
				ConditionExpression: aws.String("v = :one"), ExpressionAttributeValues: item{":two": n("2"), ":one": n("1")}}},
			{Delete: &types.Delete{TableName: aws.String(tbl), Key: item{"pk": s("del")}}},
			{Put: &types.Put{TableName: aws.String(other), Item: item{"id": n("1")}}},
			{ConditionCheck: &types.ConditionCheck{TableName: aws.String(tbl), Key: item{"pk": s("nothing")}, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		}})
		if !wantOK(t, "transaction", err, docAPITxWrite) {
			return
		}
		wantItem(t, "put", p.get(tbl, item{"pk": s("new1")}), item{"pk": s("new1")}, docTxAPIs)
		wantItem(t, "update", p.get(tbl, item{"pk": s("exists")}), item{"pk": s("exists"), "v": n("2")}, docTxAPIs)
		wantItem(t, "delete", p.get(tbl, item{"pk": s("del")}), nil, docTxAPIs)
		wantItem(t, "put in the other table", p.get(other, item{"id": n("1")}), item{"id": n("1")}, docTxAPIs)
	})
	t.Run("TransactGetItems in request order", func(t *testing.T) {
		out, err := p.c.TransactGetItems(p.ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
			{Get: &types.Get{TableName: aws.String(tbl), Key: item{"pk": s("exists")}}},
			{Get: &types.Get{TableName: aws.String(tbl), Key: item{"pk": s("missing")}}},
			{Get: &types.Get{TableName: aws.String(other), Key: item{"id": n("1")}, ProjectionExpression: aws.String("id")}},
		}})
		if !wantOK(t, "TransactGetItems", err, docAPITxGet) {
			return
		}
		if len(out.Responses) != 3 {
			t.Fatalf("TransactGetItems: got %d responses, want 3 (doc %s)", len(out.Responses), docAPITxGet)
		}
		wantItem(t, "response 0", out.Responses[0].Item, item{"pk": s("exists"), "v": n("2")}, docAPITxGet)
		wantItem(t, "response 1 (missing item)", out.Responses[1].Item, nil, docAPITxGet)
		wantItem(t, "response 2", out.Responses[2].Item, item{"id": n("1")}, docAPITxGet)
	})
	t.Run("condition on a key of the wrong type is a validation error", func(t *testing.T) {
		_, err := p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(tbl), Item: item{"pk": n("1")}}},
		}})
		code, _ := apiErr(err)
		if code != "ValidationException" && code != "TransactionCanceledException" {
			t.Errorf("Put with a key of the wrong type: got %s, want ValidationException (or a ValidationError cancellation) (doc %s)", code, docAPITxWrite)
		}
	})
}

// TestParityClientRequestToken: "A client request token is valid for 10 minutes after
// the first request that uses it is completed. After 10 minutes, any request with the
// same client token is treated as a new request." Same token, other parameters, inside
// the window: IdempotentParameterMismatchException.
func TestParityClientRequestToken(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{})
	tx := func(token, v string) error {
		_, err := p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String(token),
			TransactItems: []types.TransactWriteItem{
				{Update: &types.Update{TableName: aws.String(tbl), Key: item{"pk": s("k")},
					UpdateExpression: aws.String("SET v = :v ADD n :one"), ExpressionAttributeValues: item{":v": s(v), ":one": n("1")}}},
			}})
		return err
	}
	if !wantOK(t, "first call", tx("token-1", "a"), docAPITxWrite) {
		return
	}
	wantItem(t, "after first call", p.get(tbl, item{"pk": s("k")}), item{"pk": s("k"), "v": s("a"), "n": n("1")}, docAPITxWrite)

	p.clock.Advance(9 * time.Minute)
	wantOK(t, "repeat inside 10 minutes", tx("token-1", "a"), docAPITxWrite)
	wantItem(t, "after the repeat (no second effect)", p.get(tbl, item{"pk": s("k")}), item{"pk": s("k"), "v": s("a"), "n": n("1")}, docAPITxWrite)

	wantErr(t, "same token, other parameters", tx("token-1", "b"), "IdempotentParameterMismatchException", docAPITxWrite)
	wantItem(t, "after the mismatch", p.get(tbl, item{"pk": s("k")}), item{"pk": s("k"), "v": s("a"), "n": n("1")}, docAPITxWrite)

	wantOK(t, "another token", tx("token-2", "a"), docAPITxWrite)
	wantItem(t, "after another token", p.get(tbl, item{"pk": s("k")}), item{"pk": s("k"), "v": s("a"), "n": n("2")}, docAPITxWrite)

	p.clock.Advance(2 * time.Minute) // 11 minutes after token-1 completed
	wantOK(t, "repeat after 10 minutes", tx("token-1", "a"), docAPITxWrite)
	wantItem(t, "after the window (a new request)", p.get(tbl, item{"pk": s("k")}), item{"pk": s("k"), "v": s("a"), "n": n("3")}, docAPITxWrite)

	wantOK(t, "other parameters after the window", tx("token-3", "z"), docAPITxWrite)
}

// TestParityIsolation: concurrent transfers between two items never show a reader a
// half-done transfer (serializable isolation of TransactWriteItems against
// TransactGetItems), and concurrent ADDs lose no update. Run with -race.
func TestParityIsolation(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{})
	p.put(tbl, item{"pk": s("A"), "bal": n("1000")})
	p.put(tbl, item{"pk": s("B"), "bal": n("1000")})
	p.put(tbl, item{"pk": s("ctr"), "n": n("0")})

	const writers, transfers, adders, adds = 4, 25, 4, 25
	var wg sync.WaitGroup
	errs := make(chan string, 1000)
	stop := make(chan struct{})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < transfers; i++ {
				from, to := "A", "B"
				if (w+i)%2 == 1 {
					from, to = "B", "A"
				}
				_, err := p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
					{Update: &types.Update{TableName: aws.String(tbl), Key: item{"pk": s(from)}, UpdateExpression: aws.String("SET bal = bal - :x"),
						ConditionExpression: aws.String("bal >= :x"), ExpressionAttributeValues: item{":x": n("7")}}},
					{Update: &types.Update{TableName: aws.String(tbl), Key: item{"pk": s(to)}, UpdateExpression: aws.String("SET bal = bal + :x"),
						ExpressionAttributeValues: item{":x": n("7")}}},
				}})
				if code, msg := apiErr(err); code != "" && code != "TransactionCanceledException" {
					errs <- fmt.Sprintf("transfer: %s: %s", code, msg)
				}
			}
		}(w)
	}
	for a := 0; a < adders; a++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < adds; i++ {
				_, err := p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: item{"pk": s("ctr")},
					UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: item{":one": n("1")}})
				if err != nil {
					code, msg := apiErr(err)
					errs <- fmt.Sprintf("ADD: %s: %s", code, msg)
				}
			}
		}()
	}
	var readerWG sync.WaitGroup
	readerWG.Add(1)
	reads := 0
	go func() {
		defer readerWG.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			out, err := p.c.TransactGetItems(p.ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
				{Get: &types.Get{TableName: aws.String(tbl), Key: item{"pk": s("A")}}},
				{Get: &types.Get{TableName: aws.String(tbl), Key: item{"pk": s("B")}}},
			}})
			if err != nil {
				if code, _ := apiErr(err); code == "TransactionCanceledException" {
					continue // AWS may cancel a read that conflicts with a write in flight
				}
				code, msg := apiErr(err)
				errs <- fmt.Sprintf("TransactGetItems: %s: %s", code, msg)
				return
			}
			reads++
			a, _ := strconv.Atoi(numOf(out.Responses[0].Item["bal"]))
			b, _ := strconv.Atoi(numOf(out.Responses[1].Item["bal"]))
			if a+b != 2000 {
				errs <- fmt.Sprintf("TransactGetItems saw A=%d B=%d: sum %d, want 2000", a, b, a+b)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	readerWG.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("%s (doc %s)", e, docTxAPIs)
	}
	wantItem(t, "counter after concurrent ADDs", p.get(tbl, item{"pk": s("ctr")}), item{"pk": s("ctr"), "n": n(strconv.Itoa(adders * adds))}, docAPIUpdate)
	a, _ := strconv.Atoi(numOf(p.get(tbl, item{"pk": s("A")})["bal"]))
	b, _ := strconv.Atoi(numOf(p.get(tbl, item{"pk": s("B")})["bal"]))
	if a+b != 2000 {
		t.Errorf("after the transfers: got A+B = %d, want 2000 (doc %s)", a+b, docTxAPIs)
	}
	if reads == 0 {
		t.Errorf("isolation: got no successful TransactGetItems during the transfers, want some (the check would be vacuous) (doc %s)", docTxAPIs)
	}
	t.Logf("isolation: %d consistent transactional reads during %d transfers", reads, writers*transfers)
}

func numOf(v types.AttributeValue) string {
	if x, ok := v.(*types.AttributeValueMemberN); ok {
		return x.Value
	}
	return "NaN"
}

// TestParityTransactionConflict: with Options.Conflicts, transactions racing on one
// item fail as AWS's do: "an item within a TransactWriteItems request is part of another
// ongoing TransactWriteItems request" cancels it with reason TransactionConflict, and a
// plain write to an item an ongoing transaction holds fails with
// TransactionConflictException. No success is lost.
func TestParityTransactionConflict(t *testing.T) {
	p := newParity(t, ddb.Options{Conflicts: true, ConflictWindow: 30 * time.Millisecond})
	tbl := p.table(tableSpec{})
	p.put(tbl, item{"pk": s("hot"), "n": n("0")})

	const racers = 6
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	okCount := 0
	for r := 0; r < racers; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				var err error
				if r%3 == 2 {
					_, err = p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: item{"pk": s("hot")},
						UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: item{":one": n("1")}})
				} else {
					_, err = p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
						{Update: &types.Update{TableName: aws.String(tbl), Key: item{"pk": s("hot")}, UpdateExpression: aws.String("ADD n :one"),
							ExpressionAttributeValues: item{":one": n("1")}}},
						{Put: &types.Put{TableName: aws.String(tbl), Item: item{"pk": s(fmt.Sprintf("side-%d-%d", r, i))}}},
					}})
				}
				mu.Lock()
				var tce *types.TransactionCanceledException
				switch {
				case err == nil:
					okCount++
				case asTCE(err, &tce):
					codes["TransactionCanceledException:"+strings.Join(reasonCodes(tce), ",")]++
				default:
					code, _ := apiErr(err)
					codes[code]++
				}
				mu.Unlock()
			}
		}(r)
	}
	wg.Wait()
	t.Logf("conflict outcomes: %d ok, %v", okCount, codes)
	conflicts := 0
	for k, c := range codes {
		switch {
		case k == "TransactionCanceledException:TransactionConflict,None" || k == "TransactionCanceledException:TransactionConflict,TransactionConflict":
			conflicts += c
		case k == "TransactionConflictException":
			conflicts += c
		default:
			t.Errorf("racing writes: got outcome %s ×%d, want success, a TransactionConflict cancellation or TransactionConflictException (doc %s)", k, c, docTxAPIs)
		}
	}
	if conflicts == 0 {
		t.Errorf("racing writes on one item with Conflicts on: got no conflicts in %d attempts, want at least one (doc %s)", racers*3, docTxAPIs)
	}
	wantItem(t, "hot item after the race", p.get(tbl, item{"pk": s("hot")}), item{"pk": s("hot"), "n": n(strconv.Itoa(okCount))}, docTxAPIs)
}

// TestParityTransactionInProgress: a repeat of a TransactWriteItems (same
// ClientRequestToken) while the first is still running fails with
// TransactionInProgressException ("The transaction with the given request token is
// already in progress"); once the first completes, repeats succeed without effect.
func TestParityTransactionInProgress(t *testing.T) {
	p := newParity(t, ddb.Options{Conflicts: true, ConflictWindow: 300 * time.Millisecond})
	tbl := p.table(tableSpec{})
	in := &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String("slow-token"), TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: aws.String(tbl), Key: item{"pk": s("k")}, UpdateExpression: aws.String("ADD n :one"),
			ExpressionAttributeValues: item{":one": n("1")}}},
	}}
	// Identical requests race: whichever the server sees first runs (300 ms, its
	// conflict window); the others arrive while it runs.
	first := make(chan error, 1)
	go func() {
		_, err := p.c.TransactWriteItems(p.ctx, in)
		first <- err
	}()
	outcomes := map[string]int{}
	record := func(err error) {
		code, _ := apiErr(err)
		if code == "" {
			code = "success"
		}
		outcomes[code]++
	}
	deadline := time.Now().Add(10 * time.Second)
	for done := false; !done && time.Now().Before(deadline); {
		select {
		case err := <-first:
			record(err)
			done = true
			continue
		default:
		}
		_, err := p.c.TransactWriteItems(p.ctx, in)
		record(err)
	}
	t.Logf("identical requests while one ran: %v", outcomes)
	for code, c := range outcomes {
		if code != "success" && code != "TransactionInProgressException" {
			t.Errorf("identical requests: got %s ×%d, want only success and TransactionInProgressException (doc %s)", code, c, docAPITxWrite)
		}
	}
	if outcomes["success"] == 0 || outcomes["TransactionInProgressException"] == 0 {
		t.Errorf("identical requests while one ran: got %v, want a success and some TransactionInProgressException (doc %s)", outcomes, docAPITxWrite)
	}
	_, err := p.c.TransactWriteItems(p.ctx, in)
	wantOK(t, "repeat after the first completed", err, docAPITxWrite)
	wantItem(t, "item after the first and its repeats", p.get(tbl, item{"pk": s("k")}), item{"pk": s("k"), "n": n("1")}, docAPITxWrite)
}
