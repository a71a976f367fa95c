package ddb_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/twin/ddb"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// TestLargeResponsesNoRetries runs many Queries answered by a 20 KB page through
// localaws's client with retries off. With the SDK's default HTTP client instead, 7 of
// 8,000 (four runs of 2,000: 2, 4, 1, 0) failed here with "deserialization failed ... use of closed network connection"
// (aws/aws-sdk-go-v2#2737, see localaws.HTTPClient): a response larger than the
// client's read buffer was cut when the transport's write loop tore the connection down.
func TestLargeResponsesNoRetries(t *testing.T) {
	calls := 2000
	if testing.Short() {
		calls = 200
	}
	db := ddb.New(ddb.Options{TTLSweep: -1})
	srv := httptest.NewServer(db.Handler())
	t.Cleanup(func() {
		srv.Close()
		db.Close()
	})
	c := localaws.NewDynamoDB(srv.URL, func(o *dynamodb.Options) { o.Retryer = aws.NopRetryer{} })
	ctx := context.Background()
	if _, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String("big"),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	}); err != nil {
		t.Fatal(err)
	}
	payload := &types.AttributeValueMemberS{Value: strings.Repeat("x", 2000)}
	for i := range 10 {
		if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("big"), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "p"}, "sk": &types.AttributeValueMemberN{Value: string(rune('0' + i))}, "payload": payload,
		}}); err != nil {
			t.Fatal(err)
		}
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String("big"),
		KeyConditionExpression:    aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "p"}},
	}
	failed := 0
	var first error
	for range calls {
		out, err := c.Query(ctx, in)
		if err != nil {
			if first == nil {
				first = err
			}
			failed++
			continue
		}
		if len(out.Items) != 10 {
			t.Fatalf("Query: got %d items, want 10", len(out.Items))
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d Queries failed; first: %v", failed, calls, first)
	}
}
