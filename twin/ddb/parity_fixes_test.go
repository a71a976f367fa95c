package ddb_test

// Cases of behaviours this server once got wrong, each as AWS documents it or (where
// the documentation says nothing) as public compatibility suites run against AWS
// observe it; the source is beside each case.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/fourlanes/fourlanes/twin/ddb"
)

const (
	docAPIUpdateTable = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateTable.html"
	docAPICreateTable = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_CreateTable.html"
	docAPIListStreams = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_streams_ListStreams.html"
	// scyllaSuite is the public compatibility suite (run against AWS) whose
	// observations back the cases AWS's documentation is silent on.
	scyllaSuite = "github.com/scylladb/scylladb test/alternator"
)

// rawCall posts body to the server as operation target (DynamoDB_20120810.X) and
// returns the HTTP status and the error type (after '#'), "" on success.
func (p *parity) rawCall(target string, body []byte) (int, string) {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", target)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s: %v", target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Type string `json:"__type"`
	}
	_ = json.Unmarshal(b, &e)
	typ := e.Type
	if i := strings.LastIndexByte(typ, '#'); i >= 0 {
		typ = typ[i+1:]
	}
	return resp.StatusCode, typ
}

func TestParityUpdateThatOnlyRemovesCreatesNothing(t *testing.T) {
	const doc = scyllaSuite + " test_item.py::test_update_item_non_existent"
	p := newParity(t, ddb.Options{})
	name := p.table(tableSpec{streamView: types.StreamViewTypeNewAndOldImages})
	for _, expr := range []string{"REMOVE a", "REMOVE a, b.c", "DELETE s :set"} {
		var vals item
		if strings.Contains(expr, ":set") {
			vals = item{":set": ss("x")}
		}
		out, err := p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(name), Key: item{"pk": s("gone")},
			UpdateExpression: aws.String(expr), ExpressionAttributeValues: vals, ReturnValues: types.ReturnValueAllNew})
		if !wantOK(t, expr, err, doc) {
			continue
		}
		if out.Attributes != nil {
			t.Errorf("%s of a missing item: ALL_NEW got %s, want nothing (doc %s)", expr, render(out.Attributes), doc)
		}
		if got := p.get(name, item{"pk": s("gone")}); got != nil {
			t.Errorf("%s of a missing item: got item %s, want none (doc %s)", expr, render(got), doc)
		}
	}
	// An update that sets something still creates the item, and it is the only
	// change the stream saw.
	_, err := p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(name), Key: item{"pk": s("made")},
		UpdateExpression: aws.String("SET a = :v REMOVE b"), ExpressionAttributeValues: item{":v": n("1")}})
	wantOK(t, "SET and REMOVE", err, docAPIUpdate)
	recs := p.readStream(p.streamArn(name))
	if len(recs) != 1 || recs[0].EventName != stypes.OperationTypeInsert {
		t.Errorf("stream: got %d records, want the one INSERT of the SET (doc %s)", len(recs), doc)
	}
}

func TestParityArithmeticInRange(t *testing.T) {
	const doc = scyllaSuite + " test_number.py::test_update_expression_plus_overflow"
	p := newParity(t, ddb.Options{})
	name := p.table(tableSpec{})
	set := func(a, b, op string) error {
		_, err := p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(name), Key: item{"pk": s("n")},
			UpdateExpression:          aws.String("SET b = :a " + op + " :b"),
			ExpressionAttributeValues: item{":a": n(a), ":b": n(b)}})
		return err
	}
	if wantOK(t, "9e125 + 9e124", set("9e125", "9e124", "+"), doc) {
		if got, want := render(p.get(name, item{"pk": s("n")})["b"]), render(n("99"+strings.Repeat("0", 124))); got != want {
			t.Errorf("9e125 + 9e124: got %s, want 9.9e125 (doc %s)", got, doc)
		}
	}
	wantOK(t, "1e-130 + 1e-130", set("1e-130", "1e-130", "+"), docDataTypes)
	wantErr(t, "9e125 + 9e125", set("9e125", "9e125", "+"), "ValidationException", doc, "Number overflow")
	wantErr(t, "9e125 - -9e125", set("9e125", "-9e125", "-"), "ValidationException", doc, "Number overflow")
	// A result needing more than 38 digits is refused too; AWS words it as an
	// overflow (test_update_expression_plus_imprecise).
	wantErr(t, "1e50 + 1", set("1e50", "1", "+"), "ValidationException", doc, "Number overflow")
}

