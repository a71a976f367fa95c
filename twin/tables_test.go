package twin_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/ddb"
	"github.com/fourlanes/fourlanes/twin/localaws"
	"github.com/fourlanes/fourlanes/twin/twintest"
)

// tableTemplate is a stack of one table with a sort key, an index, a stream and TTL;
// sortKey names the sort key attribute.
func tableTemplate(t *testing.T, sortKey string) *cfn.Template {
	t.Helper()
	tmpl, err := cfn.Parse([]byte(fmt.Sprintf(`{"Resources": {"Log": {"Type": "AWS::DynamoDB::Table", "Properties": {
		"AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": %[1]q, "AttributeType": "N"},
			{"AttributeName": "g", "AttributeType": "S"}],
		"KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": %[1]q, "KeyType": "RANGE"}],
		"GlobalSecondaryIndexes": [{"IndexName": "by-g", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}], "Projection": {"ProjectionType": "KEYS_ONLY"}}],
		"StreamSpecification": {"StreamViewType": "NEW_AND_OLD_IMAGES"},
		"TimeToLiveSpecification": {"AttributeName": "expires", "Enabled": true},
		"BillingMode": "PAY_PER_REQUEST"}}}}`, sortKey)))
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// A DynamoDB that keeps its state (`fourlanes dev -data`) still holds the stack's tables
// when the twin comes up again after a restart of both: the twin keeps a table that
// matches the template, with its items and stream, and refuses one that does not.
func TestTwinKeepsAMatchingTable(t *testing.T) {
	_, sqsEP := twintest.Endpoints(t)
	dataDir := t.TempDir()
	serve := func() *localaws.Server {
		srv, err := localaws.ServeDynamoDB(t.Context(), "127.0.0.1:0", ddb.Options{DataDir: dataDir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Stop)
		return srv
	}
	stack := fmt.Sprintf("keep%08x", rand.Uint32())
	up := func(ddbEP string, tmpl *cfn.Template) (*twin.Twin, error) {
		return twin.Up(t.Context(), twin.Config{
			Template: tmpl, StackName: stack,
			DynamoDBEndpoint: ddbEP, SQSEndpoint: sqsEP,
			Code:   func(*cfn.Template, *cfn.Resource) (string, error) { return fakeBin, nil },
			Logger: twintest.Logger(t),
		})
	}

	srv := serve()
	db := localaws.NewDynamoDB(srv.Endpoint)
	first, err := up(srv.Endpoint, tableTemplate(t, "seq"))
	if err != nil {
		t.Fatal(err)
	}
	name, err := first.TableName("Log")
	if err != nil {
		t.Fatal(err)
	}
	streamARN, _ := first.StreamARN("Log")
	key := map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "t1"}, "seq": &ddbtypes.AttributeValueMemberN{Value: "1"}}
	if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(name), Item: key}); err != nil {
		t.Fatalf("put: %v", err)
	}
	first.Close()
	srv.Stop() // what Ctrl-C on `make dev` does: the state is written to dataDir

	srv = serve()
	db = localaws.NewDynamoDB(srv.Endpoint)
	second, err := up(srv.Endpoint, tableTemplate(t, "seq"))
	if err != nil {
		t.Fatalf("second Up on the same DynamoDB: %v", err)
	}
	defer second.Close()
	if got, _ := second.TableName("Log"); got != name {
		t.Errorf("table name on the second Up: got %s, want %s", got, name)
	}
	if got, _ := second.StreamARN("Log"); got != streamARN || got == "" {
		t.Errorf("stream ARN on the second Up: got %q, want the first's %q", got, streamARN)
	}
	got, err := db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(name), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item == nil {
		t.Errorf("item put before the second Up: got %v, err %v; want it kept", got.Item, err)
	}
	ttl, err := db.DescribeTimeToLive(t.Context(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil || ttl.TimeToLiveDescription.TimeToLiveStatus != ddbtypes.TimeToLiveStatusEnabled {
		t.Errorf("TTL after the second Up: got %+v, err %v; want ENABLED", ttl, err)
	}

	_, err = up(srv.Endpoint, tableTemplate(t, "version"))
	if err == nil || !strings.Contains(err.Error(), "key schema") {
		t.Errorf("Up with another sort key on the kept table: got %v, want an error naming the key schema", err)
	}
}
