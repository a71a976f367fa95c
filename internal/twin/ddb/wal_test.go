package ddb

import (
	"context"
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
