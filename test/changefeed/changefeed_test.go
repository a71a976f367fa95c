package changefeed_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/examples/orders/search"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/changefeed"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/obs/obstest"
	"github.com/fourlanes/fourlanes/pkg/projection"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

func TestMain(m *testing.M) { localaws.Main(m) }

const fixtureTable = "fourlanes-Orders" // the table in the fixture's eventSourceARN

func orderEntity(t *testing.T) catalog.Entity {
	t.Helper()
	cat, err := example.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	e, ok := cat.Entity(orders.Entity)
	if !ok {
		t.Fatal("no ORDER entity in the example catalog")
	}
	return e
}

// failingPut fails PutItem on the change-feed table for rows whose sort key
// contains one of fail, and counts puts.
type failingPut struct {
	*dynamodb.Client
	mu   sync.Mutex
	fail []string
	puts int
}

func (f *failingPut) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	f.mu.Lock()
	f.puts++
	fail := slices.Clone(f.fail)
	f.mu.Unlock()
	if sk, ok := in.Item[keys.AttrSK].(*types.AttributeValueMemberS); ok {
		for _, s := range fail {
			if strings.Contains(sk.Value, s) {
				return nil, &types.InternalServerError{Message: aws.String("injected: internal server error")}
			}
		}
	}
	return f.Client.PutItem(ctx, in, o...)
}

func (f *failingPut) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = nil
}

type rig struct {
	raw     *dynamodb.Client
	db      *failingPut
	feedTbl string
	search  *projection.Table
	h       *changefeed.Handler
	feed    *changefeed.Feed
	logs    *obstest.Buffer
	metrics *obstest.Buffer
}

