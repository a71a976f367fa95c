package ddb

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// TestLogReplaysTableLifecycles: a log that holds a stream turned off and on again,
// a table deleted and created again under its name, and TTL deletions replays to
// the same state, without any snapshot (the first DB is never closed: a crash).
func TestLogReplaysTableLifecycles(t *testing.T) {
	dir := t.TempDir()
	clock := NewTestClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	db := New(Options{DataDir: dir, TTLSweep: -1, Now: clock.Now})
	srv := httptest.NewServer(db.Handler())
	defer srv.Close()
	e := &dpEnv{db: db, url: srv.URL, c: newDDBClient(srv.URL)}
	ctx := context.Background()
	in := pkTableInput("life")
	in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage}
	if _, err := e.c.CreateTable(ctx, in); err != nil {
		t.Fatal(err)
	}
	e.put(t, "life", map[string]av{"pk": s("a")})
	stream := func(on bool) {
		clock.Advance(time.Second)
		spec := &types.StreamSpecification{StreamEnabled: aws.Bool(on)}
		if on {
			spec.StreamViewType = types.StreamViewTypeKeysOnly
		}
		if _, err := e.c.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String("life"), StreamSpecification: spec}); err != nil {
			t.Fatal(err)
		}
	}
	stream(false)
	stream(true)
	e.put(t, "life", map[string]av{"pk": s("b")})
	if _, err := e.c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String("life")}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if _, err := e.c.CreateTable(ctx, in); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("life"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("exp"), Enabled: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	e.put(t, "life", map[string]av{"pk": s("c"), "exp": ni(int(clock.Now().Unix()) - 10)})
	e.put(t, "life", map[string]av{"pk": s("d")})
	if n := db.SweepTTL(); n != 1 {
		t.Fatalf("SweepTTL deleted %d items, want 1", n)
	}
	before := listStreams(t, e.url)
	// A frame cut short at the end of the log (a write the process did not finish).
	_, wals, _ := db.ext.persist.files()
	f, err := os.OpenFile(walPath(dir, wals[len(wals)-1]), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{200, 0, 0, 0, 1, 2, 3, 4, entryWrite, 3})
	f.Close()

	db2 := New(Options{DataDir: dir, TTLSweep: -1, Now: clock.Now})
	defer db2.Close()
	defer db.Close()
	if db2.ext.persist.broken != nil {
		t.Fatalf("restart: %v", db2.ext.persist.broken)
	}
	srv2 := httptest.NewServer(db2.Handler())
	defer srv2.Close()
	e2 := &dpEnv{db: db2, url: srv2.URL, c: newDDBClient(srv2.URL)}
	if e2.get(t, "life", map[string]av{"pk": s("a")}) != nil || e2.get(t, "life", map[string]av{"pk": s("b")}) != nil {
		t.Error("items of the deleted table are back in the new one")
	}
	if e2.get(t, "life", map[string]av{"pk": s("c")}) != nil {
		t.Error("the item TTL deleted is back")
	}
	if e2.get(t, "life", map[string]av{"pk": s("d")}) == nil {
		t.Error("the new table's item is lost")
	}
	if after := listStreams(t, e2.url); after != before {
		t.Errorf("streams after the replay:\n%s\nwant:\n%s", after, before)
	}
	d, err := e2.c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("life")})
	if err != nil {
		t.Fatal(err)
	}
	// The new table's stream: INSERT c, INSERT d, and TTL's REMOVE of c.
	if n := streamCount(t, e2, aws.ToString(d.Table.LatestStreamArn)); n != 3 {
		t.Errorf("the new table's stream after the replay: %d records, want 3", n)
	}
}

// listStreams renders ListStreams: every stream's ARN and its DescribeStream status.
func listStreams(t *testing.T, url string) string {
	t.Helper()
	sc := newStreamsClient(url)
	out, err := sc.ListStreams(context.Background(), &dynamodbstreams.ListStreamsInput{})
	if err != nil {
		t.Fatal(err)
	}
	s := ""
	for _, st := range out.Streams {
		d, err := sc.DescribeStream(context.Background(), &dynamodbstreams.DescribeStreamInput{StreamArn: st.StreamArn})
		if err != nil {
			t.Fatal(err)
		}
		s += aws.ToString(st.StreamArn) + " " + string(d.StreamDescription.StreamStatus) + "\n"
	}
	return s
}