func TestParityShardStartOfEmptyShard(t *testing.T) {
	const doc = scyllaSuite + " test_streams.py::test_get_shard_iterator, test_streams_starting_sequence_number"
	p := newParity(t, ddb.Options{})
	name := p.table(tableSpec{streamView: types.StreamViewTypeKeysOnly})
	arn := p.streamArn(name)
	sh := p.shards(arn)[0]
	start := sh.SequenceNumberRange.StartingSequenceNumber
	var at *string
	for _, typ := range []stypes.ShardIteratorType{stypes.ShardIteratorTypeAtSequenceNumber, stypes.ShardIteratorTypeAfterSequenceNumber} {
		out, err := p.s.GetShardIterator(p.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: sh.ShardId,
			ShardIteratorType: typ, SequenceNumber: start})
		if wantOK(t, string(typ)+" StartingSequenceNumber of an empty shard", err, doc) && typ == stypes.ShardIteratorTypeAtSequenceNumber {
			at = out.ShardIterator
		}
	}
	if at == nil {
		return
	}
	p.put(name, item{"pk": s("a")})
	p.put(name, item{"pk": s("b")})
	recs, err := p.s.GetRecords(p.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: at})
	if wantOK(t, "GetRecords from StartingSequenceNumber", err, doc) && len(recs.Records) != 2 {
		t.Errorf("GetRecords from StartingSequenceNumber: got %d records, want the 2 written since (doc %s)", len(recs.Records), doc)
	}
}

func TestParityTransactionKeyOfWrongType(t *testing.T) {
	const doc = scyllaSuite + " test_transact.py::test_transact_write_cancellation_reasons_validationerror"
	p := newParity(t, ddb.Options{})
	name := p.table(tableSpec{})
	_, err := p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(name), Item: item{"pk": n("7")}}},
		{Put: &types.Put{TableName: aws.String(name), Item: item{"pk": n("8")}}},
		{Put: &types.Put{TableName: aws.String(name), Item: item{"pk": s("p")}, ConditionExpression: aws.String("attribute_exists(pk)")}},
	}})
	var tce *types.TransactionCanceledException
	if !asTCE(err, &tce) {
		code, msg := apiErr(err)
		t.Fatalf("a Put with a key of the wrong type: got %s (%s), want TransactionCanceledException (doc %s)", code, msg, doc)
	}
	if got, want := strings.Join(reasonCodes(tce), ","), "ValidationError,None,None"; got != want {
		t.Errorf("reasons: got %s, want %s (doc %s)", got, want, doc)
	}
	if tce.CancellationReasons[0].Message == nil || tce.CancellationReasons[1].Message != nil {
		t.Errorf("reason messages: want one on the ValidationError only (doc %s)", doc)
	}
	// A Delete's key of the wrong type cancels the same way.
	_, err = p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Delete: &types.Delete{TableName: aws.String(name), Key: item{"pk": bin(1)}}},
	}})
	if !asTCE(err, &tce) || strings.Join(reasonCodes(tce), ",") != "ValidationError" {
		code, msg := apiErr(err)
		t.Errorf("a Delete with a key of the wrong type: got %s (%s), want TransactionCanceledException [ValidationError] (doc %s)", code, msg, doc)
	}
}