// newRig builds the change feed on the local DynamoDB: the change-feed table, the
// example's search projection (search and state tables), BEST_EFFORT
// dispatch. ordersTable is the tracked table's name.
func newRig(t *testing.T, ordersTable string) *rig {
	t.Helper()
	raw := localaws.DynamoDB(t)
	feedTbl := aws.ToString(localaws.CreateTable(t, raw, changefeed.TableSchema(localaws.UniqueName(t, "feed"))).TableName)
	searchTbl := aws.ToString(localaws.CreateTable(t, raw, projection.TableSchema(localaws.UniqueName(t, "search"))).TableName)
	stateTbl := aws.ToString(localaws.CreateTable(t, raw, delivery.StateTableSchema(localaws.UniqueName(t, "state"))).TableName)
	rg := &rig{raw: raw, db: &failingPut{Client: raw}, feedTbl: feedTbl, logs: &obstest.Buffer{}, metrics: &obstest.Buffer{}}
	logger := obs.NewLogger(rg.logs, "debug")
	metrics := obs.NewMetrics(rg.metrics)
	rg.search = search.Store(raw, searchTbl, stateTbl)
	cat, err := example.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := catalog.NewRegistry(cat, search.Module.Bind(search.New(raw, searchTbl, stateTbl, logger, metrics)))
	if err != nil {
		t.Fatal(err)
	}
	rg.feed, err = changefeed.New(changefeed.Config{DB: rg.db, Table: feedTbl, Tables: map[string]catalog.Entity{ordersTable: orderEntity(t)},
		Dispatcher: lanes.NewBestEffort(reg, lanes.Config{Logger: logger, Metrics: metrics}), Logger: logger, Metrics: metrics, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rg.h, err = changefeed.NewHandler(context.Background(), changefeed.HandlerConfig{Feed: rg.feed, Registry: reg, Logger: logger, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	return rg
}

func lambdaCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "req-" + strings.ReplaceAll(t.Name(), "/", "-")})
}

func loadEvent(t *testing.T) events.DynamoDBEvent {
	t.Helper()
	raw, err := os.ReadFile("testdata/dynamodb-stream-event.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func (rg *rig) doc(t *testing.T, tenant, id string) (projection.Row, bool) {
	t.Helper()
	d, ok, err := rg.search.Get(context.Background(), tenant, orders.Entity, id)
	if err != nil {
		t.Fatal(err)
	}
	return d, ok
}

func (rg *rig) rows(t *testing.T, tenant string) []map[string]types.AttributeValue {
	t.Helper()
	out, err := rg.raw.Query(context.Background(), &dynamodb.QueryInput{
		TableName: aws.String(rg.feedTbl), KeyConditionExpression: aws.String("#pk = :t"), ConsistentRead: aws.Bool(true),
		ExpressionAttributeNames: map[string]string{"#pk": keys.AttrPK}, ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberS{Value: tenant}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Items
}

func str(it map[string]types.AttributeValue, k string) string {
	switch v := it[k].(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return v.Value
	}
	return ""
}

// TestFixtureRoundTrip: the fixture is in the shape Lambda delivers (it
// survives a round trip through events.DynamoDBEvent).
func TestFixtureRoundTrip(t *testing.T) {
	ev := loadEvent(t)
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var again events.DynamoDBEvent
	if err := json.Unmarshal(b, &again); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(again)
	if !bytes.Equal(b, b2) || len(again.Records) != 6 {
		t.Errorf("round trip differs or lost records (%d)", len(again.Records))
	}
}

// TestStreamEventFixture drives the handler with a stream batch in AWS's
// shape: writes, a caller's delete, TTL deletes as AWS sends them (REMOVE,
// userIdentity Service/dynamodb.amazonaws.com), and a record without a
// version (rejected, loudly, and skipped).
func TestStreamEventFixture(t *testing.T) {
	rg := newRig(t, fixtureTable)
	resp, err := rg.h.Handle(lambdaCtx(t), loadEvent(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batchItemFailures: got %v, want none", resp.BatchItemFailures)
	}
	type want struct {
		version int64
		deleted bool
	}
	for id, w := range map[string]want{"o-1": {2, false}} {
		d, ok := rg.doc(t, "tenant-1", id)
		if !ok || d.Version != w.version || d.Deleted != w.deleted {
			t.Errorf("search %s: got %+v (found %v), want version %d deleted %v", id, d, ok, w.version, w.deleted)
		}
		if d.Item["status"] != "paid" || fmt.Sprint(d.Item["tags"]) != "[gift priority]" || d.Item["receipt"] != "cmVjZWlwdA==" {
			t.Errorf("search %s item: got %v", id, d.Item)
		}
	}
	for id, v := range map[string]int64{"o-2": 3, "o-3": 2, "o-4": 1} {
		d, ok := rg.doc(t, "tenant-2", id)
		if !ok || d.Version != v || !d.Deleted {
			t.Errorf("search %s: got %+v (found %v), want a tombstone at version %d", id, d, ok, v)
		}
	}
	if _, ok := rg.doc(t, "tenant-1", "o-5"); ok {
		t.Error("o-5 (no version) was projected; want it rejected")
	}

	rows := append(rg.rows(t, "tenant-1"), rg.rows(t, "tenant-2")...)
	if len(rows) != 5 {
		t.Fatalf("change-feed rows: got %d, want 5 (o-5 rejected)", len(rows))
	}
	causes := map[string]string{}
	for _, r := range rows {
		causes[str(r, keys.AttrEntityID)+"@"+str(r, keys.AttrVersion)] = str(r, keys.AttrType) + " " + str(r, keys.AttrCause)
		if str(r, keys.AttrExpiresAt) == "" || str(r, keys.AttrStreamSeq) == "" || str(r, keys.AttrID) == "" {
			t.Errorf("row %s lacks expires_at, stream_seq or id: %v", str(r, keys.AttrSK), r)
		}
	}
	wantCauses := map[string]string{
		"o-1@1": "record.written.ORDER write", "o-1@2": "record.written.ORDER write",
		"o-2@3": "record.deleted.ORDER write", "o-3@2": "record.deleted.ORDER ttl", "o-4@1": "record.deleted.ORDER ttl",
	}
	for k, v := range wantCauses {
		if causes[k] != v {
			t.Errorf("row %s: got %q, want %q", k, causes[k], v)
		}
	}
	logs := rg.logs.String()
	for _, s := range []string{`"reason":"bad_version"`, `"lane":"BEST_EFFORT"`, `"request_id":"req-`, "serving subscription", "search.orders", "feeding tracked table"} {
		if !strings.Contains(logs, s) {
			t.Errorf("logs lack %s", s)
		}
	}
	if m := rg.metrics.String(); !strings.Contains(m, keys.MetricChangeRejected) || !strings.Contains(m, keys.MetricChangeEvents) {
		t.Errorf("metrics lack %s or %s:\n%s", keys.MetricChangeRejected, keys.MetricChangeEvents, m)
	}

	// The same batch again (the mapping retrying it): nothing new.
	resp, err = rg.h.Handle(lambdaCtx(t), loadEvent(t))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("replayed batch: %v, %v", resp.BatchItemFailures, err)
	}
	if n := len(rg.rows(t, "tenant-1")) + len(rg.rows(t, "tenant-2")); n != 5 {
		t.Errorf("rows after the batch came again: %d, want still 5", n)
	}
}

// ---- real stream records from the local DynamoDB ----

type ordersTable struct {
	name, stream string
	db           *dynamodb.Client
	streams      *dynamodbstreams.Client
}

func newOrdersTable(t *testing.T) *ordersTable {
	t.Helper()
	db := localaws.DynamoDB(t)
	d := localaws.CreateTable(t, db, &dynamodb.CreateTableInput{
		TableName: aws.String(localaws.UniqueName(t, "orders")),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(keys.AttrTenant), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("order_id"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(keys.AttrTenant), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("order_id"), KeyType: types.KeyTypeRange},
		},
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
	})
	return &ordersTable{name: aws.ToString(d.TableName), stream: aws.ToString(d.LatestStreamArn), db: db, streams: localaws.DynamoDBStreams(t)}
}

func (o *ordersTable) put(t *testing.T, tenant, id string, version int, status string) {
	t.Helper()
	_, err := o.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(o.name), Item: map[string]types.AttributeValue{
		keys.AttrTenant:   &types.AttributeValueMemberS{Value: tenant},
		"order_id":        &types.AttributeValueMemberS{Value: id},
		keys.AttrVersion:  &types.AttributeValueMemberN{Value: fmt.Sprint(version)},
		orders.AttrStatus: &types.AttributeValueMemberS{Value: status},
	}})
	if err != nil {
		t.Fatal(err)
	}
}

func (o *ordersTable) del(t *testing.T, tenant, id string) {
	t.Helper()
	_, err := o.db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(o.name), Key: map[string]types.AttributeValue{
		keys.AttrTenant: &types.AttributeValueMemberS{Value: tenant},
		"order_id":      &types.AttributeValueMemberS{Value: id},
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// records reads the stream from its start until it holds n records (polling
// with a deadline), as the event source mapping would deliver them.
func (o *ordersTable) records(t *testing.T, n int) []events.DynamoDBEventRecord {
	t.Helper()
	ctx := context.Background()
	desc, err := o.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(o.stream)})
	if err != nil {
		t.Fatal(err)
	}
	var out []events.DynamoDBEventRecord
	for deadline := time.Now().Add(10 * time.Second); ; {
		out = out[:0]
		for _, sh := range desc.StreamDescription.Shards {
			it, err := o.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(o.stream), ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
			if err != nil {
				t.Fatal(err)
			}
			got, err := o.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range got.Records {
				rec, err := changefeed.FromStreams(r, o.stream)
				if err != nil {
					t.Fatal(err)
				}
				lr, err := changefeed.ToLambda(rec)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, lr)
			}
		}
		if len(out) >= n {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream holds %d records after 10 s, want %d", len(out), n)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

func batch(rs ...events.DynamoDBEventRecord) events.DynamoDBEvent {
	return events.DynamoDBEvent{Records: rs}
}

// TestOutOfOrderAndDuplicatesThroughTheHandler: real stream records of one
// order (v1, v2, v3, then its delete) reach the handler out of order and
// twice. The projection parks v3, applies v1, skips the duplicate, applies
// v2 and then the parked v3; the delete leaves a tombstone that a late
// duplicate of v2 cannot resurrect.
func TestOutOfOrderAndDuplicatesThroughTheHandler(t *testing.T) {
	o := newOrdersTable(t)
	rg := newRig(t, o.name)
	o.put(t, "tenant-1", "o-1", 1, "placed")
	o.put(t, "tenant-1", "o-1", 2, "paid")
	o.put(t, "tenant-1", "o-1", 3, "shipped")
	o.del(t, "tenant-1", "o-1")
	recs := o.records(t, 4)
	v1, v2, v3, del := recs[0], recs[1], recs[2], recs[3]

	handle := func(ev events.DynamoDBEvent) {
		t.Helper()
		resp, err := rg.h.Handle(lambdaCtx(t), ev)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("handle: failures %v, err %v", resp.BatchItemFailures, err)
		}
	}
	handle(batch(v3, v1, v1))
	if d, _ := rg.doc(t, "tenant-1", "o-1"); d.Version != 1 || d.Item["status"] != "placed" {
		t.Fatalf("after v3, v1, v1: got %+v, want v1 placed (v3 parked)", d)
	}
	if _, parked, err := rg.search.Parked(context.Background(), "tenant-1", orders.Entity, "o-1", 3); err != nil || !parked {
		t.Fatalf("v3 not parked (%v, %v)", parked, err)
	}
	if !strings.Contains(rg.metrics.String(), keys.MetricProjParked) {
		t.Error("no ProjParked metric")
	}

	handle(batch(v2, v3))
	if d, _ := rg.doc(t, "tenant-1", "o-1"); d.Version != 3 || d.Item["status"] != "shipped" {
		t.Fatalf("after v2, v3: got %+v, want v3 shipped", d)
	}
	if _, parked, _ := rg.search.Parked(context.Background(), "tenant-1", orders.Entity, "o-1", 3); parked {
		t.Error("v3 still parked after it was applied")
	}

	handle(batch(del, v2))
	if d, _ := rg.doc(t, "tenant-1", "o-1"); !d.Deleted || d.Version != 3 {
		t.Fatalf("after delete, late v2: got %+v, want a tombstone at v3", d)
	}
	if n := len(rg.rows(t, "tenant-1")); n != 4 {
		t.Errorf("change-feed rows: got %d, want 4 (one per stream record; duplicates rewrite theirs)", n)
	}
}

// TestInfrastructureFailureReportsTheEarliestFailedRecord: writing o-1's v2
// row fails. The handler reports v2's sequence number only (the mapping
// checkpoints before it), does not apply o-1's v3, and applies what came
// before. Retried from v2 once the cause is gone, everything lands.
func TestInfrastructureFailureReportsTheEarliestFailedRecord(t *testing.T) {
	o := newOrdersTable(t)
	rg := newRig(t, o.name)
	o.put(t, "tenant-1", "o-1", 1, "placed")
	o.put(t, "tenant-2", "o-2", 1, "placed")
	o.put(t, "tenant-1", "o-1", 2, "paid")
	o.put(t, "tenant-2", "o-2", 2, "paid")
	o.put(t, "tenant-1", "o-1", 3, "shipped")
	recs := o.records(t, 5)
	rg.db.fail = []string{"ORDER#o-1#00000000000000000002#"}

	resp, err := rg.h.Handle(lambdaCtx(t), batch(recs...))
	if err != nil {
		t.Fatal(err)
	}
	want := []events.DynamoDBBatchItemFailure{{ItemIdentifier: recs[2].Change.SequenceNumber}}
	if !slices.Equal(resp.BatchItemFailures, want) {
		t.Fatalf("batchItemFailures: got %v, want %v (o-1 v2's sequence number, nothing else)", resp.BatchItemFailures, want)
	}
	if d, _ := rg.doc(t, "tenant-1", "o-1"); d.Version != 1 {
		t.Errorf("o-1: got v%d, want v1 (v2 failed, v3 not attempted)", d.Version)
	}
	if d, _ := rg.doc(t, "tenant-2", "o-2"); d.Version < 1 {
		t.Errorf("o-2: got v%d, want at least v1 (before the failure)", d.Version)
	}
	if logs := rg.logs.String(); !strings.Contains(logs, "the mapping retries from this record") || !strings.Contains(logs, recs[2].Change.SequenceNumber) {
		t.Error("no error log naming the failed record's sequence number")
	}

	rg.db.heal()
	resp, err = rg.h.Handle(lambdaCtx(t), batch(recs[2:]...))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("retry: failures %v, err %v", resp.BatchItemFailures, err)
	}
	if d, _ := rg.doc(t, "tenant-1", "o-1"); d.Version != 3 {
		t.Errorf("o-1 after retry: v%d, want v3", d.Version)
	}
	if d, _ := rg.doc(t, "tenant-2", "o-2"); d.Version != 2 {
		t.Errorf("o-2 after retry: v%d, want v2", d.Version)
	}
}

// ---- unit tests without DynamoDB ----

type memDB struct {
	mu   sync.Mutex
	rows []map[string]types.AttributeValue
}

func (m *memDB) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows = append(m.rows, in.Item)
	return &dynamodb.PutItemOutput{}, nil
}

