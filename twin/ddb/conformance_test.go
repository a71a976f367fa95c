package ddb

// The conformance suite: for every operation the server dispatches, what AWS's API
// reference documents of it (outputs and errors), through aws-sdk-go-v2 over HTTP.
// TestConformanceCoversEveryOperation keeps it whole: an operation registered
// without a case here fails it. docs/dynamodb-compatibility.md summarises where the
// server stands, operation by operation.

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
)

const apiRef = "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/"

type confEnv struct {
	t   *testing.T
	c   *dynamodb.Client
	s   *dynamodbstreams.Client
	ctx context.Context
	arn string // the stream of table "conf"
}

type confCase struct {
	op, name, doc string
	run           func(e *confEnv) error // an error fails the case
}

func errCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// wantAPI returns nil when err is the API error code, else a description.
func wantAPI(err error, code string) error {
	if got := errCode(err); got != code {
		return errors.New("got error " + got + " (" + errString(err) + "), want " + code)
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return "none"
	}
	return err.Error()
}

func check(ok bool, what string) error {
	if !ok {
		return errors.New(what)
	}
	return nil
}

var key1 = map[string]av{"pk": s("a"), "sk": ni(1)}

var confCases = []confCase{
	// ---- CreateTable ----
	{"CreateTable", "answers ACTIVE with the schema", "API_CreateTable.html", func(e *confEnv) error {
		out, err := e.c.CreateTable(e.ctx, pkTableInput("conf-create"))
		if err != nil {
			return err
		}
		d := out.TableDescription
		return check(aws.ToString(d.TableName) == "conf-create" && strings.HasSuffix(aws.ToString(d.TableArn), ":table/conf-create") && len(d.KeySchema) == 1, "TableDescription lacks the name, ARN or key schema")
	}},
	{"CreateTable", "an existing name is ResourceInUseException", "API_CreateTable.html#API_CreateTable_Errors", func(e *confEnv) error {
		_, err := e.c.CreateTable(e.ctx, pkTableInput("conf"))
		return wantAPI(err, "ResourceInUseException")
	}},
	{"CreateTable", "a key not in AttributeDefinitions is ValidationException", "API_CreateTable.html", func(e *confEnv) error {
		in := pkTableInput("conf-bad")
		in.KeySchema[0].AttributeName = aws.String("other")
		_, err := e.c.CreateTable(e.ctx, in)
		return wantAPI(err, "ValidationException")
	}},
	{"CreateTable", "an unused attribute definition is ValidationException", "API_CreateTable.html", func(e *confEnv) error {
		in := pkTableInput("conf-bad2")
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String("x"), AttributeType: types.ScalarAttributeTypeS})
		_, err := e.c.CreateTable(e.ctx, in)
		return wantAPI(err, "ValidationException")
	}},
	// ---- DescribeTable ----
	{"DescribeTable", "describes the table with its stream", "API_DescribeTable.html", func(e *confEnv) error {
		out, err := e.c.DescribeTable(e.ctx, &dynamodb.DescribeTableInput{TableName: aws.String("conf")})
		if err != nil {
			return err
		}
		return check(out.Table.TableStatus == types.TableStatusActive && aws.ToString(out.Table.LatestStreamArn) == e.arn && out.Table.StreamSpecification != nil, "no ACTIVE status or stream")
	}},
	{"DescribeTable", "a missing table is ResourceNotFoundException", "API_DescribeTable.html#API_DescribeTable_Errors", func(e *confEnv) error {
		_, err := e.c.DescribeTable(e.ctx, &dynamodb.DescribeTableInput{TableName: aws.String("no-such")})
		return wantAPI(err, "ResourceNotFoundException")
	}},
	// ---- ListTables ----
	{"ListTables", "pages by Limit and ExclusiveStartTableName", "API_ListTables.html", func(e *confEnv) error {
		out, err := e.c.ListTables(e.ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)})
		if err != nil {
			return err
		}
		if len(out.TableNames) != 1 || out.LastEvaluatedTableName == nil {
			return errors.New("Limit 1 did not give one name and LastEvaluatedTableName")
		}
		next, err := e.c.ListTables(e.ctx, &dynamodb.ListTablesInput{ExclusiveStartTableName: out.LastEvaluatedTableName})
		if err != nil {
			return err
		}
		return check(len(next.TableNames) > 0 && next.TableNames[0] > out.TableNames[0], "the next page does not follow")
	}},
	{"ListTables", "Limit over 100 is ValidationException", "API_ListTables.html#API_ListTables_RequestSyntax", func(e *confEnv) error {
		_, err := e.c.ListTables(e.ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(101)})
		return wantAPI(err, "ValidationException")
	}},
	// ---- DeleteTable ----
	{"DeleteTable", "answers DELETING, then the table is gone", "API_DeleteTable.html", func(e *confEnv) error {
		if _, err := e.c.CreateTable(e.ctx, pkTableInput("conf-del")); err != nil {
			return err
		}
		out, err := e.c.DeleteTable(e.ctx, &dynamodb.DeleteTableInput{TableName: aws.String("conf-del")})
		if err != nil {
			return err
		}
		if out.TableDescription.TableStatus != types.TableStatusDeleting {
			return errors.New("status " + string(out.TableDescription.TableStatus))
		}
		_, err = e.c.DescribeTable(e.ctx, &dynamodb.DescribeTableInput{TableName: aws.String("conf-del")})
		return wantAPI(err, "ResourceNotFoundException")
	}},
	{"DeleteTable", "a missing table is ResourceNotFoundException", "API_DeleteTable.html#API_DeleteTable_Errors", func(e *confEnv) error {
		_, err := e.c.DeleteTable(e.ctx, &dynamodb.DeleteTableInput{TableName: aws.String("no-such")})
		return wantAPI(err, "ResourceNotFoundException")
	}},
	// ---- UpdateTable ----
	{"UpdateTable", "switches BillingMode", "API_UpdateTable.html", func(e *confEnv) error {
		out, err := e.c.UpdateTable(e.ctx, &dynamodb.UpdateTableInput{TableName: aws.String("conf-plain"), BillingMode: types.BillingModeProvisioned,
			ProvisionedThroughput: &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(5), WriteCapacityUnits: aws.Int64(5)}})
		if err != nil {
			return err
		}
		return check(out.TableDescription.BillingModeSummary == nil || out.TableDescription.BillingModeSummary.BillingMode != types.BillingModePayPerRequest, "still PAY_PER_REQUEST")
	}},
	{"UpdateTable", "enabling a stream that is enabled is ValidationException", "API_UpdateTable.html", func(e *confEnv) error {
		_, err := e.c.UpdateTable(e.ctx, &dynamodb.UpdateTableInput{TableName: aws.String("conf"),
			StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly}})
		return wantAPI(err, "ValidationException")
	}},
	{"UpdateTable", "a missing table is ResourceNotFoundException", "API_UpdateTable.html#API_UpdateTable_Errors", func(e *confEnv) error {
		_, err := e.c.UpdateTable(e.ctx, &dynamodb.UpdateTableInput{TableName: aws.String("no-such"), BillingMode: types.BillingModePayPerRequest})
		return wantAPI(err, "ResourceNotFoundException")
	}},
	// ---- UpdateTimeToLive / DescribeTimeToLive ----
	{"UpdateTimeToLive", "enables TTL and echoes the specification", "API_UpdateTimeToLive.html", func(e *confEnv) error {
		out, err := e.c.UpdateTimeToLive(e.ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("conf-plain"),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("exp"), Enabled: aws.Bool(true)}})
		if err != nil {
			return err
		}
		return check(aws.ToString(out.TimeToLiveSpecification.AttributeName) == "exp", "not echoed")
	}},
	{"UpdateTimeToLive", "a missing table is ResourceNotFoundException", "API_UpdateTimeToLive.html#API_UpdateTimeToLive_Errors", func(e *confEnv) error {
		_, err := e.c.UpdateTimeToLive(e.ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("no-such"),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("exp"), Enabled: aws.Bool(true)}})
		return wantAPI(err, "ResourceNotFoundException")
	}},
	{"DescribeTimeToLive", "DISABLED on a table without TTL", "API_DescribeTimeToLive.html", func(e *confEnv) error {
		out, err := e.c.DescribeTimeToLive(e.ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String("conf")})
		if err != nil {
			return err
		}
		return check(out.TimeToLiveDescription.TimeToLiveStatus == types.TimeToLiveStatusDisabled, "status "+string(out.TimeToLiveDescription.TimeToLiveStatus))
	}},
	{"DescribeTimeToLive", "a missing table is ResourceNotFoundException", "API_DescribeTimeToLive.html#API_DescribeTimeToLive_Errors", func(e *confEnv) error {
		_, err := e.c.DescribeTimeToLive(e.ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String("no-such")})
		return wantAPI(err, "ResourceNotFoundException")
	}},
	// ---- PutItem ----
	{"PutItem", "ReturnValues ALL_OLD returns the replaced item", "API_PutItem.html#DDB-PutItem-request-ReturnValues", func(e *confEnv) error {
		if _, err := e.c.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("conf"), Item: map[string]av{"pk": s("a"), "sk": ni(1), "v": s("old")}}); err != nil {
			return err
		}
		out, err := e.c.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("conf"), Item: map[string]av{"pk": s("a"), "sk": ni(1), "v": s("new")}, ReturnValues: types.ReturnValueAllOld})
		if err != nil {
			return err
		}
		return check(out.Attributes["v"] != nil && out.Attributes["v"].(*types.AttributeValueMemberS).Value == "old", "no old item")
	}},
	{"PutItem", "ReturnValues other than ALL_OLD or NONE is ValidationException", "API_PutItem.html#DDB-PutItem-request-ReturnValues", func(e *confEnv) error {
		_, err := e.c.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("conf"), Item: key1, ReturnValues: types.ReturnValueAllNew})
		return wantAPI(err, "ValidationException")
	}},
	{"PutItem", "a false condition is ConditionalCheckFailedException", "API_PutItem.html#API_PutItem_Errors", func(e *confEnv) error {
		_, err := e.c.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("conf"), Item: key1, ConditionExpression: aws.String("attribute_not_exists(pk)")})
		return wantAPI(err, "ConditionalCheckFailedException")
	}},
	{"PutItem", "a missing key attribute is ValidationException", "API_PutItem.html", func(e *confEnv) error {
		_, err := e.c.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("conf"), Item: map[string]av{"pk": s("a")}})
		return wantAPI(err, "ValidationException")
	}},
	{"PutItem", "an item over 400 KB is ValidationException", "ServiceQuotas.html (item size)", func(e *confEnv) error {
		_, err := e.c.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("conf"), Item: map[string]av{"pk": s("big"), "sk": ni(1), "x": s(strings.Repeat("x", 400*1024))}})
		return wantAPI(err, "ValidationException")
	}},
	{"PutItem", "a missing table is ResourceNotFoundException", "API_PutItem.html#API_PutItem_Errors", func(e *confEnv) error {
		_, err := e.c.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("no-such"), Item: key1})
		return wantAPI(err, "ResourceNotFoundException")
	}},
	// ---- GetItem ----
	{"GetItem", "returns the item, projected", "API_GetItem.html", func(e *confEnv) error {
		out, err := e.c.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String("conf"), Key: key1, ProjectionExpression: aws.String("v")})
		if err != nil {
			return err
		}
		return check(len(out.Item) == 1 && out.Item["v"] != nil, "not projected to v")
	}},
	{"GetItem", "no Item for a missing item", "API_GetItem.html#API_GetItem_ResponseSyntax", func(e *confEnv) error {
		out, err := e.c.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String("conf"), Key: map[string]av{"pk": s("none"), "sk": ni(1)}})
		if err != nil {
			return err
		}
		return check(out.Item == nil, "an Item")
	}},
	{"GetItem", "a key of the wrong type is ValidationException", "API_GetItem.html", func(e *confEnv) error {
		_, err := e.c.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String("conf"), Key: map[string]av{"pk": ni(1), "sk": ni(1)}})
		return wantAPI(err, "ValidationException")
	}},
	{"GetItem", "ReturnConsumedCapacity TOTAL reports 0.5 RCU for an eventually consistent read", "read-write-operations.html", func(e *confEnv) error {
		out, err := e.c.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String("conf"), Key: key1, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		if err != nil {
			return err
		}
		return check(out.ConsumedCapacity != nil && aws.ToFloat64(out.ConsumedCapacity.CapacityUnits) == 0.5, "not 0.5")
	}},
	// ---- UpdateItem ----
	{"UpdateItem", "creates a missing item and returns ALL_NEW", "API_UpdateItem.html", func(e *confEnv) error {
		out, err := e.c.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("conf"), Key: map[string]av{"pk": s("u"), "sk": ni(1)},
			UpdateExpression: aws.String("SET c = :one"), ExpressionAttributeValues: map[string]av{":one": ni(1)}, ReturnValues: types.ReturnValueAllNew})
		if err != nil {
			return err
		}
		return check(len(out.Attributes) == 3, "not the new item")
	}},
	{"UpdateItem", "UPDATED_OLD returns only the updated attributes", "API_UpdateItem.html#DDB-UpdateItem-request-ReturnValues", func(e *confEnv) error {
		out, err := e.c.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("conf"), Key: map[string]av{"pk": s("u"), "sk": ni(1)},
			UpdateExpression: aws.String("SET c = c + :one"), ExpressionAttributeValues: map[string]av{":one": ni(1)}, ReturnValues: types.ReturnValueUpdatedOld})
		if err != nil {
			return err
		}
		return check(len(out.Attributes) == 1 && out.Attributes["c"].(*types.AttributeValueMemberN).Value == "1", "not {c: 1}")
	}},
	{"UpdateItem", "updating a key attribute is ValidationException", "API_UpdateItem.html", func(e *confEnv) error {
		_, err := e.c.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("conf"), Key: key1,
			UpdateExpression: aws.String("SET pk = :v"), ExpressionAttributeValues: map[string]av{":v": s("z")}})
		return wantAPI(err, "ValidationException")
	}},
	{"UpdateItem", "an unused expression value is ValidationException", "Expressions.ExpressionAttributeValues.html", func(e *confEnv) error {
		_, err := e.c.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("conf"), Key: key1,
			UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]av{":v": s("z"), ":w": s("w")}})
		return wantAPI(err, "ValidationException")
	}},
	{"UpdateItem", "a false condition is ConditionalCheckFailedException", "API_UpdateItem.html#API_UpdateItem_Errors", func(e *confEnv) error {
		_, err := e.c.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("conf"), Key: key1,
			UpdateExpression: aws.String("SET v = :v"), ConditionExpression: aws.String("v = :w"), ExpressionAttributeValues: map[string]av{":v": s("z"), ":w": s("w")}})
		return wantAPI(err, "ConditionalCheckFailedException")
	}},
	// ---- DeleteItem ----
	{"DeleteItem", "ReturnValues ALL_OLD returns the deleted item", "API_DeleteItem.html", func(e *confEnv) error {
		out, err := e.c.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String("conf"), Key: map[string]av{"pk": s("u"), "sk": ni(1)}, ReturnValues: types.ReturnValueAllOld})
		if err != nil {
			return err
		}
		return check(out.Attributes["c"] != nil, "no old item")
	}},
	{"DeleteItem", "deleting a missing item succeeds", "API_DeleteItem.html", func(e *confEnv) error {
		_, err := e.c.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String("conf"), Key: map[string]av{"pk": s("none"), "sk": ni(9)}})
		return err
	}},
	{"DeleteItem", "a false condition is ConditionalCheckFailedException", "API_DeleteItem.html#API_DeleteItem_Errors", func(e *confEnv) error {
		_, err := e.c.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String("conf"), Key: key1, ConditionExpression: aws.String("attribute_not_exists(v)")})
		return wantAPI(err, "ConditionalCheckFailedException")
	}},
	// ---- Query ----
	{"Query", "key condition, order, Count and ScannedCount", "API_Query.html", func(e *confEnv) error {
		for i := 2; i <= 5; i++ {
			if _, err := e.c.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("conf"), Item: map[string]av{"pk": s("a"), "sk": ni(i), "v": s("x")}}); err != nil {
				return err
			}
		}
		out, err := e.c.Query(e.ctx, &dynamodb.QueryInput{TableName: aws.String("conf"), KeyConditionExpression: aws.String("pk = :p AND sk BETWEEN :a AND :b"),
			ExpressionAttributeValues: map[string]av{":p": s("a"), ":a": ni(2), ":b": ni(4)}, ScanIndexForward: aws.Bool(false)})
		if err != nil {
			return err
		}
		return check(out.Count == 3 && out.ScannedCount == 3 && out.Items[0]["sk"].(*types.AttributeValueMemberN).Value == "4", "not sk 4, 3, 2")
	}},
	{"Query", "Limit ends a page with LastEvaluatedKey", "Query.Pagination.html", func(e *confEnv) error {
		out, err := e.c.Query(e.ctx, &dynamodb.QueryInput{TableName: aws.String("conf"), KeyConditionExpression: aws.String("pk = :p"),
			ExpressionAttributeValues: map[string]av{":p": s("a")}, Limit: aws.Int32(2)})
		if err != nil {
			return err
		}
		return check(len(out.Items) == 2 && out.LastEvaluatedKey != nil, "no LastEvaluatedKey")
	}},
	{"Query", "a condition without the partition key is ValidationException", "Query.KeyConditionExpressions.html", func(e *confEnv) error {
		_, err := e.c.Query(e.ctx, &dynamodb.QueryInput{TableName: aws.String("conf"), KeyConditionExpression: aws.String("sk = :s"),
			ExpressionAttributeValues: map[string]av{":s": ni(1)}})
		return wantAPI(err, "ValidationException")
	}},
	{"Query", "a filter on a key attribute is ValidationException", "Query.FilterExpression.html", func(e *confEnv) error {
		_, err := e.c.Query(e.ctx, &dynamodb.QueryInput{TableName: aws.String("conf"), KeyConditionExpression: aws.String("pk = :p"),
			FilterExpression: aws.String("sk > :s"), ExpressionAttributeValues: map[string]av{":p": s("a"), ":s": ni(1)}})
		return wantAPI(err, "ValidationException")
	}},
	{"Query", "Select COUNT returns no Items", "API_Query.html#DDB-Query-request-Select", func(e *confEnv) error {
		out, err := e.c.Query(e.ctx, &dynamodb.QueryInput{TableName: aws.String("conf"), KeyConditionExpression: aws.String("pk = :p"),
			ExpressionAttributeValues: map[string]av{":p": s("a")}, Select: types.SelectCount})
		if err != nil {
			return err
		}
		return check(out.Items == nil && out.Count > 0, "Items with COUNT")
	}},
	// ---- Scan ----
	{"Scan", "FilterExpression counts scanned items apart", "API_Scan.html", func(e *confEnv) error {
		out, err := e.c.Scan(e.ctx, &dynamodb.ScanInput{TableName: aws.String("conf"), FilterExpression: aws.String("sk > :s"), ExpressionAttributeValues: map[string]av{":s": ni(3)}})
		if err != nil {
			return err
		}
		return check(out.Count == 2 && out.ScannedCount > out.Count, "Count/ScannedCount")
	}},
	{"Scan", "parallel segments cover the table once", "Scan.ParallelScan.html", func(e *confEnv) error {
		seen := 0
		for seg := int32(0); seg < 3; seg++ {
			out, err := e.c.Scan(e.ctx, &dynamodb.ScanInput{TableName: aws.String("conf"), Segment: aws.Int32(seg), TotalSegments: aws.Int32(3)})
			if err != nil {
				return err
			}
			seen += int(out.Count)
		}
		all, err := e.c.Scan(e.ctx, &dynamodb.ScanInput{TableName: aws.String("conf")})
		if err != nil {
			return err
		}
		return check(seen == int(all.Count), "segments do not add up")
	}},
	{"Scan", "Segment without TotalSegments is ValidationException", "API_Scan.html", func(e *confEnv) error {
		_, err := e.c.Scan(e.ctx, &dynamodb.ScanInput{TableName: aws.String("conf"), Segment: aws.Int32(0)})
		return wantAPI(err, "ValidationException")
	}},
	// ---- BatchGetItem / BatchWriteItem ----
	{"BatchWriteItem", "puts and deletes, UnprocessedItems empty", "API_BatchWriteItem.html", func(e *confEnv) error {
		out, err := e.c.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"conf": {
			{PutRequest: &types.PutRequest{Item: map[string]av{"pk": s("b"), "sk": ni(1)}}},
			{PutRequest: &types.PutRequest{Item: map[string]av{"pk": s("b"), "sk": ni(2)}}},
			{DeleteRequest: &types.DeleteRequest{Key: map[string]av{"pk": s("a"), "sk": ni(5)}}}}}})
		if err != nil {
			return err
		}
		return check(len(out.UnprocessedItems) == 0, "UnprocessedItems")
	}},
	{"BatchWriteItem", "more than 25 requests is ValidationException", "API_BatchWriteItem.html", func(e *confEnv) error {
		var reqs []types.WriteRequest
		for i := range 26 {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]av{"pk": s("c"), "sk": ni(i)}}})
		}
		_, err := e.c.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"conf": reqs}})
		return wantAPI(err, "ValidationException")
	}},
	{"BatchWriteItem", "two requests for one item is ValidationException", "API_BatchWriteItem.html", func(e *confEnv) error {
		_, err := e.c.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"conf": {
			{PutRequest: &types.PutRequest{Item: map[string]av{"pk": s("b"), "sk": ni(1)}}},
			{DeleteRequest: &types.DeleteRequest{Key: map[string]av{"pk": s("b"), "sk": ni(1)}}}}}})
		return wantAPI(err, "ValidationException")
	}},
	{"BatchGetItem", "returns the items that exist, projected", "API_BatchGetItem.html", func(e *confEnv) error {
		out, err := e.c.BatchGetItem(e.ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"conf": {
			Keys: []map[string]av{{"pk": s("b"), "sk": ni(1)}, {"pk": s("b"), "sk": ni(2)}, {"pk": s("none"), "sk": ni(1)}}, ProjectionExpression: aws.String("sk")}}})
		if err != nil {
			return err
		}
		return check(len(out.Responses["conf"]) == 2 && len(out.Responses["conf"][0]) == 1 && len(out.UnprocessedKeys) == 0, "not the two items, projected")
	}},
	{"BatchGetItem", "more than 100 keys is ValidationException", "API_BatchGetItem.html", func(e *confEnv) error {
		var keys []map[string]av
		for i := range 101 {
			keys = append(keys, map[string]av{"pk": s("k"), "sk": ni(i)})
		}
		_, err := e.c.BatchGetItem(e.ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"conf": {Keys: keys}}})
		return wantAPI(err, "ValidationException")
	}},
	// ---- TransactWriteItems / TransactGetItems ----
	{"TransactWriteItems", "commits every action", "API_TransactWriteItems.html", func(e *confEnv) error {
		_, err := e.c.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String("conf"), Item: map[string]av{"pk": s("t"), "sk": ni(1)}}},
			{Update: &types.Update{TableName: aws.String("conf"), Key: map[string]av{"pk": s("t"), "sk": ni(2)}, UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]av{":v": s("x")}}},
			{ConditionCheck: &types.ConditionCheck{TableName: aws.String("conf"), Key: map[string]av{"pk": s("b"), "sk": ni(1)}, ConditionExpression: aws.String("attribute_exists(pk)")}}}})
		return err
	}},
	{"TransactWriteItems", "a false condition cancels all with CancellationReasons", "API_TransactWriteItems.html#API_TransactWriteItems_Errors", func(e *confEnv) error {
		_, err := e.c.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String("conf"), Item: map[string]av{"pk": s("t"), "sk": ni(3)}}},
			{ConditionCheck: &types.ConditionCheck{TableName: aws.String("conf"), Key: map[string]av{"pk": s("none"), "sk": ni(1)}, ConditionExpression: aws.String("attribute_exists(pk)")}}}})
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) || len(tce.CancellationReasons) != 2 || aws.ToString(tce.CancellationReasons[1].Code) != "ConditionalCheckFailed" {
			return errors.New("not cancelled with [None, ConditionalCheckFailed]: " + errString(err))
		}
		out, err := e.c.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String("conf"), Key: map[string]av{"pk": s("t"), "sk": ni(3)}})
		if err != nil {
			return err
		}
		return check(out.Item == nil, "the cancelled Put was written")
	}},
	{"TransactWriteItems", "two actions on one item is ValidationException", "API_TransactWriteItems.html", func(e *confEnv) error {
		_, err := e.c.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String("conf"), Item: map[string]av{"pk": s("t"), "sk": ni(1)}}},
			{Delete: &types.Delete{TableName: aws.String("conf"), Key: map[string]av{"pk": s("t"), "sk": ni(1)}}}}})
		return wantAPI(err, "ValidationException")
	}},
	{"TransactWriteItems", "a reused ClientRequestToken with other parameters is IdempotentParameterMismatchException", "API_TransactWriteItems.html#DDB-TransactWriteItems-request-ClientRequestToken", func(e *confEnv) error {
		put := func(sk int) error {
			_, err := e.c.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String("conf-token"), TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String("conf"), Item: map[string]av{"pk": s("tok"), "sk": ni(sk)}}}}})
			return err
		}
		if err := put(1); err != nil {
			return err
		}
		if err := put(1); err != nil {
			return errors.New("the repeat failed: " + err.Error())
		}
		return wantAPI(put(2), "IdempotentParameterMismatchException")
	}},
	{"TransactGetItems", "returns the items in request order", "API_TransactGetItems.html", func(e *confEnv) error {
		out, err := e.c.TransactGetItems(e.ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
			{Get: &types.Get{TableName: aws.String("conf"), Key: map[string]av{"pk": s("t"), "sk": ni(2)}}},
			{Get: &types.Get{TableName: aws.String("conf"), Key: map[string]av{"pk": s("none"), "sk": ni(1)}}}}})
		if err != nil {
			return err
		}
		return check(len(out.Responses) == 2 && out.Responses[0].Item != nil && out.Responses[1].Item == nil, "not [item, nothing]")
	}},
	{"TransactGetItems", "a missing table is ResourceNotFoundException", "API_TransactGetItems.html#API_TransactGetItems_Errors", func(e *confEnv) error {
		_, err := e.c.TransactGetItems(e.ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
			{Get: &types.Get{TableName: aws.String("no-such"), Key: key1}}}})
		return wantAPI(err, "ResourceNotFoundException")
	}},
	// ---- Streams ----
	{"ListStreams", "lists the table's stream", "API_streams_ListStreams.html", func(e *confEnv) error {
		out, err := e.s.ListStreams(e.ctx, &dynamodbstreams.ListStreamsInput{TableName: aws.String("conf")})
		if err != nil {
			return err
		}
		return check(len(out.Streams) == 1 && aws.ToString(out.Streams[0].StreamArn) == e.arn, "not the table's stream")
	}},
	{"ListStreams", "Limit 0 is ValidationException", "API_streams_ListStreams.html#DDB-streams_ListStreams-request-Limit", func(e *confEnv) error {
		_, err := e.s.ListStreams(e.ctx, &dynamodbstreams.ListStreamsInput{Limit: aws.Int32(0)})
		return wantAPI(err, "ValidationException")
	}},
	{"DescribeStream", "describes the shards and view type", "API_streams_DescribeStream.html", func(e *confEnv) error {
		out, err := e.s.DescribeStream(e.ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(e.arn)})
		if err != nil {
			return err
		}
		d := out.StreamDescription
		return check(d.StreamStatus == streamtypes.StreamStatusEnabled && d.StreamViewType == streamtypes.StreamViewTypeNewAndOldImages && len(d.Shards) > 0, "status, view type or shards")
	}},
	{"DescribeStream", "a well-formed ARN of no stream is ResourceNotFoundException", "API_streams_DescribeStream.html#API_streams_DescribeStream_Errors", func(e *confEnv) error {
		_, err := e.s.DescribeStream(e.ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(strings.Replace(e.arn, "table/conf/", "table/gone/", 1))})
		return wantAPI(err, "ResourceNotFoundException")
	}},
	{"GetShardIterator", "TRIM_HORIZON with a SequenceNumber is ValidationException", "API_streams_GetShardIterator.html", func(e *confEnv) error {
		d, err := e.s.DescribeStream(e.ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(e.arn)})
		if err != nil {
			return err
		}
		_, err = e.s.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(e.arn), ShardId: d.StreamDescription.Shards[0].ShardId,
			ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon, SequenceNumber: d.StreamDescription.Shards[0].SequenceNumberRange.StartingSequenceNumber})
		return wantAPI(err, "ValidationException")
	}},
	{"GetShardIterator", "a missing shard is ResourceNotFoundException", "API_streams_GetShardIterator.html#API_streams_GetShardIterator_Errors", func(e *confEnv) error {
		_, err := e.s.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(e.arn), ShardId: aws.String("shardId-00000000000000000000-00000000"),
			ShardIteratorType: streamtypes.ShardIteratorTypeLatest})
		return wantAPI(err, "ResourceNotFoundException")
	}},
	{"GetRecords", "returns the changes in order with both images", "API_streams_GetRecords.html", func(e *confEnv) error {
		d, err := e.s.DescribeStream(e.ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(e.arn)})
		if err != nil {
			return err
		}
		it, err := e.s.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(e.arn), ShardId: d.StreamDescription.Shards[0].ShardId,
			ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			return err
		}
		out, err := e.s.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(2)})
		if err != nil {
			return err
		}
		if len(out.Records) != 2 || out.Records[0].EventName != streamtypes.OperationTypeInsert || out.Records[1].EventName != streamtypes.OperationTypeModify {
			return errors.New("not INSERT then MODIFY")
		}
		return check(out.Records[1].Dynamodb.OldImage != nil && out.Records[1].Dynamodb.NewImage != nil && out.NextShardIterator != nil, "images or NextShardIterator missing")
	}},
	{"GetRecords", "Limit over 1000 is ValidationException", "API_streams_GetRecords.html#DDB-streams_GetRecords-request-Limit", func(e *confEnv) error {
		d, err := e.s.DescribeStream(e.ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(e.arn)})
		if err != nil {
			return err
		}
		it, err := e.s.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(e.arn), ShardId: d.StreamDescription.Shards[0].ShardId,
			ShardIteratorType: streamtypes.ShardIteratorTypeLatest})
		if err != nil {
			return err
		}
		_, err = e.s.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(1001)})
		return wantAPI(err, "ValidationException")
	}},
}