func TestParityConditionOperands(t *testing.T) {
	const doc = scyllaSuite + " test_condition_expression.py (test_update_condition_lt, _begins_with, _size)"
	p := newParity(t, ddb.Options{})
	name := p.table(tableSpec{})
	p.put(name, item{"pk": s("k"), "a": s("he"), "l": list(n("1"))})
	cond := func(expr string, vals item) error {
		_, err := p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: item{"pk": s("k"), "a": s("he"), "l": list(n("1"))},
			ConditionExpression: aws.String(expr), ExpressionAttributeValues: vals})
		return err
	}
	// An order comparison with a value of a type that has no order is a malformed
	// request; with an attribute of such a type it is only false.
	wantErr(t, "q < :list", cond("q < :v", item{":v": list(n("1"))}), "ValidationException", doc, "Incorrect operand type", "operand type: L")
	wantErr(t, ":list > a", cond(":v > a", item{":v": mapv(item{})}), "ValidationException", doc, "Incorrect operand type", "operand type: M")
	wantErr(t, "a BETWEEN :b AND :set", cond("a BETWEEN :b AND :v", item{":b": s("a"), ":v": ss("z")}), "ValidationException", doc, "operand type: SS")
	wantErr(t, "l < :n (l a list)", cond("l < :v", item{":v": n("5")}), "ConditionalCheckFailedException", doc)
	// begins_with, size and attribute_type take a value as their first operand.
	wantOK(t, "begins_with(:v, a)", cond("begins_with(:v, a)", item{":v": s("hello")}), doc)
	wantErr(t, "begins_with(:v, a) false", cond("begins_with(:v, a)", item{":v": s("xhello")}), "ConditionalCheckFailedException", doc)
	wantOK(t, "size(:v) = :three", cond("size(:v) = :three", item{":v": s("abc"), ":three": n("3")}), doc)
	wantErr(t, "size(:number)", cond("size(:v) >= :three", item{":v": n("123"), ":three": n("3")}), "ValidationException", doc, "operator or function: size, operand type: N")
	wantOK(t, "attribute_type(:v, :t)", cond("attribute_type(:v, :t)", item{":v": list(), ":t": s("L")}), docOperators)
	wantErr(t, "attribute_exists(:v)", cond("attribute_exists(:v)", item{":v": s("x")}), "ValidationException", docOperators, "requires a document path")
}

func TestParityUpdateExpressionNames(t *testing.T) {
	const doc = scyllaSuite + " test_update_expression.py::test_update_expression_name_token"
	p := newParity(t, ddb.Options{})
	name := p.table(tableSpec{})
	for _, expr := range []string{"SET _123 = :v", "SET _abc = :v"} {
		_, err := p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(name), Key: item{"pk": s("k")},
			UpdateExpression: aws.String(expr), ExpressionAttributeValues: item{":v": n("1")}})
		wantErr(t, expr, err, "ValidationException", doc, `Syntax error; token: "_", near: "SET _`)
	}
	_, err := p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(name), Key: item{"pk": s("k")},
		UpdateExpression: aws.String("SET Alpha_Numeric_123 = :v"), ExpressionAttributeValues: item{":v": n("1")}})
	wantOK(t, "SET Alpha_Numeric_123", err, docDocPaths)
}

