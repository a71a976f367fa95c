package ddb

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestUpgradeFromJSONState opens a DataDir written by the previous version
// (testdata/v1-state/ddb-state.json: the whole state as one JSON file, made by that
// version's own code) and finds everything in it; the file becomes the first
// snapshot, is renamed aside, and the folder keeps working across a further restart.
func TestUpgradeFromJSONState(t *testing.T) {
	dir := t.TempDir()
	old, err := os.ReadFile(filepath.Join("testdata", "v1-state", stateFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, stateFile), old, 0o644); err != nil {
		t.Fatal(err)
	}
	clock := NewTestClock(time.Date(2026, 11, 30, 12, 1, 0, 0, time.UTC))
	open := func() (*DB, *dpEnv, func()) {
		db, err := Open(Options{DataDir: dir, TTLSweep: -1, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(db.Handler())
		return db, &dpEnv{db: db, url: srv.URL, c: newDDBClient(srv.URL)}, srv.Close
	}
	db, e, stop := open()
	if _, err := os.Stat(filepath.Join(dir, stateFile)); err == nil {
		t.Errorf("%s is still there after the upgrade", stateFile)
	}
	if _, err := os.Stat(filepath.Join(dir, stateFile+".upgraded")); err != nil {
		t.Errorf("the old state was not kept aside: %v", err)
	}
	if snaps, _, _ := db.ext.persist.files(); len(snaps) != 1 {
		t.Errorf("snapshots after the upgrade: %v, want one", snaps)
	}
	ctx := context.Background()
	check := func(e *dpEnv, s0 int) {
		t.Helper()
		d, err := e.c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("orders")})
		if err != nil {
			t.Fatal(err)
		}
		if n := aws.ToInt64(d.Table.ItemCount); n < 19 {
			t.Errorf("orders: %d items, want 19 (20 put, one deleted) or more", n)
		}
		if len(d.Table.GlobalSecondaryIndexes) != 1 || d.Table.GlobalSecondaryIndexes[0].IndexStatus != types.IndexStatusActive {
			t.Errorf("orders' GSI: %+v, want by-status ACTIVE", d.Table.GlobalSecondaryIndexes)
		}
		item := e.get(t, "orders", map[string]av{"pk": s("t1"), "sk": ni(5)})
		if strOf(t, item["status"]) != "s1" || len(item["tags"].(*types.AttributeValueMemberSS).Value) != 2 {
			t.Errorf("orders t1/5: %v", item)
		}
		if e.get(t, "orders", map[string]av{"pk": s("t0"), "sk": ni(0)}) != nil {
			t.Error("orders t0/0 was deleted before the upgrade and is back")
		}
		items, _ := e.queryAll(t, dynamodb.QueryInput{TableName: aws.String("orders"), IndexName: aws.String("by-status"),
			KeyConditionExpression: aws.String("#s = :s"), ExpressionAttributeNames: map[string]string{"#s": "status"}, ExpressionAttributeValues: map[string]av{":s": s("s0")}})
		if len(items) != s0 {
			t.Errorf("the GSI after the upgrade: %d items of s0, want %d", len(items), s0)
		}
		if strOf(t, e.get(t, "plain", map[string]av{"id": bin([]byte{1, 2, 3})})["big"]) != "12345678901234567890123456789012345678" {
			t.Error("plain's item lost its 38-digit number")
		}
		ttl, err := e.c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String("orders")})
		if err != nil || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "exp" {
			t.Errorf("TTL after the upgrade: %v %+v", err, ttl)
		}
		if n := streamCount(t, e, aws.ToString(d.Table.LatestStreamArn)); n < 21 {
			t.Errorf("the stream after the upgrade: %d records, want the 21 of before (20 puts, a delete) or more", n)
		}
	}
	check(e, 9)
	e.put(t, "orders", map[string]av{"pk": s("after"), "sk": ni(1), "status": s("s0")})
	stop()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, e, stop = open()
	defer db.Close()
	defer stop()
	check(e, 10)
	if e.get(t, "orders", map[string]av{"pk": s("after"), "sk": ni(1)}) == nil {
		t.Error("the write after the upgrade was lost")
	}
}
