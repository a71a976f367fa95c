package localaws_test

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/fourlanes/fourlanes/twin/localaws"
)

func TestMain(m *testing.M) { localaws.Main(m) }

// start starts a private server for tests of the start-up path itself, with the same
// skip-or-fail rule as the shared servers.
func start(t *testing.T, startFn func(context.Context) (*localaws.Server, error)) *localaws.Server {
	t.Helper()
	begin := time.Now()
	srv, err := startFn(t.Context())
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); errors.Is(err, localaws.ErrNotInstalled) && !ci {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s answered on %s after %v", srv.Name, srv.Endpoint, time.Since(begin).Round(time.Millisecond))
	t.Cleanup(srv.Stop)
	return srv
}

// assertStopped checks that nothing listens at the server's endpoint any more.
func assertStopped(t *testing.T, srv *localaws.Server) {
	t.Helper()
	u, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still listening on %s after Stop", srv.Name, u.Host)
	}
}

func TestStartDynamoDB(t *testing.T) {
	srv := start(t, localaws.StartDynamoDB)
	if u, err := url.Parse(srv.Endpoint); err != nil || u.Hostname() != "127.0.0.1" {
		t.Errorf("endpoint %q: want http://127.0.0.1:<port>", srv.Endpoint)
	}

	// The environment variable wins over the shared server: this client reaches srv.
	t.Setenv(localaws.EnvDynamoDBEndpoint, srv.Endpoint)
	// (Not CreateTable: its clean-up would run after Stop.)
	name := localaws.UniqueName(t, "tbl")
	_, err := localaws.DynamoDB(t).CreateTable(t.Context(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := localaws.NewDynamoDB(srv.Endpoint).ListTables(t.Context(), &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out.TableNames, []string{name}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("tables on the private server: got %v, want %v", got, want)
	}

	// Every response carries x-amz-crc32, errors included, so clients check it as against AWS.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.Endpoint, strings.NewReader(`{"TableName":"no-such-table"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.DescribeTable")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("DescribeTable of a missing table: got status %d, want 400", resp.StatusCode)
	}
	if got, want := resp.Header.Get("X-Amz-Crc32"), strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10); got != want {
		t.Errorf("x-amz-crc32 on an error response: got %q, want %q (the CRC32 of %s)", got, want, body)
	}

	srv.Stop()
	srv.Stop() // idempotent
	assertStopped(t, srv)
}

func TestStartElasticMQ(t *testing.T) {
	srv := start(t, localaws.StartElasticMQ)
	t.Setenv(localaws.EnvSQSEndpoint, srv.Endpoint)
	name := localaws.UniqueName(t, "q")
	created, err := localaws.SQS(t).CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(name)}) // not CreateQueue: Stop comes first
	if err != nil {
		t.Fatal(err)
	}
	queueURL := aws.ToString(created.QueueUrl)

	// Queue URLs must point back at the server: SDK calls go to the endpoint, but tools
	// (and the twin) that follow a URL must land on the same server.
	if want := srv.Endpoint + "/" + localaws.AccountID + "/" + name; queueURL != want {
		t.Errorf("queue URL: got %s, want %s", queueURL, want)
	}
	if got, want := localaws.QueueARN(t, localaws.SQS(t), queueURL), "arn:aws:sqs:"+localaws.Region+":"+localaws.AccountID+":"+name; got != want {
		t.Errorf("queue ARN: got %s, want %s", got, want)
	}

	srv.Stop()
	assertStopped(t, srv)
}

func TestUniqueName(t *testing.T) {
	valid := regexp.MustCompile(`^[A-Za-z0-9_-]{3,75}$`)
	seen := map[string]bool{}
	for _, prefix := range []string{"t", "events", "a-very-long-prefix-that-goes-on-and-on-and-on-and-on-and-on-and-on-and-on"} {
		for range 100 {
			n := localaws.UniqueName(t, prefix)
			if !valid.MatchString(n) {
				t.Fatalf("UniqueName(%q) = %q: want 3–75 of [A-Za-z0-9_-]", prefix, n)
			}
			if seen[n] {
				t.Fatalf("UniqueName(%q) repeated %q", prefix, n)
			}
			seen[n] = true
		}
	}
	t.Run("sub/test with spaces", func(t *testing.T) {
		if n := localaws.UniqueName(t, "x"); !valid.MatchString(n) {
			t.Errorf("UniqueName in a subtest = %q: want only [A-Za-z0-9_-]", n)
		}
	})
}