func TestParityAttributeNameLimits(t *testing.T) {
	const doc = scyllaSuite + " test_limits.py::test_limit_attribute_length_*"
	p := newParity(t, ddb.Options{})
	name := p.table(tableSpec{})
	long := strings.Repeat("n", 65535)
	put := func(it item) error {
		_, err := p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: it})
		return err
	}
	wantOK(t, "a 65,535-byte attribute name", put(item{"pk": s("k"), long: n("1")}), docConstraints)
	wantErr(t, "a 65,536-byte attribute name", put(item{"pk": s("k"), long + "n": n("1")}), "ValidationException", doc, "65536")
	wantErr(t, "an empty attribute name", put(item{"pk": s("k"), "": n("1")}), "ValidationException", doc, "Empty attribute name")
	_, err := p.c.GetItem(p.ctx, &dynamodb.GetItemInput{TableName: aws.String(name), Key: item{"pk": s("k")},
		ProjectionExpression: aws.String("#n"), ExpressionAttributeNames: map[string]string{"#n": ""}})
	wantErr(t, "an empty name in ExpressionAttributeNames", err, "ValidationException", doc, "Empty attribute name")

	// Key attribute names are 1 to 255 characters (table keys and index keys).
	key255, key256 := strings.Repeat("k", 255), strings.Repeat("k", 256)
	create := func(keyName string) error {
		_, err := p.c.CreateTable(p.ctx, &dynamodb.CreateTableInput{TableName: aws.String("names-" + sanitize(t.Name())[:10] + keyName[:1] + string(rune('a'+len(keyName)%26))),
			BillingMode:          types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(keyName), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(keyName), KeyType: types.KeyTypeHash}}})
		return err
	}
	wantOK(t, "a 255-character key name", create(key255), doc)
	wantErr(t, "a 256-character key name", create(key256), "ValidationException", doc, "255")

	// A GSI's key values have the table's key limits: 2,048 bytes for its
	// partition key, 1,024 for its sort key.
	gsi := "gsi-" + name
	_, err = p.c.CreateTable(p.ctx, &dynamodb.CreateTableInput{TableName: aws.String(gsi), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("x"), AttributeType: types.ScalarAttributeTypeS}, {AttributeName: aws.String("y"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{IndexName: aws.String("gsi1"), Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
			KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("x"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("y"), KeyType: types.KeyTypeRange}}}}})
	if !wantOK(t, "CreateTable with a GSI", err, docAPICreateTable) {
		return
	}
	putG := func(it item) error {
		_, err := p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(gsi), Item: it})
		return err
	}
	wantOK(t, "a 2,048-byte GSI partition key", putG(item{"pk": s("a"), "x": s(strings.Repeat("x", 2048)), "y": s("y")}), docConstraints)
	wantErr(t, "a 2,049-byte GSI partition key", putG(item{"pk": s("b"), "x": s(strings.Repeat("x", 2049)), "y": s("y")}), "ValidationException", scyllaSuite+" test_gsi.py::test_gsi_limit_partition_key_len_2048", "2048")
	wantErr(t, "a 1,025-byte GSI sort key", putG(item{"pk": s("c"), "x": s("x"), "y": s(strings.Repeat("y", 1025))}), "ValidationException", scyllaSuite+" test_gsi.py::test_gsi_limit_sort_key_len_1024", "1024")
	_, err = p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(gsi), Key: item{"pk": s("d")},
		UpdateExpression: aws.String("SET x = :x"), ExpressionAttributeValues: item{":x": s(strings.Repeat("x", 2049))}})
	wantErr(t, "UpdateItem to a 2,049-byte GSI partition key", err, "ValidationException", docConstraints, "2048")
	_, err = p.c.BatchWriteItem(p.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
		gsi: {{PutRequest: &types.PutRequest{Item: item{"pk": s("e"), "x": s(strings.Repeat("x", 2049))}}}}}})
	wantErr(t, "BatchWriteItem of a 2,049-byte GSI partition key", err, "ValidationException", docConstraints, "2048")
	_, err = p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(gsi), Item: item{"pk": s("f"), "x": s(strings.Repeat("x", 2049))}}}}})
	var tce *types.TransactionCanceledException
	if !asTCE(err, &tce) || reasonCodes(tce)[0] != "ValidationError" {
		t.Errorf("TransactWriteItems of a 2,049-byte GSI partition key: got %v, want a ValidationError reason (doc %s)", err, docConstraints)
	}
	_, _ = p.c.DeleteTable(p.ctx, &dynamodb.DeleteTableInput{TableName: aws.String(gsi)})
}

func TestParityExclusiveStartKeyChecks(t *testing.T) {
	p := newParity(t, ddb.Options{})
	name := p.table(tableSpec{})
	for i := range 20 {
		p.put(name, item{"pk": s(string(rune('a' + i)))})
	}
	// A parallel scan's start key must belong to the segment scanned.
	const segDoc = scyllaSuite + " test_scan.py::test_scan_parallel_with_exclusive_start_key"
	mismatched := 0
	for _, k := range "abcdefghij" {
		_, err := p.c.Scan(p.ctx, &dynamodb.ScanInput{TableName: aws.String(name), Segment: aws.Int32(0), TotalSegments: aws.Int32(4),
			ExclusiveStartKey: item{"pk": s(string(k))}})
		if code, _ := apiErr(err); code == "ValidationException" {
			mismatched++
		} else if err != nil {
			wantOK(t, "Scan from a start key of segment 0", err, segDoc)
		}
	}
	if mismatched == 0 || mismatched == 10 {
		t.Errorf("Scan segment 0 of 4 from 10 start keys: %d refused, want those of the other segments refused and segment 0's served (doc %s)", mismatched, segDoc)
	}
	out, err := p.c.Scan(p.ctx, &dynamodb.ScanInput{TableName: aws.String(name), Segment: aws.Int32(1), TotalSegments: aws.Int32(4), Limit: aws.Int32(1)})
	if wantOK(t, "Scan segment 1", err, docAPIScan) && out.LastEvaluatedKey != nil {
		_, err = p.c.Scan(p.ctx, &dynamodb.ScanInput{TableName: aws.String(name), Segment: aws.Int32(1), TotalSegments: aws.Int32(4), ExclusiveStartKey: out.LastEvaluatedKey})
		wantOK(t, "Scan segment 1 from its own LastEvaluatedKey", err, docAPIScan)
		_, err = p.c.Scan(p.ctx, &dynamodb.ScanInput{TableName: aws.String(name), Segment: aws.Int32(2), TotalSegments: aws.Int32(4), ExclusiveStartKey: out.LastEvaluatedKey})
		wantErr(t, "Scan segment 2 from segment 1's LastEvaluatedKey", err, "ValidationException", segDoc, "Exclusive start key")
	}
	// A table without a sort key has one item per partition key: a Query can
	// start after none of them.
	_, err = p.c.Query(p.ctx, &dynamodb.QueryInput{TableName: aws.String(name), KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: item{":p": s("a")}, ExclusiveStartKey: item{"pk": s("a")}})
	wantErr(t, "Query of a hash-only table with ExclusiveStartKey", err, "ValidationException", scyllaSuite+" test_query.py::test_query_no_sort_key_exclusive_start_key", "ExclusiveStartKey")
	_, err = p.c.Scan(p.ctx, &dynamodb.ScanInput{TableName: aws.String(name), ExclusiveStartKey: item{"pk": s("")}})
	wantErr(t, "Scan from an empty key value", err, "ValidationException", docAPIScan, "empty")
}