type stubDispatcher struct {
	mu    sync.Mutex
	calls int
	err   error
	got   []envelope.Envelope
}

func (s *stubDispatcher) DispatchBound(_ context.Context, e envelope.Envelope) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.got = append(s.got, e)
	return s.err
}

func stubFeed(t *testing.T, d changefeed.Dispatcher, logs *obstest.Buffer) *changefeed.Handler {
	t.Helper()
	f, err := changefeed.New(changefeed.Config{DB: &memDB{}, Table: "feed", Tables: map[string]catalog.Entity{fixtureTable: orderEntity(t)},
		Dispatcher: d, Logger: obs.NewLogger(logs, "debug"), Metrics: obs.NewMetrics(&obstest.Buffer{}), Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h, err := changefeed.NewHandler(context.Background(), changefeed.HandlerConfig{Feed: f, Logger: obs.NewLogger(logs, "debug"), Metrics: obs.NewMetrics(&obstest.Buffer{}), Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestSubscriberFailureIsRetriedThenReported: a subscriber that keeps
// failing is retried in-process, then the record is reported.
func TestSubscriberFailureIsRetriedThenReported(t *testing.T) {
	d := &stubDispatcher{err: errors.New("search table throttled")}
	logs := &obstest.Buffer{}
	h := stubFeed(t, d, logs)
	ev := loadEvent(t)
	resp, err := h.Handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if want := ev.Records[0].Change.SequenceNumber; len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != want {
		t.Errorf("got %v, want the first record's sequence number %s", resp.BatchItemFailures, want)
	}
	if d.calls < 3 {
		t.Errorf("dispatch tried %d times, want 3 for the failing record", d.calls)
	}
}

// TestUntrackedTableFailsLoudly: a record from a table the feed does not
// track is a wiring mistake: it is reported, not skipped.
func TestUntrackedTableFailsLoudly(t *testing.T) {
	logs := &obstest.Buffer{}
	h := stubFeed(t, &stubDispatcher{}, logs)
	ev := loadEvent(t)
	ev.Records[1].EventSourceArn = "arn:aws:dynamodb:us-east-1:000000000000:table/someone-else/stream/2026-11-29T00:00:00.000"
	resp, err := h.Handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != ev.Records[1].Change.SequenceNumber {
		t.Errorf("got %v, want record 1 reported", resp.BatchItemFailures)
	}
	if !strings.Contains(logs.String(), `"reason":"untracked"`) {
		t.Error("no untracked reason in the logs")
	}
}

// TestUnknownEventNameIsLoud: a record under an event name AWS does not
// document is applied by its images, and says so in a warning naming the
// name and the cause it was given.
func TestUnknownEventNameIsLoud(t *testing.T) {
	logs := &obstest.Buffer{}
	d := &stubDispatcher{}
	h := stubFeed(t, d, logs)
	ev := loadEvent(t)
	ev.Records = ev.Records[2:3] // a REMOVE by a caller
	ev.Records[0].EventName = "EXPIRE"
	resp, err := h.Handle(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("got %v, %v; want the record applied", resp.BatchItemFailures, err)
	}
	if d.calls != 1 || d.got[0].Type != "record.deleted.ORDER" {
		t.Errorf("dispatched %d, %v; want one record.deleted.ORDER", d.calls, d.got)
	}
	for _, want := range []string{`"level":"WARN"`, `event name the SDK does not know`, `"stream_event_name":"EXPIRE"`, `"cause":"` + keys.ChangeCauseWrite + `"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, logs.String())
		}
	}
}

// TestMissingSequenceNumberFailsTheBatch: a record that cannot be reported
// fails the whole batch.
func TestMissingSequenceNumberFailsTheBatch(t *testing.T) {
	h := stubFeed(t, &stubDispatcher{}, &obstest.Buffer{})
	ev := loadEvent(t)
	ev.Records[2].Change.SequenceNumber = ""
	if _, err := h.Handle(context.Background(), ev); err == nil {
		t.Error("got no error, want the batch failed")
	}
}

// TestChangeEventRepresentation pins what a change event is.
func TestChangeEventRepresentation(t *testing.T) {
	ev := loadEvent(t)
	ent := orderEntity(t)
	build := func(i int) changefeed.Change {
		t.Helper()
		r, err := changefeed.FromLambda(ev.Records[i])
		if err != nil {
			t.Fatal(err)
		}
		c, err := changefeed.Build(ent, r)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	w := build(1)
	e := w.Envelope
	if e.Type != "record.written.ORDER" || e.TenantID != "tenant-1" || e.SchemaVersion != catalog.ChangeSchemaVersion ||
		e.OccurredAt != "2026-11-29T12:00:01Z" || e.Seq != 0 || e.PrevHash != "" || e.Hash != "" {
		t.Errorf("written change event: %+v", e)
	}
	if err := e.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if err := e.ValidateStored(); err == nil {
		t.Error("ValidateStored accepted a change event; it must never pass for a log event")
	}
	if again := build(1); again.Envelope.ID != e.ID {
		t.Errorf("id not deterministic: %s then %s", e.ID, again.Envelope.ID)
	}
	if other := build(0); other.Envelope.ID == e.ID {
		t.Error("two records share an id")
	}
	var p catalog.ChangeV1
	if err := e.DecodePayload(&p); err != nil {
		t.Fatal(err)
	}
	if p.Entity != "ORDER" || p.ID != "o-1" || p.Version != 2 || fmt.Sprint(p.Item["total_cents"]) != "2500" {
		t.Errorf("payload: %+v", p)
	}
	d := build(2)
	if d.Envelope.Type != "record.deleted.ORDER" || d.Payload.Version != 3 || d.Payload.Item != nil || d.Cause != keys.ChangeCauseWrite {
		t.Errorf("delete: %+v", d)
	}
	if ttl := build(3); ttl.Cause != keys.ChangeCauseTTL || !ttl.Deleted {
		t.Errorf("AWS TTL delete: %+v", ttl)
	}
	if ttl := build(4); ttl.Cause != keys.ChangeCauseTTL || !ttl.Deleted || ttl.NameUnknown {
		t.Errorf("AWS TTL delete of a version-1 item: %+v", ttl)
	}
	// An event name AWS does not document: classified by its images, and marked.
	r, _ := changefeed.FromLambda(ev.Records[4])
	r.EventName = "EXPIRE"
	if c, err := changefeed.Build(ent, r); err != nil || !c.Deleted || !c.NameUnknown || c.Cause != keys.ChangeCauseTTL {
		t.Errorf("TTL delete under an unknown event name: got %+v, %v; want deleted, NameUnknown, TTL (the service identity says so)", c, err)
	}
	// The same without the service identity is not guessed to be TTL.
	r.UserType, r.UserPrincipal = "", ""
	if c, err := changefeed.Build(ent, r); err != nil || !c.Deleted || !c.NameUnknown || c.Cause != keys.ChangeCauseWrite {
		t.Errorf("delete under an unknown event name, no service identity: got %+v, %v; want deleted, NameUnknown, cause write", c, err)
	}
	r, _ = changefeed.FromLambda(ev.Records[5])
	if _, err := changefeed.Build(ent, r); !errors.Is(err, changefeed.ErrRejected) {
		t.Errorf("record without a version: got %v, want rejected", err)
	}
	var rej *changefeed.RejectError
	// An item whose tenant has a chain shard's form: refused loudly, never bound as "tenant-1".
	r, _ = changefeed.FromLambda(ev.Records[0])
	r.NewImage["tenant_id"] = &types.AttributeValueMemberS{Value: "tenant-1~2"}
	if _, err := changefeed.Build(ent, r); !errors.As(err, &rej) || rej.Reason != changefeed.RejectInvalidEnvelope || !strings.Contains(err.Error(), "reserved for a chain shard") {
		t.Errorf("tenant of a shard's form: got %v, want rejected (%s) naming the reserved suffix", err, changefeed.RejectInvalidEnvelope)
	}
	// A number no envelope can carry exactly.
	r, _ = changefeed.FromLambda(ev.Records[0])
	r.NewImage["total_cents"] = &types.AttributeValueMemberN{Value: "12345678901234567890"}
	if _, err := changefeed.Build(ent, r); !errors.As(err, &rej) || rej.Reason != changefeed.RejectUnrepresentable {
		t.Errorf("unrepresentable number: got %v, want rejected (%s)", err, changefeed.RejectUnrepresentable)
	}
}
