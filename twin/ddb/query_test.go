package ddb

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// sks returns the sort keys of items, in order.
func sks(t testing.TB, items []map[string]av) []string {
	t.Helper()
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = strOf(t, it["sk"])
	}
	return out
}

func seq(from, to int) []string {
	var out []string
	if from <= to {
		for i := from; i <= to; i++ {
			out = append(out, fmt.Sprint(i))
		}
	} else {
		for i := from; i >= to; i-- {
			out = append(out, fmt.Sprint(i))
		}
	}
	return out
}

// queryAll pages through a query (following LastEvaluatedKey) and returns every item.
func (e *dpEnv) queryAll(t testing.TB, in dynamodb.QueryInput) (items []map[string]av, pages int) {
	t.Helper()
	for {
		out, err := e.c.Query(context.Background(), &in)
		if err != nil {
			t.Fatalf("Query: %v", err)
		}
		pages++
		items = append(items, out.Items...)
		if out.LastEvaluatedKey == nil {
			return items, pages
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

func TestQueryKeyConditions(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "qkc", tableSpec{sk: types.ScalarAttributeTypeN})
	for i := 1; i <= 30; i++ {
		e.put(t, "qkc", map[string]av{"pk": s("a"), "sk": ni(i), "odd": &types.AttributeValueMemberBOOL{Value: i%2 == 1}})
		e.put(t, "qkc", map[string]av{"pk": s("b"), "sk": ni(i)})
	}
	e.put(t, "qkc", map[string]av{"pk": s("a"), "sk": n("-5")})
	e.put(t, "qkc", map[string]av{"pk": s("a"), "sk": n("2.5")})
	vals := map[string]av{":p": s("a"), ":x": n("10"), ":y": n("12")}
	cases := []struct {
		cond    string
		forward bool
		want    []string
	}{
		{"pk = :p AND sk = :x", true, []string{"10"}},
		{"sk = :x AND pk = :p", true, []string{"10"}}, // two equalities, sort key first
		{"(sk = :x) AND (pk = :p)", false, []string{"10"}},
		{"pk = :p AND sk < :x", true, append([]string{"-5", "1", "2", "2.5"}, seq(3, 9)...)},
		{"pk = :p AND sk <= :x", false, append(seq(10, 3), "2.5", "2", "1", "-5")},
		{"pk = :p AND sk > :y", true, seq(13, 30)},
		{"pk = :p AND sk >= :y", false, seq(30, 12)},
		{"pk = :p AND sk BETWEEN :x AND :y", true, seq(10, 12)},
		{"pk = :p AND sk BETWEEN :x AND :y", false, seq(12, 10)},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/forward=%v", c.cond, c.forward), func(t *testing.T) {
			used := map[string]av{":p": vals[":p"]}
			for _, k := range []string{":x", ":y"} {
				if strings.Contains(c.cond, k) {
					used[k] = vals[k]
				}
			}
			items, _ := e.queryAll(t, dynamodb.QueryInput{TableName: aws.String("qkc"), KeyConditionExpression: aws.String(c.cond),
				ExpressionAttributeValues: used, ScanIndexForward: aws.Bool(c.forward)})
			if got := sks(t, items); strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
	// Without a sort-key condition, the whole partition in order, other partitions untouched.
	items, _ := e.queryAll(t, dynamodb.QueryInput{TableName: aws.String("qkc"), KeyConditionExpression: aws.String("pk = :p"), ExpressionAttributeValues: map[string]av{":p": s("b")}})
	if got := sks(t, items); strings.Join(got, ",") != strings.Join(seq(1, 30), ",") {
		t.Fatalf("partition b: got %v", got)
	}
	// Missing key schema element, wrong type; two equalities on the sort key's name are no swap.
	_, err := e.c.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String("qkc"), KeyConditionExpression: aws.String("sk = :x AND odd = :p"), ExpressionAttributeValues: map[string]av{":x": n("1"), ":p": s("a")}})
	wantCode(t, err, "ValidationException", "Query condition missed key schema element: pk")
	_, err = e.c.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String("qkc"), KeyConditionExpression: aws.String("sk = :x"), ExpressionAttributeValues: map[string]av{":x": n("1")}})
	wantCode(t, err, "ValidationException", "Query condition missed key schema element: pk")
	_, err = e.c.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String("qkc"), KeyConditionExpression: aws.String("pk = :x"), ExpressionAttributeValues: map[string]av{":x": n("1")}})
	wantCode(t, err, "ValidationException", "Condition parameter type does not match schema type")
}