func TestParityTableNameChecks(t *testing.T) {
	const doc = scyllaSuite + " test_item.py::test_item_operations_improper_named_table"
	p := newParity(t, ddb.Options{})
	for _, bad := range []string{"non!existent!table", "xx", strings.Repeat("t", 256)} {
		_, err := p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(bad), Item: item{"pk": s("k")}})
		wantErr(t, "PutItem on table "+bad[:min(len(bad), 20)], err, "ValidationException", doc, "tableName")
		_, err = p.c.DescribeTable(p.ctx, &dynamodb.DescribeTableInput{TableName: aws.String(bad)})
		wantErr(t, "DescribeTable "+bad[:min(len(bad), 20)], err, "ValidationException", doc, "tableName")
		_, err = p.c.DeleteTable(p.ctx, &dynamodb.DeleteTableInput{TableName: aws.String(bad)})
		wantErr(t, "DeleteTable "+bad[:min(len(bad), 20)], err, "ValidationException", doc, "tableName")
	}
	_, err := p.c.GetItem(p.ctx, &dynamodb.GetItemInput{TableName: aws.String("no_such_table"), Key: item{"pk": s("k")}})
	wantErr(t, "GetItem of a well-named missing table", err, "ResourceNotFoundException", docAPIGet)
	// A table may be named by its ARN.
	name := p.table(tableSpec{})
	d, err := p.c.DescribeTable(p.ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if wantOK(t, "DescribeTable", err, docAPIGet) {
		p.put(name, item{"pk": s("k")})
		_, err = p.c.GetItem(p.ctx, &dynamodb.GetItemInput{TableName: d.Table.TableArn, Key: item{"pk": s("k")}})
		wantOK(t, "GetItem by the table's ARN", err, docAPIGet)
	}
}

func TestParityControlPlaneChecks(t *testing.T) {
	p := newParity(t, ddb.Options{})
	name := p.table(tableSpec{})
	_, err := p.c.UpdateTable(p.ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name)})
	wantErr(t, "UpdateTable that changes nothing", err, "ValidationException", scyllaSuite+" test_gsi_updatetable.py::test_updatetable_empty", "UpdateTable")
	_, err = p.c.UpdateTable(p.ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name), GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{}})
	wantErr(t, "UpdateTable with empty GlobalSecondaryIndexUpdates", err, "ValidationException", scyllaSuite+" test_gsi_updatetable.py::test_updatetable_empty", "UpdateTable")
	_, err = p.c.UpdateTable(p.ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name), BillingMode: types.BillingMode("FREE")})
	wantErr(t, "UpdateTable BillingMode FREE", err, "ValidationException", docAPIUpdateTable, "billingMode", "enum")
	in := pkCreate("billing-" + name)
	in.BillingMode = types.BillingMode("FREE")
	_, err = p.c.CreateTable(p.ctx, in)
	wantErr(t, "CreateTable BillingMode FREE", err, "ValidationException", docAPICreateTable, "billingMode", "enum")
	_, err = p.c.UpdateTimeToLive(p.ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(strings.Repeat("x", 256)), Enabled: aws.Bool(true)}})
	wantErr(t, "UpdateTimeToLive with a 256-character name", err, "ValidationException", scyllaSuite+" test_ttl.py::test_update_ttl_errors", "255")
	_, err = p.c.UpdateTimeToLive(p.ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(strings.Repeat("x", 255)), Enabled: aws.Bool(true)}})
	wantOK(t, "UpdateTimeToLive with a 255-character name", err, docAPIUpdateTTL)
}

