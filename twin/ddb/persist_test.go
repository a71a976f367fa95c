package ddb

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// serve starts an HTTP server and a client for db; stop closes the server only.
func serve(db *DB) (c *dynamodb.Client, stop func()) {
	srv := httptest.NewServer(db.Handler())
	return newDDBClient(srv.URL), srv.Close
}

func TestPersistenceAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db := New(Options{DataDir: dir, TTLSweep: -1})
	c, stop := serve(db)
	e := &dpEnv{db: db, c: c}
	e.create(t, "persisted", tableSpec{sk: types.ScalarAttributeTypeN, gsiProj: types.ProjectionTypeAll})
	if _, err := c.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String("persisted"),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("persisted"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("exp"), Enabled: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		e.put(t, "persisted", map[string]av{"pk": s(fmt.Sprint("p", i%5)), "sk": ni(i), "g1": s("g"), "g2": ni(i), "big": n("12345678901234567890123456789012345678")})
	}
	// Every change is in the log as soon as it is acknowledged.
	if _, wals, err := db.ext.persist.files(); err != nil || len(wals) != 1 {
		t.Fatalf("logs in the data dir: %v %v, want one", wals, err)
	} else if st, err := os.Stat(walPath(dir, wals[0])); err != nil || st.Size() == 0 {
		t.Fatalf("the log after 50 writes: %v, size %d, want the writes in it", err, st.Size())
	}
	e.put(t, "persisted", map[string]av{"pk": s("last"), "sk": ni(0)}) // written on Close
	before, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("persisted")})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if snaps, wals, _ := db.ext.persist.files(); len(snaps) != 1 || len(wals) != 1 {
		t.Fatalf("data dir after Close: snapshots %v, logs %v, want one of each (the older ones removed)", snaps, wals)
	}

	db2 := New(Options{DataDir: dir, TTLSweep: -1})
	defer db2.Close()
	c2, stop2 := serve(db2)
	defer stop2()
	e2 := &dpEnv{db: db2, c: c2}
	after, err := c2.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("persisted")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt64(after.Table.ItemCount) != 51 || aws.ToString(after.Table.LatestStreamArn) != aws.ToString(before.Table.LatestStreamArn) ||
		aws.ToString(after.Table.TableArn) != aws.ToString(before.Table.TableArn) || aws.ToInt64(after.Table.TableSizeBytes) != aws.ToInt64(before.Table.TableSizeBytes) {
		t.Fatalf("after restart: items %d, stream %s (was %s), size %d (was %d)", aws.ToInt64(after.Table.ItemCount),
			aws.ToString(after.Table.LatestStreamArn), aws.ToString(before.Table.LatestStreamArn), aws.ToInt64(after.Table.TableSizeBytes), aws.ToInt64(before.Table.TableSizeBytes))
	}
	ttl, err := c2.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String("persisted")})
	if err != nil || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "exp" {
		t.Fatalf("TTL after restart: %v %+v", err, ttl)
	}
	if got := e2.get(t, "persisted", map[string]av{"pk": s("last"), "sk": ni(0)}); got == nil {
		t.Fatal("the write before Close was lost")
	}
	if got := strOf(t, e2.get(t, "persisted", map[string]av{"pk": s("p3"), "sk": ni(3)})["big"]); got != "12345678901234567890123456789012345678" {
		t.Fatalf("number after restart: %s", got)
	}
	items, _ := e2.queryAll(t, dynamodb.QueryInput{TableName: aws.String("persisted"), IndexName: aws.String("gsi"),
		KeyConditionExpression: aws.String("g1 = :g AND g2 >= :x"), ExpressionAttributeValues: map[string]av{":g": s("g"), ":x": n("45")}})
	if len(items) != 5 {
		t.Fatalf("GSI after restart: %d items, want 5", len(items))
	}
	// Writes after the restart keep working, and the stream keeps its records.
	e2.put(t, "persisted", map[string]av{"pk": s("new"), "sk": ni(1)})
	if got := streamRecords(t, db2, aws.ToString(after.Table.LatestStreamArn)); got != 52 {
		t.Fatalf("stream after restart: %d records, want 51 from before and 1 after", got)
	}
}

