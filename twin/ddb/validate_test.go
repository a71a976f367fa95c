package ddb

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// nested returns a value nested depth lists deep.
func nested(depth int) av {
	v := s("leaf")
	for i := 0; i < depth; i++ {
		v = &types.AttributeValueMemberL{Value: []av{v}}
	}
	return v
}

func TestItemValidation(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "val", tableSpec{sk: types.ScalarAttributeTypeN, gsiProj: types.ProjectionTypeAll})
	ctx := context.Background()
	big := strings.Repeat("x", 400*1024)
	cases := []struct {
		name      string
		item      map[string]av
		code, msg string
	}{
		{"missing sort key", map[string]av{"pk": s("a")}, "ValidationException", "Missing the key sk in the item"},
		{"key type", map[string]av{"pk": s("a"), "sk": s("1")}, "ValidationException", "Type mismatch for key sk expected: N actual: S"},
		{"empty hash key", map[string]av{"pk": s(""), "sk": n("1")}, "ValidationException", "cannot contain an empty string value. Key: pk"},
		{"hash key too long", map[string]av{"pk": s(strings.Repeat("h", 2049)), "sk": n("1")}, "ValidationException", "Size of hashkey has exceeded the maximum size limit of 2048 bytes"},
		{"index key type", map[string]av{"pk": s("a"), "sk": n("1"), "g1": n("3")}, "ValidationException", "Type mismatch for Index Key g1 Expected: S Actual: N IndexName: gsi"},
		{"empty index key", map[string]av{"pk": s("a"), "sk": n("1"), "g1": s("")}, "ValidationException", "IndexName: gsi, IndexKey: g1"},
		{"too big", map[string]av{"pk": s("a"), "sk": n("1"), "big": s(big)}, "ValidationException", "Item size has exceeded the maximum allowed size"},
		{"too deep", map[string]av{"pk": s("a"), "sk": n("1"), "deep": nested(32)}, "ValidationException", "Nesting Levels have exceeded supported limits"},
		{"bad number", map[string]av{"pk": s("a"), "sk": n("1e200")}, "ValidationException", "Number overflow"},
		{"empty set", map[string]av{"pk": s("a"), "sk": n("1"), "ss": &types.AttributeValueMemberSS{Value: []string{}}}, "ValidationException", "may not be empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("val"), Item: c.item})
			wantCode(t, err, c.code, c.msg)
		})
	}
	// At the limits exactly: accepted.
	okItems := []map[string]av{
		{"pk": s(strings.Repeat("h", 2048)), "sk": n("1")},
		{"pk": s("a"), "sk": n("1"), "deep": nested(31)}, // 32 levels with the attribute itself
		{"pk": s("a"), "sk": n("2"), "big": s(big[:400*1024-len("pk")-1-len("sk")-2-len("big")])},
	}
	for i, it := range okItems {
		if _, err := e.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("val"), Item: it}); err != nil {
			t.Fatalf("item %d at the limit: %v", i, err)
		}
	}
}

func TestKeyValidation(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "keys", tableSpec{sk: types.ScalarAttributeTypeS})
	ctx := context.Background()
	for _, c := range []struct {
		name string
		key  map[string]av
		msg  string
	}{
		{"missing", map[string]av{"pk": s("a")}, "The provided key element does not match the schema"},
		{"extra", map[string]av{"pk": s("a"), "sk": s("b"), "x": s("c")}, "The provided key element does not match the schema"},
		{"type", map[string]av{"pk": s("a"), "sk": n("1")}, "The provided key element does not match the schema"},
		{"range too long", map[string]av{"pk": s("a"), "sk": s(strings.Repeat("r", 1025))}, "Aggregated size of all range keys has exceeded the size limit of 1024 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("keys"), Key: c.key})
			wantCode(t, err, "ValidationException", c.msg)
		})
	}
	_, err := e.c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("nope"), Key: map[string]av{"pk": s("a")}})
	wantCode(t, err, "ResourceNotFoundException", "Requested resource not found")
}

func TestLegacyParametersRefused(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "legacy", tableSpec{})
	ctx := context.Background()
	_, err := e.c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String("legacy"), Item: map[string]av{"pk": s("a")},
		Expected: map[string]types.ExpectedAttributeValue{"pk": {Exists: aws.Bool(false)}},
	})
	wantCode(t, err, "ValidationException", "Expected is not supported by this local DynamoDB: use ConditionExpression")
	_, err = e.c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("legacy"), Key: map[string]av{"pk": s("a")}, AttributesToGet: []string{"pk"}})
	wantCode(t, err, "ValidationException", "use ProjectionExpression")
	_, err = e.c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("legacy"), KeyConditions: map[string]types.Condition{
		"pk": {ComparisonOperator: types.ComparisonOperatorEq, AttributeValueList: []av{s("a")}}}})
	wantCode(t, err, "ValidationException", "use KeyConditionExpression")
	_, err = e.c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("legacy"), ScanFilter: map[string]types.Condition{
		"pk": {ComparisonOperator: types.ComparisonOperatorNotNull}}})
	wantCode(t, err, "ValidationException", "use FilterExpression")
	_, err = e.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("legacy"), Key: map[string]av{"pk": s("a")},
		AttributeUpdates: map[string]types.AttributeValueUpdate{"x": {Action: types.AttributeActionPut, Value: s("1")}}})
	wantCode(t, err, "ValidationException", "use UpdateExpression")
}

func TestPlaceholderKeys(t *testing.T) {
	e := newDP(t, Options{})
	e.create(t, "ph1", tableSpec{})
	ctx := context.Background()
	get := func(names map[string]string, proj string) error {
		_, err := e.c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("ph1"), Key: map[string]av{"pk": s("a")},
			ProjectionExpression: aws.String(proj), ExpressionAttributeNames: names})
		return err
	}
	wantCode(t, get(map[string]string{"#a-b": "x"}, "#a-b"), "ValidationException", `ExpressionAttributeNames contains invalid key: Syntax error; key: "#a-b"`)
	wantCode(t, get(map[string]string{"a": "x", "#a": "x"}, "#a"), "ValidationException", `ExpressionAttributeNames contains invalid key: Syntax error; key: "a"`)
	wantCode(t, get(map[string]string{}, "pk"), "ValidationException", "ExpressionAttributeNames must not be empty")
	if err := get(map[string]string{"#A_1": "pk"}, "#A_1"); err != nil {
		t.Fatalf("a valid placeholder: %v", err)
	}
	_, err := e.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("ph1"), Item: map[string]av{"pk": s("a")},
		ConditionExpression: aws.String("attribute_not_exists(pk)"), ExpressionAttributeValues: map[string]av{"v": s("x")}})
	wantCode(t, err, "ValidationException", `ExpressionAttributeValues contains invalid key: Syntax error; key: "v"`)
	_, err = e.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("ph1"), Item: map[string]av{"pk": s("a")},
		ConditionExpression: aws.String("attribute_not_exists(pk) OR v = :v"), ExpressionAttributeValues: map[string]av{":v": nested(32)}})
	wantCode(t, err, "ValidationException", "Nesting Levels have exceeded supported limits")
}
