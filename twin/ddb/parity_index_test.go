package ddb_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/twin/ddb"
)

const (
	docLSI        = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/LSI.html"
	docGSI        = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html"
	docSparse     = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-indexes-general-sparse-indexes.html"
	docParallelSc = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Scan.html#DDB-Scan-request-Segment"
)

// TestParitySecondaryIndex: a global secondary index is sparse (items without its key
// are not in it), sorted by its own sort key, projects what its projection says, and
// refuses strongly consistent reads.
func TestParitySecondaryIndex(t *testing.T) {
	p := newParity(t, ddb.Options{})
	name := fmt.Sprintf("parity-%d-gsi", tableSeq.Add(1))
	_, err := p.c.CreateTable(p.ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		KeySchema:   []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("gs"), AttributeType: types.ScalarAttributeTypeN},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			{IndexName: aws.String("by-g"), KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("gs"), KeyType: types.KeyTypeRange}},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}},
			{IndexName: aws.String("by-g-all"), KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("gs"), KeyType: types.KeyTypeRange}},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}},
		},
	})
	if err != nil {
		code, msg := apiErr(err)
		t.Fatalf("CreateTable with GSIs: %s: %s", code, msg)
	}
	t.Cleanup(func() { _, _ = p.c.DeleteTable(p.ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}) })
	for i, gs := range []string{"30", "-2", "100", "7"} {
		p.put(name, item{"pk": s("i" + strconv.Itoa(i)), "g": s("G"), "gs": n(gs), "other": s("o")})
	}
	p.put(name, item{"pk": s("no-g"), "gs": n("1"), "other": s("o")}) // not in the index: no g
	p.put(name, item{"pk": s("no-gs"), "g": s("G"), "other": s("o")}) // not in the index: no gs

	out, err := p.c.Query(p.ctx, &dynamodb.QueryInput{TableName: aws.String(name), IndexName: aws.String("by-g"),
		KeyConditionExpression: aws.String("g = :g"), ExpressionAttributeValues: item{":g": s("G")}})
	if wantOK(t, "Query by-g", err, docGSI) {
		var got []string
		for _, it := range out.Items {
			got = append(got, render(it))
		}
		var want []string
		for _, w := range []struct{ pk, gs string }{{"i1", "-2"}, {"i3", "7"}, {"i0", "30"}, {"i2", "100"}} {
			want = append(want, render(item{"pk": s(w.pk), "g": s("G"), "gs": n(w.gs)}))
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("Query KEYS_ONLY index: got %v, want %v (sparse, in gs order, keys only) (docs %s, %s)", got, want, docGSI, docSparse)
		}
	}
	out, err = p.c.Query(p.ctx, &dynamodb.QueryInput{TableName: aws.String(name), IndexName: aws.String("by-g-all"),
		KeyConditionExpression: aws.String("g = :g AND gs > :z"), ExpressionAttributeValues: item{":g": s("G"), ":z": n("0")},
		ScanIndexForward: aws.Bool(false), Limit: aws.Int32(2)})
	if wantOK(t, "Query by-g-all", err, docGSI) {
		if len(out.Items) != 2 {
			t.Errorf("Query ALL index Limit 2: got %d items, want 2 (doc %s)", len(out.Items), docGSI)
		} else {
			wantItem(t, "first item of ALL index backwards", out.Items[0], item{"pk": s("i2"), "g": s("G"), "gs": n("100"), "other": s("o")}, docGSI)
		}
		// A GSI's LastEvaluatedKey carries the index keys and the table keys.
		wantItem(t, "index LastEvaluatedKey", out.LastEvaluatedKey, item{"pk": s("i0"), "g": s("G"), "gs": n("30")}, docGSI)
	}
	_, err = p.c.Query(p.ctx, &dynamodb.QueryInput{TableName: aws.String(name), IndexName: aws.String("by-g"),
		KeyConditionExpression: aws.String("g = :g"), ExpressionAttributeValues: item{":g": s("G")}, ConsistentRead: aws.Bool(true)})
	wantErr(t, "strongly consistent Query of a GSI", err, "ValidationException", docGSI, "Consistent reads are not supported on global secondary indexes")

	// Deleting and changing items moves them out of the index.
	_, err = p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(name), Key: item{"pk": s("i0")},
		UpdateExpression: aws.String("REMOVE g")})
	wantOK(t, "REMOVE the index key", err, docSparse)
	_, err = p.c.DeleteItem(p.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(name), Key: item{"pk": s("i1")}})
	wantOK(t, "DeleteItem", err, docAPIDelete)
	out, err = p.c.Query(p.ctx, &dynamodb.QueryInput{TableName: aws.String(name), IndexName: aws.String("by-g"),
		KeyConditionExpression: aws.String("g = :g"), ExpressionAttributeValues: item{":g": s("G")}})
	if wantOK(t, "Query by-g after changes", err, docGSI) && out.Count != 2 {
		t.Errorf("index after REMOVE g and DeleteItem: got %d items, want 2 (doc %s)", out.Count, docSparse)
	}
	_, err = p.c.Query(p.ctx, &dynamodb.QueryInput{TableName: aws.String(name), IndexName: aws.String("no-such-index"),
		KeyConditionExpression: aws.String("g = :g"), ExpressionAttributeValues: item{":g": s("G")}})
	wantErr(t, "Query of a missing index", err, "ValidationException", docGSI, "no-such-index")
	_, err = p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: item{"pk": s("bad"), "g": n("1")}})
	wantErr(t, "index key of the wrong type", err, "ValidationException", docGSI)
}

