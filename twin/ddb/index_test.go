package ddb

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

const docGSIOnline = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.OnlineOps.html"

// gates holds an online index change at each phase until the test lets it go.
type gates struct {
	reached map[indexPhase]chan struct{}
	release map[indexPhase]chan struct{}
}

func holdIndexPhases(db *DB) *gates {
	g := &gates{reached: map[indexPhase]chan struct{}{}, release: map[indexPhase]chan struct{}{}}
	for _, p := range []indexPhase{phaseBackfill, phaseActivate, phaseDrop} {
		g.reached[p], g.release[p] = make(chan struct{}), make(chan struct{})
	}
	db.indexHook = func(_ string, p indexPhase) {
		close(g.reached[p])
		<-g.release[p]
	}
	return g
}

func (g *gates) at(t *testing.T, p indexPhase) {
	t.Helper()
	select {
	case <-g.reached[p]:
	case <-time.After(10 * time.Second):
		t.Fatalf("the index change never reached %s", p)
	}
}

func describeGSI(t *testing.T, c *dynamodb.Client, table, name string) (tableStatus types.TableStatus, gsi *types.GlobalSecondaryIndexDescription, defs []string) {
	t.Helper()
	out, err := c.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range out.Table.AttributeDefinitions {
		defs = append(defs, aws.ToString(d.AttributeName))
	}
	for i := range out.Table.GlobalSecondaryIndexes {
		if g := &out.Table.GlobalSecondaryIndexes[i]; aws.ToString(g.IndexName) == name {
			gsi = g
		}
	}
	return out.Table.TableStatus, gsi, defs
}

func createGSIUpdate(name string, defs ...types.AttributeDefinition) *dynamodb.UpdateTableInput {
	return &dynamodb.UpdateTableInput{TableName: aws.String("online"), AttributeDefinitions: defs,
		GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: &types.CreateGlobalSecondaryIndexAction{
			IndexName:  aws.String(name),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("g1"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("g2"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}}}}
}

var gsiDefs = []types.AttributeDefinition{{AttributeName: aws.String("g1"), AttributeType: types.ScalarAttributeTypeS}, {AttributeName: aws.String("g2"), AttributeType: types.ScalarAttributeTypeN}}