func TestDynamoDBTableItemsAndStream(t *testing.T) {
	ctx := t.Context()
	db := localaws.DynamoDB(t)
	table := localaws.CreateTable(t, db, &dynamodb.CreateTableInput{
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String("tenant"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("seq"), AttributeType: ddbtypes.ScalarAttributeTypeN},
		},
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String("tenant"), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String("seq"), KeyType: ddbtypes.KeyTypeRange},
		},
		StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	})
	if table.TableStatus != ddbtypes.TableStatusActive {
		t.Errorf("table status: got %s, want ACTIVE", table.TableStatus)
	}
	if table.LatestStreamArn == nil {
		t.Fatal("no LatestStreamArn on a table created with a stream")
	}

	item := map[string]ddbtypes.AttributeValue{
		"tenant": &ddbtypes.AttributeValueMemberS{Value: "t1"},
		"seq":    &ddbtypes.AttributeValueMemberN{Value: "1"},
		"kind":   &ddbtypes.AttributeValueMemberS{Value: "event"},
	}
	put := &dynamodb.PutItemInput{TableName: table.TableName, Item: item, ConditionExpression: aws.String("attribute_not_exists(tenant)")}
	if _, err := db.PutItem(ctx, put); err != nil {
		t.Fatalf("put: %v", err)
	}
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: table.TableName, Key: map[string]ddbtypes.AttributeValue{"tenant": item["tenant"], "seq": item["seq"]}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if k, ok := got.Item["kind"].(*ddbtypes.AttributeValueMemberS); !ok || k.Value != "event" {
		t.Errorf("get kind: got %#v, want S event", got.Item["kind"])
	}

	// A failed condition arrives as its typed error (its x-amz-crc32 checked, as on AWS).
	_, err = db.PutItem(ctx, put)
	if ccf := (*ddbtypes.ConditionalCheckFailedException)(nil); !errors.As(err, &ccf) {
		t.Errorf("second conditional put: got %v, want ConditionalCheckFailedException", err)
	}

	streams := localaws.DynamoDBStreams(t)
	desc, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: table.LatestStreamArn})
	if err != nil {
		t.Fatalf("describe stream: %v", err)
	}
	if n := len(desc.StreamDescription.Shards); n != 1 {
		t.Fatalf("shards: got %d, want 1", n)
	}
	it, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn:         table.LatestStreamArn,
		ShardId:           desc.StreamDescription.Shards[0].ShardId,
		ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		t.Fatalf("shard iterator: %v", err)
	}
	iter := it.ShardIterator
	var records []streamtypes.Record
	for deadline := time.Now().Add(10 * time.Second); len(records) == 0 && iter != nil; {
		if time.Now().After(deadline) {
			t.Fatal("no stream record within 10s of the put")
		}
		out, err := streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			t.Fatalf("get records: %v", err)
		}
		records, iter = out.Records, out.NextShardIterator
		if len(records) == 0 {
			time.Sleep(20 * time.Millisecond) // poll interval, bounded by the deadline above
		}
	}
	if len(records) != 1 {
		t.Fatalf("stream records: got %d, want 1 (the failed put writes none)", len(records))
	}
	r := records[0]
	if r.EventName != streamtypes.OperationTypeInsert {
		t.Errorf("eventName: got %s, want INSERT", r.EventName)
	}
	if k, ok := r.Dynamodb.NewImage["kind"].(*streamtypes.AttributeValueMemberS); !ok || k.Value != "event" {
		t.Errorf("NewImage.kind: got %#v, want S event", r.Dynamodb.NewImage["kind"])
	}
}

// receiveAll receives from queueURL until a receive comes back empty, deleting what it gets.
func receiveAll(t *testing.T, q *sqs.Client, queueURL string) []sqstypes.Message {
	t.Helper()
	var all []sqstypes.Message
	for {
		out, err := q.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if len(out.Messages) == 0 {
			return all
		}
		for _, m := range out.Messages {
			if _, err := q.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("delete: %v", err)
			}
		}
		all = append(all, out.Messages...)
	}
}