// streamRecords counts a stream's records through the Streams API.
func streamRecords(t *testing.T, db *DB, arn string) int {
	t.Helper()
	srv := httptest.NewServer(db.Handler())
	defer srv.Close()
	sc := newStreamsClient(srv.URL)
	ctx := context.Background()
	d, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, sh := range d.StreamDescription.Shards {
		it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		for iter != nil {
			out, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			total += len(out.Records)
			if len(out.Records) == 0 {
				break
			}
			iter = out.NextShardIterator
		}
	}
	return total
}

func TestPersistenceRefusesToOverwriteABadFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, stateFile)
	if err := os.WriteFile(file, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := New(Options{DataDir: dir, TTLSweep: -1})
	c, stop := serve(db)
	e := &dpEnv{db: db, c: c}
	e.create(t, "fresh", tableSpec{})
	stop()
	if err := db.Close(); err == nil {
		t.Fatal("Close over an unreadable state file: no error")
	}
	if b, _ := os.ReadFile(file); string(b) != "{not json" {
		t.Fatalf("the unreadable file was overwritten: %q", b)
	}
	// The servers open it with Open: the error names the folder, the file and
	// what to do, and nothing runs.
	if db, err := Open(Options{DataDir: dir, TTLSweep: -1}); err == nil {
		db.Close()
		t.Fatal("Open over an unreadable state file: no error")
	} else if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, stateFile) || !strings.Contains(msg, "move") {
		t.Fatalf("Open's error %q: want the folder, the file and what to do", msg)
	}
	if b, _ := os.ReadFile(file); string(b) != "{not json" {
		t.Fatalf("Open overwrote the unreadable file: %q", b)
	}
}

// TestSnapshotIsOneCut: while one item is rewritten as fast as possible and
// snapshots are taken meanwhile, the state a restart reads (the last snapshot and
// the log after it) holds exactly as many stream records as the item's counter
// says: a snapshot's cut and the log's order agree.
func TestSnapshotIsOneCut(t *testing.T) {
	dir := t.TempDir()
	db := New(Options{DataDir: dir, TTLSweep: -1})
	run := func(db *DB, target, body string) {
		if _, err := ops[targetDynamoDB+target](context.Background(), db, []byte(body)); err != nil {
			t.Error(err)
		}
	}
	run(db, "CreateTable", `{"TableName":"cut","BillingMode":"PAY_PER_REQUEST",
		"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],
		"StreamSpecification":{"StreamEnabled":true,"StreamViewType":"NEW_IMAGE"}}`)
	for i := range 50 {
		run(db, "CreateTable", fmt.Sprintf(`{"TableName":"other%03d","BillingMode":"PAY_PER_REQUEST",
			"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}]}`, i))
	}
	const writes = 3000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= writes; i++ {
			run(db, "PutItem", fmt.Sprintf(`{"TableName":"cut","Item":{"pk":{"S":"x"},"n":{"N":"%d"}}}`, i))
		}
	}()
	snaps := 0
	for {
		select {
		case <-done:
		default:
			if err := db.ext.persist.snapshot(); err != nil {
				t.Fatal(err)
			}
			snaps++
			continue
		}
		break
	}
	t.Logf("%d snapshots during %d writes", snaps, writes)
	// Read the data dir as a restart after a crash would: no Close, no last snapshot.
	db2 := New(Options{DataDir: dir, TTLSweep: -1})
	defer db2.Close()
	defer db.Close()
	c, stop := serve(db2)
	defer stop()
	e := &dpEnv{db: db2, c: c}
	if got := strOf(t, e.get(t, "cut", map[string]av{"pk": s("x")})["n"]); got != fmt.Sprint(writes) {
		t.Fatalf("after a restart: counter %s, want %d", got, writes)
	}
	d, err := c.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String("cut")})
	if err != nil {
		t.Fatal(err)
	}
	if got := streamRecords(t, db2, aws.ToString(d.Table.LatestStreamArn)); got != writes {
		t.Fatalf("after a restart: %d stream records, want %d", got, writes)
	}
}