func TestOnlineGSICreateAndDelete(t *testing.T) {
	e := newDP(t, Options{})
	g := holdIndexPhases(e.db)
	ctx := context.Background()
	in := pkTableInput("online")
	in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage}
	if _, err := e.c.CreateTable(ctx, in); err != nil {
		t.Fatal(err)
	}
	// Items the index will hold (g1 S, g2 N), items it leaves out: no g1, g1 of
	// another type, g1 over the 2,048-byte key limit.
	want := map[string]bool{}
	for i := range 2500 { // more than one backfill batch
		pk := fmt.Sprint("in", i)
		e.put(t, "online", map[string]av{"pk": s(pk), "g1": s(fmt.Sprint("g", i%3)), "g2": ni(i)})
		want[pk] = true
	}
	e.put(t, "online", map[string]av{"pk": s("no-g1"), "g2": ni(1)})
	e.put(t, "online", map[string]av{"pk": s("g1-number"), "g1": ni(5), "g2": ni(1)})
	e.put(t, "online", map[string]av{"pk": s("g1-huge"), "g1": s(strings.Repeat("x", 2049)), "g2": ni(1)})
	d, err := e.c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("online")})
	if err != nil {
		t.Fatal(err)
	}
	streamARN := d.Table.LatestStreamArn

	out, err := e.c.UpdateTable(ctx, createGSIUpdate("byg", gsiDefs...))
	if err != nil {
		t.Fatalf("UpdateTable Create: %v", err)
	}
	if g := out.TableDescription.GlobalSecondaryIndexes; len(g) != 1 || g[0].IndexStatus != types.IndexStatusCreating || aws.ToBool(g[0].Backfilling) {
		t.Fatalf("UpdateTable's answer: got %+v, want the index CREATING, Backfilling false (doc %s)", g, docGSIOnline)
	}
	if out.TableDescription.TableStatus != types.TableStatusUpdating {
		t.Errorf("TableStatus after Create: got %s, want UPDATING (doc %s)", out.TableDescription.TableStatus, docGSIOnline)
	}
	query := func() error {
		_, err := e.c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("online"), IndexName: aws.String("byg"),
			KeyConditionExpression: aws.String("g1 = :g"), ExpressionAttributeValues: map[string]av{":g": s("g1")}})
		return err
	}
	// Resource allocation: CREATING, Backfilling false, no reads.
	g.at(t, phaseBackfill)
	if _, gsi, _ := describeGSI(t, e.c, "online", "byg"); gsi == nil || gsi.IndexStatus != types.IndexStatusCreating || aws.ToBool(gsi.Backfilling) {
		t.Fatalf("during allocation: got %+v, want CREATING, Backfilling false", gsi)
	}
	wantCode(t, query(), "ValidationException", "Cannot read from backfilling global secondary index: byg")
	// Only one index change at a time; and writes already keep the new index's key types.
	_, err = e.c.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String("online"), GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Delete: &types.DeleteGlobalSecondaryIndexAction{IndexName: aws.String("byg")}}}})
	wantCode(t, err, "LimitExceededException", "Only 1 online index")
	_, err = e.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("online"), Item: map[string]av{"pk": s("bad"), "g1": ni(1)}})
	wantCode(t, err, "ValidationException", "Type mismatch for Index Key g1")
	e.put(t, "online", map[string]av{"pk": s("during"), "g1": s("g1"), "g2": ni(-1)})
	want["during"] = true
	close(g.release[phaseBackfill])

	// Backfilling: CREATING, Backfilling true, still no reads.
	g.at(t, phaseActivate)
	if status, gsi, _ := describeGSI(t, e.c, "online", "byg"); gsi == nil || gsi.IndexStatus != types.IndexStatusCreating || !aws.ToBool(gsi.Backfilling) {
		t.Fatalf("during backfill: got %+v, want CREATING, Backfilling true", gsi)
	} else if status != types.TableStatusActive {
		t.Errorf("TableStatus during backfill: got %s, want ACTIVE (the table serves as usual)", status)
	}
	wantCode(t, query(), "ValidationException", "Cannot read from backfilling global secondary index")
	_, err = e.c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("online"), IndexName: aws.String("byg")})
	wantCode(t, err, "ValidationException", "Cannot read from backfilling global secondary index")
	close(g.release[phaseActivate])

	deadline := time.Now().Add(10 * time.Second)
	for {
		status, gsi, _ := describeGSI(t, e.c, "online", "byg")
		if gsi != nil && gsi.IndexStatus == types.IndexStatusActive && status == types.TableStatusActive {
			if gsi.Backfilling != nil {
				t.Errorf("ACTIVE index: got Backfilling %v, want it absent", *gsi.Backfilling)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("index not ACTIVE after 10 s: table %s, %+v", status, gsi)
		}
		time.Sleep(5 * time.Millisecond)
	}
	got := map[string]bool{}
	var esk map[string]av
	for {
		out, err := e.c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("online"), IndexName: aws.String("byg"), ExclusiveStartKey: esk})
		if err != nil {
			t.Fatalf("Scan of the ACTIVE index: %v", err)
		}
		for _, it := range out.Items {
			got[strOf(t, it["pk"])] = true
		}
		if esk = out.LastEvaluatedKey; esk == nil {
			break
		}
	}
	if len(got) != len(want) {
		t.Errorf("the backfilled index holds %d items, want %d (the items with g1 S and g2 N, within the key limits)", len(got), len(want))
	}
	for pk := range got {
		if !want[pk] {
			t.Errorf("the index holds %s, which it must leave out (doc %s)", pk, docGSIOnline)
		}
	}
	items, _ := e.queryAll(t, dynamodb.QueryInput{TableName: aws.String("online"), IndexName: aws.String("byg"),
		KeyConditionExpression: aws.String("g1 = :g AND g2 < :z"), ExpressionAttributeValues: map[string]av{":g": s("g1"), ":z": ni(0)}})
	if len(items) != 1 || strOf(t, items[0]["pk"]) != "during" {
		t.Errorf("Query of the new index: got %d items, want the one written while it was created", len(items))
	}
	// The backfill wrote no stream record: only the test's own writes are there.
	if n := streamCount(t, e, aws.ToString(streamARN)); n != 2500+3+1 {
		t.Errorf("stream: %d records, want %d (the puts only; building an index is no item change)", n, 2500+3+1)
	}

	// Errors of Create.
	_, err = e.c.UpdateTable(ctx, createGSIUpdate("byg", gsiDefs...))
	wantCode(t, err, "ValidationException", "already exists")
	_, err = e.c.UpdateTable(ctx, createGSIUpdate("other", types.AttributeDefinition{AttributeName: aws.String("g1"), AttributeType: types.ScalarAttributeTypeN},
		types.AttributeDefinition{AttributeName: aws.String("g2"), AttributeType: types.ScalarAttributeTypeN}))
	wantCode(t, err, "ValidationException", "redefined")
	twice := createGSIUpdate("a1", gsiDefs...)
	twice.GlobalSecondaryIndexUpdates = append(twice.GlobalSecondaryIndexUpdates, createGSIUpdate("a2").GlobalSecondaryIndexUpdates...)
	_, err = e.c.UpdateTable(ctx, twice)
	wantCode(t, err, "LimitExceededException", "")
	_, err = e.c.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String("online"), GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Delete: &types.DeleteGlobalSecondaryIndexAction{IndexName: aws.String("nope")}}}})
	wantCode(t, err, "ResourceNotFoundException", "nope")

	// Delete: DELETING, no reads, then gone with its attribute definitions.
	out, err = e.c.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String("online"), GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Delete: &types.DeleteGlobalSecondaryIndexAction{IndexName: aws.String("byg")}}}})
	if err != nil {
		t.Fatalf("UpdateTable Delete: %v", err)
	}
	if g := out.TableDescription.GlobalSecondaryIndexes; len(g) != 1 || g[0].IndexStatus != types.IndexStatusDeleting {
		t.Fatalf("UpdateTable Delete's answer: got %+v, want the index DELETING", g)
	}
	g.at(t, phaseDrop)
	wantCode(t, query(), "ValidationException", "does not have the specified index")
	e.put(t, "online", map[string]av{"pk": s("after"), "g1": ni(1)}) // the key type is no longer kept
	close(g.release[phaseDrop])
	deadline = time.Now().Add(10 * time.Second)
	for {
		status, gsi, defs := describeGSI(t, e.c, "online", "byg")
		if gsi == nil && status == types.TableStatusActive {
			if strings.Join(defs, ",") != "pk" {
				t.Errorf("AttributeDefinitions after the delete: got %v, want [pk]", defs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("index not gone after 10 s: table %s, %+v", status, gsi)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestOnlineGSIAcrossRestart: an index created online is rebuilt on a restart as
// the backfill built it: items whose key breaks its limits stay out.
func TestOnlineGSIAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db := New(Options{DataDir: dir, TTLSweep: -1})
	srv := startServer(t, db)
	e := &dpEnv{db: db, url: srv.URL, c: newDDBClient(srv.URL)}
	if _, err := e.c.CreateTable(ctx, pkTableInput("online")); err != nil {
		t.Fatal(err)
	}
	e.put(t, "online", map[string]av{"pk": s("ok"), "g1": s("x"), "g2": ni(1)})
	e.put(t, "online", map[string]av{"pk": s("huge"), "g1": s(strings.Repeat("x", 2049)), "g2": ni(1)})
	if _, err := e.c.UpdateTable(ctx, createGSIUpdate("byg", gsiDefs...)); err != nil {
		t.Fatal(err)
	}
	count := func(e *dpEnv) int {
		deadline := time.Now().Add(10 * time.Second)
		for {
			out, err := e.c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("online"), IndexName: aws.String("byg")})
			if err == nil {
				return int(out.Count)
			}
			if time.Now().After(deadline) {
				t.Fatalf("Scan of the index: %v", err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if n := count(e); n != 1 {
		t.Fatalf("the backfilled index holds %d items, want 1", n)
	}
	srv.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2 := New(Options{DataDir: dir, TTLSweep: -1})
	srv2 := startServer(t, db2)
	if n := count(&dpEnv{db: db2, url: srv2.URL, c: newDDBClient(srv2.URL)}); n != 1 {
		t.Errorf("after a restart the index holds %d items, want 1 (the item with a 2,049-byte key stays out)", n)
	}
}

// TestOnlineGSIUnheld: without a test holding it, an index is ACTIVE promptly and
// serves what the table held.
func TestOnlineGSIUnheld(t *testing.T) {
	e := newDP(t, Options{})
	ctx := context.Background()
	if _, err := e.c.CreateTable(ctx, pkTableInput("online")); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		e.put(t, "online", map[string]av{"pk": s(fmt.Sprint(i)), "g1": s("x"), "g2": ni(i)})
	}
	if _, err := e.c.UpdateTable(ctx, createGSIUpdate("byg", gsiDefs...)); err != nil {
		t.Fatal(err)
	}
	w := dynamodb.NewTableExistsWaiter(e.c) // waits for TableStatus ACTIVE
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("online")}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, gsi, _ := describeGSI(t, e.c, "online", "byg"); gsi.IndexStatus == types.IndexStatusActive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("index not ACTIVE after 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	items, _ := e.queryAll(t, dynamodb.QueryInput{TableName: aws.String("online"), IndexName: aws.String("byg"),
		KeyConditionExpression: aws.String("g1 = :g"), ExpressionAttributeValues: map[string]av{":g": s("x")}})
	if len(items) != 10 {
		t.Errorf("Query of the new index: got %d items, want 10", len(items))
	}
}

func streamCount(t *testing.T, e *dpEnv, arn string) int {
	t.Helper()
	sc := newStreamsClient(e.url)
	ctx := context.Background()
	d, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, sh := range d.StreamDescription.Shards {
		it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		for iter := it.ShardIterator; iter != nil; {
			out, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			n += len(out.Records)
			if len(out.Records) == 0 {
				break
			}
			iter = out.NextShardIterator
		}
	}
	return n
}