// TestParityScanSegments: a parallel scan's segments cover every item exactly once.
func TestParityScanSegments(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{})
	const total = 50
	for i := 0; i < total; i++ {
		p.put(tbl, item{"pk": s(fmt.Sprintf("item-%02d", i))})
	}
	seen := map[string]int{}
	for seg := int32(0); seg < 4; seg++ {
		in := &dynamodb.ScanInput{TableName: aws.String(tbl), Segment: aws.Int32(seg), TotalSegments: aws.Int32(4), Limit: aws.Int32(7)}
		if !p.scanPages(t, "Scan segment", in, 50, "pk", seen, docParallelSc) {
			return
		}
	}
	if len(seen) != total {
		t.Errorf("parallel scan: got %d distinct items, want %d (doc %s)", len(seen), total, docParallelSc)
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("parallel scan: %s seen %d times, want once (doc %s)", k, c, docParallelSc)
		}
	}
	_, err := p.c.Scan(p.ctx, &dynamodb.ScanInput{TableName: aws.String(tbl), Segment: aws.Int32(4), TotalSegments: aws.Int32(4)})
	wantErr(t, "Segment 4 of 4", err, "ValidationException", docParallelSc, "Segment")

	t.Run("Query of a missing partition", func(t *testing.T) {
		out, err := p.c.Query(p.ctx, &dynamodb.QueryInput{TableName: aws.String(tbl), KeyConditionExpression: aws.String("pk = :p"),
			ExpressionAttributeValues: item{":p": s("nothing-here")}})
		if wantOK(t, "Query", err, docAPIQuery) && (out.Count != 0 || len(out.Items) != 0 || len(out.LastEvaluatedKey) != 0) {
			t.Errorf("Query of a missing partition: got Count %d, %d items, LastEvaluatedKey %s; want 0, 0, none (doc %s)",
				out.Count, len(out.Items), render(out.LastEvaluatedKey), docAPIQuery)
		}
	})
}

// TestParityLocalSecondaryIndex: a local secondary index orders one partition by another
// sort key and, unlike a global one, serves strongly consistent reads.
func TestParityLocalSecondaryIndex(t *testing.T) {
	p := newParity(t, ddb.Options{})
	name := fmt.Sprintf("parity-%d-lsi", tableSeq.Add(1))
	// Its own CreateTable, like TestParitySecondaryIndex's on purpose: the schema is the case.
	_, err := p.c.CreateTable(p.ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("at"), AttributeType: types.ScalarAttributeTypeN},
		},
		LocalSecondaryIndexes: []types.LocalSecondaryIndex{{IndexName: aws.String("by-at"), KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("at"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}},
	})
	if err != nil {
		code, msg := apiErr(err)
		t.Fatalf("CreateTable with an LSI: %s: %s", code, msg)
	}
	t.Cleanup(func() { _, _ = p.c.DeleteTable(p.ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}) })
	for _, it := range []struct{ sk, at string }{{"a", "3"}, {"b", "-1"}, {"c", "2"}, {"d", ""}} {
		row := item{"pk": s("p"), "sk": s(it.sk)}
		if it.at != "" {
			row["at"] = n(it.at)
		}
		p.put(name, row)
	}
	out, err := p.c.Query(p.ctx, &dynamodb.QueryInput{TableName: aws.String(name), IndexName: aws.String("by-at"), ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :p AND #at >= :z"), ExpressionAttributeNames: map[string]string{"#at": "at"},
		ExpressionAttributeValues: item{":p": s("p"), ":z": n("-5")}})
	if !wantOK(t, "strongly consistent Query of an LSI", err, docLSI) {
		return
	}
	var got []string
	for _, it := range out.Items {
		got = append(got, strings.TrimPrefix(render(it["sk"]), "S"))
	}
	if g, w := strings.Join(got, " "), `"b" "c" "a"`; g != w {
		t.Errorf("LSI order: got %s, want %s (by at, sparse) (doc %s)", g, w, docLSI)
	}
}