func TestQueryBeginsWith(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "bwt", tableSpec{sk: types.ScalarAttributeTypeS})
	for _, k := range []string{"a", "ab", "abc", "abd", "ac", "b", "abz", "aa"} {
		e.put(t, "bwt", map[string]av{"pk": s("p"), "sk": s(k)})
	}
	for _, fwd := range []bool{true, false} {
		items, _ := e.queryAll(t, dynamodb.QueryInput{TableName: aws.String("bwt"), KeyConditionExpression: aws.String("pk = :p AND begins_with(sk, :b)"),
			ExpressionAttributeValues: map[string]av{":p": s("p"), ":b": s("ab")}, ScanIndexForward: aws.Bool(fwd)})
		want := []string{"ab", "abc", "abd", "abz"}
		if !fwd {
			want = []string{"abz", "abd", "abc", "ab"}
		}
		if got := sks(t, items); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("forward=%v: got %v, want %v", fwd, got, want)
		}
	}
}

func TestQueryPagingLimitFilterSelect(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "pgt", tableSpec{sk: types.ScalarAttributeTypeN})
	for i := 1; i <= 25; i++ {
		e.put(t, "pgt", map[string]av{"pk": s("a"), "sk": ni(i), "odd": &types.AttributeValueMemberBOOL{Value: i%2 == 1}})
	}
	ctx := context.Background()
	for _, fwd := range []bool{true, false} {
		items, pages := e.queryAll(t, dynamodb.QueryInput{TableName: aws.String("pgt"), KeyConditionExpression: aws.String("pk = :p"),
			ExpressionAttributeValues: map[string]av{":p": s("a")}, Limit: aws.Int32(7), ScanIndexForward: aws.Bool(fwd)})
		want := seq(1, 25)
		if !fwd {
			want = seq(25, 1)
		}
		if got := sks(t, items); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("forward=%v: got %v", fwd, got)
		}
		if pages != 4 {
			t.Fatalf("forward=%v: %d pages, want 4 (7+7+7+4)", fwd, pages)
		}
	}
	// Limit counts items read before the filter: 10 read, 5 kept.
	out, err := e.c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("pgt"), KeyConditionExpression: aws.String("pk = :p"),
		FilterExpression: aws.String("odd = :t"), ExpressionAttributeValues: map[string]av{":p": s("a"), ":t": &types.AttributeValueMemberBOOL{Value: true}},
		Limit: aws.Int32(10)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Count != 5 || out.ScannedCount != 10 || strOf(t, out.LastEvaluatedKey["sk"]) != "10" {
		t.Fatalf("filter+limit: Count %d ScannedCount %d LEK %v", out.Count, out.ScannedCount, out.LastEvaluatedKey)
	}
	// A Limit that ends exactly at the last item still returns LastEvaluatedKey; the next page is empty.
	out, err = e.c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("pgt"), KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]av{":p": s("a")}, Limit: aws.Int32(25)})
	if err != nil || out.LastEvaluatedKey == nil {
		t.Fatalf("limit at the end: err %v, LEK %v", err, out.LastEvaluatedKey)
	}
	out, err = e.c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("pgt"), KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]av{":p": s("a")}, Limit: aws.Int32(25), ExclusiveStartKey: out.LastEvaluatedKey})
	if err != nil || out.Count != 0 || out.LastEvaluatedKey != nil {
		t.Fatalf("after the end: err %v, count %d, LEK %v", err, out.Count, out.LastEvaluatedKey)
	}
	// Select COUNT.
	out, err = e.c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("pgt"), KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]av{":p": s("a")}, Select: types.SelectCount})
	if err != nil || out.Count != 25 || out.Items != nil {
		t.Fatalf("COUNT: err %v, count %d, items %v", err, out.Count, out.Items)
	}
	// ProjectionExpression.
	out, err = e.c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("pgt"), KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]av{":p": s("a")}, ProjectionExpression: aws.String("sk"), Limit: aws.Int32(1)})
	if err != nil || len(out.Items) != 1 || len(out.Items[0]) != 1 {
		t.Fatalf("projection: err %v, items %v", err, out.Items)
	}
}