// TestRestoredItemsServeEveryRead: items read back from a snapshot or a log are kept
// in binary form; every read and write of them behaves as of items never stored.
func TestRestoredItemsServeEveryRead(t *testing.T) {
	for _, clean := range []bool{true, false} {
		name := map[bool]string{true: "from a snapshot", false: "from the log"}[clean]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			clock := NewTestClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
			db := New(Options{DataDir: dir, TTLSweep: -1, Now: clock.Now})
			srv := httptest.NewServer(db.Handler())
			e := &dpEnv{db: db, url: srv.URL, c: newDDBClient(srv.URL)}
			ctx := context.Background()
			e.create(t, "rst", tableSpec{sk: types.ScalarAttributeTypeN, gsiProj: types.ProjectionTypeKeysOnly})
			if _, err := e.c.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String("rst"),
				StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.c.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("rst"),
				TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("exp"), Enabled: aws.Bool(true)}}); err != nil {
				t.Fatal(err)
			}
			for i := range 40 {
				it := map[string]av{"pk": s("p"), "sk": ni(i), "g1": s("g"), "g2": ni(i), "n": ni(i), "m": &types.AttributeValueMemberM{Value: map[string]av{"x": &types.AttributeValueMemberSS{Value: []string{"a", "b"}}}}}
				if i%10 == 0 {
					it["exp"] = ni(int(clock.Now().Unix()) + 60)
				}
				e.put(t, "rst", it)
			}
			srv.Close()
			if clean {
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				defer db.Close()
			}
			db2 := New(Options{DataDir: dir, TTLSweep: -1, Now: clock.Now})
			defer db2.Close()
			srv2 := httptest.NewServer(db2.Handler())
			defer srv2.Close()
			e2 := &dpEnv{db: db2, url: srv2.URL, c: newDDBClient(srv2.URL)}
			compact := 0
			db2.tables["rst"].items.Ascend(func(en *entry) bool {
				if en.item == nil && en.blob != "" {
					compact++
				}
				return true
			})
			if compact != 40 {
				t.Errorf("%d of 40 restored items are kept in binary form", compact)
			}
			// Whole items, written out from their binary form.
			if got := e2.get(t, "rst", map[string]av{"pk": s("p"), "sk": ni(7)}); strOf(t, got["n"]) != "7" || len(got["m"].(*types.AttributeValueMemberM).Value["x"].(*types.AttributeValueMemberSS).Value) != 2 {
				t.Errorf("GetItem of a restored item: %v", got)
			}
			all, pages := e2.queryAll(t, dynamodb.QueryInput{TableName: aws.String("rst"), KeyConditionExpression: aws.String("pk = :p"),
				ExpressionAttributeValues: map[string]av{":p": s("p")}, Limit: aws.Int32(7)})
			if len(all) != 40 || pages < 6 {
				t.Errorf("Query of restored items: %d items in %d pages, want 40 in 6 or more", len(all), pages)
			}
			for i, it := range all {
				if strOf(t, it["n"]) != fmt.Sprint(i) || strOf(t, it["g1"]) != "g" {
					t.Errorf("Query of restored items: item %d is %v", i, it)
					break
				}
			}
			items, _ := e2.queryAll(t, dynamodb.QueryInput{TableName: aws.String("rst"), KeyConditionExpression: aws.String("pk = :p AND sk >= :a"),
				FilterExpression: aws.String("n < :b"), ProjectionExpression: aws.String("sk, m.x"),
				ExpressionAttributeValues: map[string]av{":p": s("p"), ":a": ni(5), ":b": ni(10)}, Limit: aws.Int32(3)})
			if len(items) != 5 || len(items[0]) != 2 || items[0]["m"] == nil {
				t.Errorf("Query with a filter and a projection: %v", items)
			}
			gsi, _ := e2.queryAll(t, dynamodb.QueryInput{TableName: aws.String("rst"), IndexName: aws.String("gsi"),
				KeyConditionExpression: aws.String("g1 = :g AND g2 > :z"), ExpressionAttributeValues: map[string]av{":g": s("g"), ":z": ni(35)}})
			if len(gsi) != 4 || len(gsi[0]) != 4 {
				t.Errorf("Query of the KEYS_ONLY GSI: %v", gsi)
			}
			seen := 0
			for seg := int32(0); seg < 3; seg++ {
				out, err := e2.c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("rst"), Segment: aws.Int32(seg), TotalSegments: aws.Int32(3)})
				if err != nil {
					t.Fatal(err)
				}
				seen += int(out.Count)
			}
			if seen != 40 {
				t.Errorf("parallel Scan: %d items, want 40", seen)
			}
			out, err := e2.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("rst"), Key: map[string]av{"pk": s("p"), "sk": ni(3)},
				UpdateExpression: aws.String("SET n = n + :one"), ConditionExpression: aws.String("attribute_exists(m.x)"),
				ExpressionAttributeValues: map[string]av{":one": ni(1)}, ReturnValues: types.ReturnValueAllOld})
			if err != nil || strOf(t, out.Attributes["n"]) != "3" {
				t.Fatalf("UpdateItem of a restored item: %v %v", err, out)
			}
			if got := strOf(t, e2.get(t, "rst", map[string]av{"pk": s("p"), "sk": ni(3)})["n"]); got != "4" {
				t.Errorf("after the update: n %s, want 4", got)
			}
			clock.Advance(2 * time.Minute)
			if n := db2.SweepTTL(); n != 4 {
				t.Errorf("TTL swept %d restored items, want 4", n)
			}
			d, err := e2.c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("rst")})
			if err != nil || aws.ToInt64(d.Table.ItemCount) != 36 {
				t.Fatalf("DescribeTable after the sweep: %v, %d items", err, aws.ToInt64(d.Table.ItemCount))
			}
			// The update's record carries the restored item as its old image.
			if n := streamCount(t, e2, aws.ToString(d.Table.LatestStreamArn)); n != 40+1+4 {
				t.Errorf("stream: %d records, want 45", n)
			}
		})
	}
}