// TestConformance runs the cases in order against one server: they share two
// tables, "conf" (pk S, sk N, a NEW_AND_OLD_IMAGES stream) and "conf-plain" (pk S).
func TestConformance(t *testing.T) {
	e := newDP(t, Options{})
	ctx := context.Background()
	in := pkTableInput("conf")
	in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeN})
	in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange})
	in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
	out, err := e.c.CreateTable(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CreateTable(ctx, pkTableInput("conf-plain")); err != nil {
		t.Fatal(err)
	}
	env := &confEnv{t: t, c: e.c, s: newStreamsClient(e.url), ctx: ctx, arn: aws.ToString(out.TableDescription.LatestStreamArn)}
	for _, tc := range confCases {
		t.Run(tc.op+"/"+tc.name, func(t *testing.T) {
			if err := tc.run(env); err != nil {
				t.Errorf("%s: %s: %v (doc %s%s)", tc.op, tc.name, err, apiRef, tc.doc)
			}
		})
	}
}

// TestConformanceCoversEveryOperation fails for an operation the server serves
// without a conformance case.
func TestConformanceCoversEveryOperation(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range confCases {
		covered[tc.op] = true
	}
	opsMu.RLock()
	defer opsMu.RUnlock()
	for target := range ops {
		name := target[strings.IndexByte(target, '.')+1:]
		if !covered[name] {
			t.Errorf("%s is served but has no conformance case", target)
		}
	}
}