// TestQueryOneMegabytePage: a page stops once it has read 1 MB.
func TestQueryOneMegabytePage(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "mbt", tableSpec{sk: types.ScalarAttributeTypeN})
	blob := strings.Repeat("z", 100*1024)
	for i := 1; i <= 25; i++ {
		e.put(t, "mbt", map[string]av{"pk": s("a"), "sk": ni(i), "blob": s(blob)})
	}
	out, err := e.c.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String("mbt"), KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]av{":p": s("a")}, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	// Each item is 102,400 + 12 bytes; 1 MB is reached with the 11th.
	if out.Count != 11 || out.LastEvaluatedKey == nil {
		t.Fatalf("page: %d items, LEK %v; want 11 and a LEK", out.Count, out.LastEvaluatedKey)
	}
	size := 11 * (102400 + len("pk") + 1 + len("sk") + 2 + len("blob"))
	if want := float64((size + 4095) / 4096); aws.ToFloat64(out.ConsumedCapacity.CapacityUnits) != want {
		t.Fatalf("capacity: got %v, want %v", aws.ToFloat64(out.ConsumedCapacity.CapacityUnits), want)
	}
	items, pages := e.queryAll(t, dynamodb.QueryInput{TableName: aws.String("mbt"), KeyConditionExpression: aws.String("pk = :p"), ExpressionAttributeValues: map[string]av{":p": s("a")}})
	if len(items) != 25 || pages != 3 {
		t.Fatalf("all pages: %d items in %d pages, want 25 in 3", len(items), pages)
	}
}

func TestQueryIndexes(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "ixt", tableSpec{sk: types.ScalarAttributeTypeN, gsiProj: types.ProjectionTypeInclude, lsi: true})
	ctx := context.Background()
	for i := 1; i <= 12; i++ {
		it := map[string]av{"pk": s(fmt.Sprint("p", i%3)), "sk": ni(i), "inc": s("in"), "exc": s("out"), "l1": s(fmt.Sprintf("l%02d", 20-i))}
		if i != 5 {
			it["g1"] = s("g")
			it["g2"] = ni(i % 4) // equal index keys: ordered by the table key
		}
		e.put(t, "ixt", it)
	}
	items, _ := e.queryAll(t, dynamodb.QueryInput{TableName: aws.String("ixt"), IndexName: aws.String("gsi"), KeyConditionExpression: aws.String("g1 = :g"),
		ExpressionAttributeValues: map[string]av{":g": s("g")}, Limit: aws.Int32(2)})
	if len(items) != 11 {
		t.Fatalf("GSI: %d items, want 11 (item 5 lacks the index key)", len(items))
	}
	var got []string
	for _, it := range items {
		if it["exc"] != nil || it["inc"] == nil {
			t.Fatalf("GSI projection INCLUDE inc: got %v", it)
		}
		got = append(got, strOf(t, it["g2"])+"/"+strOf(t, it["pk"])+"/"+strOf(t, it["sk"]))
	}
	if !sort.SliceIsSorted(got, func(i, j int) bool { return got[i] < got[j] }) {
		t.Fatalf("GSI order: %v", got)
	}
	// Two equalities with the index's sort key written first (equal index keys: table key order, p0 p1 p2).
	items, _ = e.queryAll(t, dynamodb.QueryInput{TableName: aws.String("ixt"), IndexName: aws.String("gsi"), KeyConditionExpression: aws.String("g2 = :n AND g1 = :g"),
		ExpressionAttributeValues: map[string]av{":g": s("g"), ":n": ni(2)}})
	got = got[:0]
	for _, it := range items {
		got = append(got, strOf(t, it["sk"]))
	}
	if want := "6,10,2"; strings.Join(got, ",") != want {
		t.Fatalf("GSI g2 = 2 AND g1 = g: got sort keys %v, want %s", got, want)
	}
	_, err := e.c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("ixt"), IndexName: aws.String("gsi"), KeyConditionExpression: aws.String("g1 = :g"),
		ExpressionAttributeValues: map[string]av{":g": s("g")}, ConsistentRead: aws.Bool(true)})
	wantCode(t, err, "ValidationException", "Consistent reads are not supported on global secondary indexes")
	_, err = e.c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("ixt"), IndexName: aws.String("gsi"), KeyConditionExpression: aws.String("g1 = :g"),
		ExpressionAttributeValues: map[string]av{":g": s("g")}, Select: types.SelectAllAttributes})
	wantCode(t, err, "ValidationException", "ALL_ATTRIBUTES")
	_, err = e.c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("ixt"), IndexName: aws.String("nope"), KeyConditionExpression: aws.String("g1 = :g"),
		ExpressionAttributeValues: map[string]av{":g": s("g")}})
	wantCode(t, err, "ValidationException", "The table does not have the specified index: nope")

	// LSI, KEYS_ONLY, backwards, ALL_ATTRIBUTES fetches the whole item.
	items, _ = e.queryAll(t, dynamodb.QueryInput{TableName: aws.String("ixt"), IndexName: aws.String("lsi"), KeyConditionExpression: aws.String("pk = :p AND l1 < :l"),
		ExpressionAttributeValues: map[string]av{":p": s("p0"), ":l": s("l15")}, ScanIndexForward: aws.Bool(false), Limit: aws.Int32(1)})
	if len(items) != 3 || len(items[0]) != 3 || strOf(t, items[0]["l1"]) != "l14" {
		t.Fatalf("LSI: got %v", items)
	}
	items, _ = e.queryAll(t, dynamodb.QueryInput{TableName: aws.String("ixt"), IndexName: aws.String("lsi"), KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]av{":p": s("p0")}, Select: types.SelectAllAttributes})
	if len(items) != 4 || items[0]["exc"] == nil {
		t.Fatalf("LSI ALL_ATTRIBUTES: got %v", items)
	}
	// Index entries follow updates and deletes.
	if _, err := e.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("ixt"), Key: map[string]av{"pk": s("p1"), "sk": ni(1)},
		UpdateExpression: aws.String("REMOVE g1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("ixt"), Key: map[string]av{"pk": s("p2"), "sk": ni(2)}}); err != nil {
		t.Fatal(err)
	}
	items, _ = e.queryAll(t, dynamodb.QueryInput{TableName: aws.String("ixt"), IndexName: aws.String("gsi"), KeyConditionExpression: aws.String("g1 = :g"),
		ExpressionAttributeValues: map[string]av{":g": s("g")}})
	if len(items) != 9 {
		t.Fatalf("GSI after update and delete: %d items, want 9", len(items))
	}
}