func pkCreate(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}}}
}

func TestParityStreamsInputChecks(t *testing.T) {
	const doc = scyllaSuite + " test_streams.py (test_describe_nonexistent_stream, test_get_shard_iterator, test_list_streams_*)"
	p := newParity(t, ddb.Options{})
	name := p.table(tableSpec{streamView: types.StreamViewTypeKeysOnly})
	arn := p.streamArn(name)
	shard := p.shards(arn)[0].ShardId
	bogus := "sdfadfsdfnlfkajakfgjalksfgklasjklasdjfklasdfasdfgasf"
	_, err := p.s.DescribeStream(p.ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(bogus)})
	wantErr(t, "DescribeStream of a malformed ARN", err, "ValidationException", doc)
	_, err = p.s.GetShardIterator(p.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(bogus), ShardId: shard, ShardIteratorType: stypes.ShardIteratorTypeLatest})
	wantErr(t, "GetShardIterator of a malformed ARN", err, "ValidationException", doc)
	_, err = p.s.ListStreams(p.ctx, &dynamodbstreams.ListStreamsInput{ExclusiveStartStreamArn: aws.String(bogus)})
	wantErr(t, "ListStreams from a malformed ARN", err, "ValidationException", doc)
	// A well-formed ARN of no stream is not found, not invalid.
	missing := strings.Replace(arn, name, "no-such-table", 1)
	_, err = p.s.DescribeStream(p.ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(missing)})
	wantErr(t, "DescribeStream of a well-formed ARN of no stream", err, "ResourceNotFoundException", docAPIDescStream)
	_, err = p.s.ListStreams(p.ctx, &dynamodbstreams.ListStreamsInput{Limit: aws.Int32(101)})
	wantErr(t, "ListStreams Limit 101", err, "ValidationException", docAPIListStreams+" (\"The upper limit is 100\")", "100")
	_, err = p.s.ListStreams(p.ctx, &dynamodbstreams.ListStreamsInput{Limit: aws.Int32(100)})
	wantOK(t, "ListStreams Limit 100", err, docAPIListStreams)
}

func TestParityWireErrors(t *testing.T) {
	p := newParity(t, ddb.Options{})
	name := p.table(tableSpec{})
	const serDoc = scyllaSuite + " test_manual_requests.py (test_base64_malformed, test_update_item_malformed_value)"
	for _, tc := range []struct{ what, value, want string }{
		{"a JSON number for N", `{"N": 3}`, "SerializationException"},
		{"malformed base64", `{"B": "fakebase64"}`, "SerializationException"},
		{"base64 with a bad character", `{"B": "YWJj!A=="}`, "SerializationException"},
		{"a JSON number for S", `{"S": 3}`, "SerializationException"},
		{"a string for BOOL", `{"BOOL": "yes"}`, "SerializationException"},
		{"a number text that is no number", `{"N": "dog"}`, "ValidationException"},
		{"an unknown type", `{"dog": "cat"}`, "ValidationException"},
	} {
		status, typ := p.rawCall("DynamoDB_20120810.PutItem", []byte(`{"TableName":"`+name+`","Item":{"pk":{"S":"k"},"v":`+tc.value+`}}`))
		if status != http.StatusBadRequest || typ != tc.want {
			t.Errorf("PutItem with %s: got %d %s, want 400 %s (doc %s)", tc.what, status, typ, tc.want, serDoc)
		}
	}
	body := append([]byte(`{"TableName":"`+name+`",`), bytes.Repeat([]byte(" "), 16<<20)...)
	body = append(body, `"Item":{"pk":{"S":"k"}}}`...)
	if status, _ := p.rawCall("DynamoDB_20120810.PutItem", body); status != http.StatusRequestEntityTooLarge {
		t.Errorf("a 16 MB + request: got HTTP %d, want 413 (doc %s; %s test_manual_requests.py::test_too_large_request_content_length)", status, docConstraints, scyllaSuite)
	}
}
