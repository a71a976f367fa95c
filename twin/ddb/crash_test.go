package ddb

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// helperDirEnv makes the test binary a DynamoDB server on that DataDir (TestMain),
// so the crash tests run the server as a real process of its own and SIGKILL it.
const helperDirEnv = "FOURLANES_DDB_HELPER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperDirEnv); dir != "" {
		os.Exit(serveHelper(dir))
	}
	os.Exit(m.Run())
}

// serveHelper opens dir, prints "open <duration> <endpoint>" and serves until killed.
func serveHelper(dir string) int {
	start := time.Now()
	db, err := Open(Options{DataDir: dir, TTLSweep: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	took := time.Since(start)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("open %s http://%s\n", took, ln.Addr())
	_ = http.Serve(ln, db.Handler())
	return 0
}

// serverProcess is the helper server running in a process of its own.
type serverProcess struct {
	cmd      *exec.Cmd
	endpoint string
	opened   time.Duration
}

func startProcess(t *testing.T, dir string) *serverProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the server process printed no endpoint: %v", err)
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "open" {
		t.Fatalf("the server process printed %q", line)
	}
	took, err := time.ParseDuration(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return &serverProcess{cmd: cmd, endpoint: f[2], opened: took}
}

// kill sends SIGKILL: no Close, no last snapshot, nothing flushed by the process.
func (sp *serverProcess) kill(t *testing.T) {
	t.Helper()
	if err := sp.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = sp.cmd.Wait()
}

// streamLog reads every record of the stream: sequence number, event and key.
func streamLog(t *testing.T, sc *dynamodbstreams.Client, arn string) []string {
	t.Helper()
	ctx := context.Background()
	d, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, sh := range d.StreamDescription.Shards {
		it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		for iter := it.ShardIterator; iter != nil; {
			r, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range r.Records {
				pk := rec.Dynamodb.Keys["pk"].(*streamtypes.AttributeValueMemberS).Value
				out = append(out, aws.ToString(sh.ShardId)+"/"+aws.ToString(rec.Dynamodb.SequenceNumber)+" "+string(rec.EventName)+" "+pk)
			}
			if len(r.Records) == 0 {
				break
			}
			iter = r.NextShardIterator
		}
	}
	return out
}

// TestNothingLostOnSIGKILL runs the server as a process of its own with a DataDir,
// makes every kind of change through the SDK, kills the process with SIGKILL right
// after the last acknowledgement, starts it again on the same folder and reads
// everything back: items, the stream's records with their shards and sequence
// numbers, TTL, an index created online. Twice, so a log that already went through
// one restart is replayed too.
func TestNothingLostOnSIGKILL(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	sp := startProcess(t, dir)
	c := newDDBClient(sp.endpoint)
	in := pkTableInput("crash")
	in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
	if _, err := c.CreateTable(ctx, in); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("crash"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("exp"), Enabled: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // pk → n
	round := func(c *dynamodb.Client, r int) {
		for i := range 100 {
			pk := fmt.Sprintf("r%d-%d", r, i)
			if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("crash"), Item: map[string]av{"pk": s(pk), "n": ni(i), "g": s("x")}}); err != nil {
				t.Fatal(err)
			}
			want[pk] = fmt.Sprint(i)
		}
		for i := 0; i < 100; i += 10 {
			pk := fmt.Sprintf("r%d-%d", r, i)
			if _, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("crash"), Key: map[string]av{"pk": s(pk)},
				UpdateExpression: aws.String("SET n = n + :k"), ExpressionAttributeValues: map[string]av{":k": ni(1000)}}); err != nil {
				t.Fatal(err)
			}
			want[pk] = fmt.Sprint(i + 1000)
		}
		if _, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("crash"), Key: map[string]av{"pk": s(fmt.Sprintf("r%d-1", r))}}); err != nil {
			t.Fatal(err)
		}
		delete(want, fmt.Sprintf("r%d-1", r))
		var txn []types.TransactWriteItem
		for i := range 3 {
			pk := fmt.Sprintf("r%d-tx%d", r, i)
			txn = append(txn, types.TransactWriteItem{Put: &types.Put{TableName: aws.String("crash"), Item: map[string]av{"pk": s(pk), "n": ni(i)}}})
			want[pk] = fmt.Sprint(i)
		}
		if _, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: txn}); err != nil {
			t.Fatal(err)
		}
		var batch []types.WriteRequest
		for i := range 5 {
			pk := fmt.Sprintf("r%d-b%d", r, i)
			batch = append(batch, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]av{"pk": s(pk), "n": ni(i)}}})
			want[pk] = fmt.Sprint(i)
		}
		if _, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"crash": batch}}); err != nil {
			t.Fatal(err)
		}
	}
	round(c, 1)
	if _, err := c.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String("crash"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS}},
		GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{IndexName: aws.String("byg"),
			KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}}, Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}}}}}); err != nil {
		t.Fatal(err)
	}
	d, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("crash")})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(d.Table.LatestStreamArn)

	check := func(c *dynamodb.Client, sc *dynamodbstreams.Client, wantLog []string) {
		t.Helper()
		got := map[string]string{}
		var esk map[string]av
		for {
			out, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("crash"), ExclusiveStartKey: esk, ConsistentRead: aws.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range out.Items {
				got[strOf(t, it["pk"])] = strOf(t, it["n"])
			}
			if esk = out.LastEvaluatedKey; esk == nil {
				break
			}
		}
		if len(got) != len(want) {
			t.Errorf("after SIGKILL and restart: %d items, want %d", len(got), len(want))
		}
		for pk, n := range want {
			if got[pk] != n {
				t.Errorf("after SIGKILL and restart: %s has n=%q, want %q", pk, got[pk], n)
			}
		}
		if log := streamLog(t, sc, arn); strings.Join(log, "\n") != strings.Join(wantLog, "\n") {
			t.Errorf("after SIGKILL and restart: the stream holds %d records, want the %d it had, in the same shards with the same sequence numbers", len(log), len(wantLog))
		}
		ttl, err := c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String("crash")})
		if err != nil || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "exp" {
			t.Errorf("TTL after restart: %v %+v", err, ttl)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			out, err := c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("crash"), IndexName: aws.String("byg"),
				KeyConditionExpression: aws.String("g = :g"), ExpressionAttributeValues: map[string]av{":g": s("x")}, Select: types.SelectCount})
			if err == nil {
				if n := 0; true {
					for pk := range want {
						if !strings.Contains(pk, "tx") && !strings.Contains(pk, "-b") {
							n++
						}
					}
					if int(out.Count) != n {
						t.Errorf("the GSI after restart: %d items, want %d", out.Count, n)
					}
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the GSI after restart: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	log1 := streamLog(t, newStreamsClient(sp.endpoint), arn)
	sp.kill(t)

	sp = startProcess(t, dir)
	check(newDDBClient(sp.endpoint), newStreamsClient(sp.endpoint), log1)
	round(newDDBClient(sp.endpoint), 2)
	log2 := streamLog(t, newStreamsClient(sp.endpoint), arn)
	sp.kill(t)

	sp = startProcess(t, dir)
	check(newDDBClient(sp.endpoint), newStreamsClient(sp.endpoint), log2)
	t.Logf("restarts took %s (after two kills)", sp.opened)
}