func TestSQSFIFODeduplicationAndOrder(t *testing.T) {
	q := localaws.SQS(t)
	queueURL := localaws.CreateQueue(t, q, localaws.UniqueName(t, "q"), map[string]string{"FifoQueue": "true"})

	send := func(body, group, dedup string) {
		t.Helper()
		_, err := q.SendMessage(t.Context(), &sqs.SendMessageInput{
			QueueUrl: aws.String(queueURL), MessageBody: aws.String(body),
			MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedup),
		})
		if err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
	}
	send("first", "tenant-1", "evt-1")
	send("duplicate", "tenant-1", "evt-1") // accepted, never delivered
	send("second", "tenant-1", "evt-2")
	send("third", "tenant-1", "evt-3")

	var got []string
	for _, m := range receiveAll(t, q, queueURL) {
		got = append(got, aws.ToString(m.Body))
		if g := m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]; g != "tenant-1" {
			t.Errorf("MessageGroupId: got %q, want tenant-1", g)
		}
	}
	if want := []string{"first", "second", "third"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("received: got %v, want %v", got, want)
	}
}

func TestSQSRedriveToDeadLetterQueue(t *testing.T) {
	q := localaws.SQS(t)
	dlqURL := localaws.CreateQueue(t, q, localaws.UniqueName(t, "dlq"), map[string]string{"FifoQueue": "true"})
	policy := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":1}`, localaws.QueueARN(t, q, dlqURL))
	queueURL := localaws.CreateQueue(t, q, localaws.UniqueName(t, "q"), map[string]string{
		"FifoQueue": "true", "ContentBasedDeduplication": "true", "RedrivePolicy": policy,
	})

	attrs, err := q.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameRedrivePolicy}})
	if err != nil {
		t.Fatal(err)
	}
	if attrs.Attributes["RedrivePolicy"] == "" {
		t.Fatal("RedrivePolicy attribute missing after create")
	}

	if _, err := q.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String("poison"), MessageGroupId: aws.String("tenant-1")}); err != nil {
		t.Fatalf("send: %v", err)
	}
	// First receive: a consumer takes the message and fails; it comes back at once.
	out, err := q.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), WaitTimeSeconds: 1})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("first receive: got %d messages, err %v; want 1", len(out.Messages), err)
	}
	if _, err := q.ChangeMessageVisibility(t.Context(), &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(queueURL), ReceiptHandle: out.Messages[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatalf("change visibility: %v", err)
	}
	// The next receive would be the second, over maxReceiveCount: the message moves instead.
	if got := receiveAll(t, q, queueURL); len(got) != 0 {
		t.Errorf("source queue after maxReceiveCount: got %d messages, want 0", len(got))
	}
	dead := receiveAll(t, q, dlqURL)
	if len(dead) != 1 || aws.ToString(dead[0].Body) != "poison" {
		t.Fatalf("dead-letter queue: got %d messages, want the one poison message", len(dead))
	}
}

// TestElasticMQLibDir: $FOURLANES_ELASTICMQ wins when it holds the server's
// jar, and is refused, naming it, when it does not; with neither it nor the
// per-user cache, and no Maven to install with, the error says what to do.
func TestElasticMQLibDir(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Setenv(localaws.EnvElasticMQ, dir)
	if _, err := localaws.ElasticMQLibDir(ctx, io.Discard); !errors.Is(err, localaws.ErrNotInstalled) || !strings.Contains(err.Error(), localaws.EnvElasticMQ) {
		t.Errorf("an empty $%s: %v, want ErrNotInstalled naming it", localaws.EnvElasticMQ, err)
	}
	if err := os.WriteFile(dir+"/elasticmq-server_2.13-"+localaws.ElasticMQVersion+".jar", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := localaws.ElasticMQLibDir(ctx, io.Discard); err != nil || got != dir {
		t.Errorf("$%s with the jar: %q, %v; want %q", localaws.EnvElasticMQ, got, err, dir)
	}

	t.Setenv(localaws.EnvElasticMQ, "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // an empty per-user cache
	t.Setenv("PATH", t.TempDir())           // no mvn
	_, err := localaws.ElasticMQLibDir(ctx, io.Discard)
	if !errors.Is(err, localaws.ErrNotInstalled) || !strings.Contains(err.Error(), "Maven") || !strings.Contains(err.Error(), localaws.EnvElasticMQ) {
		t.Errorf("no cache and no Maven: %v, want ErrNotInstalled saying to install Maven or set $%s", err, localaws.EnvElasticMQ)
	}
}