func TestScanSegmentsAndPaging(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "sct", tableSpec{sk: types.ScalarAttributeTypeN})
	const total = 200
	for i := 0; i < total; i++ {
		e.put(t, "sct", map[string]av{"pk": s(fmt.Sprint("p", i%37)), "sk": ni(i)})
	}
	seen := map[string]int{}
	for seg := 0; seg < 4; seg++ {
		in := &dynamodb.ScanInput{TableName: aws.String("sct"), Segment: aws.Int32(int32(seg)), TotalSegments: aws.Int32(4), Limit: aws.Int32(9)}
		for {
			out, err := e.c.Scan(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range out.Items {
				seen[strOf(t, it["sk"])]++
			}
			if out.LastEvaluatedKey == nil {
				break
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
	if len(seen) != total {
		t.Fatalf("segments saw %d distinct items, want %d", len(seen), total)
	}
	for k, c := range seen {
		if c != 1 {
			t.Fatalf("item %s seen %d times", k, c)
		}
	}
	out, err := e.c.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String("sct"), FilterExpression: aws.String("sk < :x"),
		ExpressionAttributeValues: map[string]av{":x": n("10")}, Select: types.SelectCount})
	if err != nil || out.Count != 10 || out.ScannedCount != total {
		t.Fatalf("scan count: err %v, Count %d, ScannedCount %d", err, out.Count, out.ScannedCount)
	}
	_, err = e.c.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String("sct"), Segment: aws.Int32(4), TotalSegments: aws.Int32(4)})
	wantCode(t, err, "ValidationException", "Segment")
}

func TestQueryFilterOnKeyRefused(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "fk1", tableSpec{sk: types.ScalarAttributeTypeN})
	ctx := context.Background()
	_, err := e.c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("fk1"), KeyConditionExpression: aws.String("pk = :p"),
		FilterExpression: aws.String("#s > :v"), ExpressionAttributeNames: map[string]string{"#s": "sk"}, ExpressionAttributeValues: map[string]av{":p": s("a"), ":v": n("1")}})
	wantCode(t, err, "ValidationException", "Filter Expression can only contain non-primary key attributes: Primary key attribute: sk")
	// A nested member that happens to share a key's name is fine, and Scan may filter on keys.
	if _, err := e.c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("fk1"), KeyConditionExpression: aws.String("pk = :p"),
		FilterExpression: aws.String("m.sk > :v"), ExpressionAttributeValues: map[string]av{":p": s("a"), ":v": n("1")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("fk1"), FilterExpression: aws.String("sk > :v"), ExpressionAttributeValues: map[string]av{":v": n("1")}}); err != nil {
		t.Fatal(err)
	}
}
