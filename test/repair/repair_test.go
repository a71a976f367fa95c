package repair_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/examples/orders/notifications"
	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/examples/orders/search"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/changefeed"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/obs/obstest"
	"github.com/fourlanes/fourlanes/pkg/projection"
	"github.com/fourlanes/fourlanes/pkg/repair"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

func TestMain(m *testing.M) { localaws.Main(m) }

// mailbox records emails and fails while fail is set.
type mailbox struct {
	mu   sync.Mutex
	sent map[string]int // subject → times
	fail error
}

func (m *mailbox) Send(_ context.Context, e notifications.Email) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.sent[e.Subject]++
	return nil
}

func (m *mailbox) setFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}

func (m *mailbox) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, v := range m.sent {
		n += v
	}
	return n
}

// faultyClaims fails claim writes of chosen events, like a throttled table.
type faultyClaims struct {
	*dynamodb.Client
	mu      sync.Mutex
	failFor map[string]bool
}

func (f *faultyClaims) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if pk, ok := in.Key[keys.AttrPK].(*types.AttributeValueMemberS); ok {
		f.mu.Lock()
		bad := false
		for id := range f.failFor {
			bad = bad || strings.Contains(pk.Value, id)
		}
		f.mu.Unlock()
		if bad {
			return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("injected: throughput exceeded")}
		}
	}
	return f.Client.UpdateItem(ctx, in, o...)
}

func (f *faultyClaims) set(ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failFor = map[string]bool{}
	for _, id := range ids {
		f.failFor[id] = true
	}
}

// trimmedStreams answers like a stream past its retention.
type trimmedStreams struct{ repair.Streams }

func (trimmedStreams) GetShardIterator(context.Context, *dynamodbstreams.GetShardIteratorInput, ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	return nil, &streamtypes.TrimmedDataAccessException{Message: aws.String("injected: the requested sequence number is beyond the trim horizon")}
}

type rig struct {
	db                           *dynamodb.Client
	streams                      *dynamodbstreams.Client
	q                            *sqs.Client
	eventsTbl, stateTbl, feedTbl string
	ordersTbl, ordersStream      string
	eventsStream                 string
	durableDLQ, pipeDLQ, feedDLQ string
	store                        *eventstore.Store
	orders                       *orders.Service
	claims                       *faultyClaims
	claimStore                   *delivery.DynamoStore
	mail                         *mailbox
	proj                         *projection.Projector
	searchStore                  *projection.Table
	feed                         *changefeed.Feed
	effects                      *effect.Recorder
	logs, metrics                *obstest.Buffer
	cfg                          repair.Config
}

func newRig(t *testing.T) *rig {
	t.Helper()
	db := localaws.DynamoDB(t)
	rg := &rig{db: db, streams: localaws.DynamoDBStreams(t), q: localaws.SQS(t), mail: &mailbox{sent: map[string]int{}}, logs: &obstest.Buffer{}, metrics: &obstest.Buffer{}}
	ev := localaws.CreateTable(t, db, eventstore.TableSchema(localaws.UniqueName(t, "events")))
	rg.eventsTbl, rg.eventsStream = aws.ToString(ev.TableName), aws.ToString(ev.LatestStreamArn)
	rg.stateTbl = aws.ToString(localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "state"))).TableName)
	rg.feedTbl = aws.ToString(localaws.CreateTable(t, db, changefeed.TableSchema(localaws.UniqueName(t, "feed"))).TableName)
	searchTbl := aws.ToString(localaws.CreateTable(t, db, projection.TableSchema(localaws.UniqueName(t, "search"))).TableName)
	ord := localaws.CreateTable(t, db, &dynamodb.CreateTableInput{
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
	rg.ordersTbl, rg.ordersStream = aws.ToString(ord.TableName), aws.ToString(ord.LatestStreamArn)
	rg.durableDLQ = localaws.CreateQueue(t, rg.q, localaws.UniqueName(t, "durable-dlq"), map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "false"})
	rg.pipeDLQ = localaws.CreateQueue(t, rg.q, localaws.UniqueName(t, "pipe-dlq"), nil)
	rg.feedDLQ = localaws.CreateQueue(t, rg.q, localaws.UniqueName(t, "feed-dlq"), nil)

	cat, err := example.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	logger := obs.NewLogger(rg.logs, "debug")
	metrics := obs.NewMetrics(rg.metrics)
	rg.store, err = eventstore.New(db, eventstore.Config{Table: rg.eventsTbl, Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	rg.orders = &orders.Service{Events: rg.store, Table: rg.ordersTbl}
	rg.proj = search.New(db, searchTbl, rg.stateTbl, logger, metrics)
	rg.searchStore = rg.proj.Store.(*projection.Table)
	reg, err := catalog.NewRegistry(cat,
		notifications.Module.Bind(&notifications.Notifier{Mailer: rg.mail}),
		search.Module.Bind(rg.proj))
	if err != nil {
		t.Fatal(err)
	}
	rg.claims = &faultyClaims{Client: db, failFor: map[string]bool{}}
	rg.claimStore = delivery.NewDynamoStore(rg.claims, rg.stateTbl)
	rg.effects, err = effect.New(effect.Config{Store: effect.NewDynamoStore(db, rg.stateTbl), Logger: logger, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	d, err := delivery.New(reg, delivery.Config{Store: rg.claimStore, Effects: rg.effects, Logger: logger, Metrics: metrics, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ent, _ := cat.Entity(orders.Entity)
	rg.feed, err = changefeed.New(changefeed.Config{DB: db, Table: rg.feedTbl, Tables: map[string]catalog.Entity{rg.ordersTbl: ent},
		Dispatcher: lanes.NewBestEffort(reg, lanes.Config{Logger: logger, Metrics: metrics}), Logger: logger, Metrics: metrics, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rg.cfg = repair.Config{
		SQS: rg.q, Streams: rg.streams, DB: db, Log: rg.store, Deliverer: d, DeadLetters: rg.claimStore, Feed: rg.feed,
		Projections: []repair.Reapplier{rg.proj},
		DurableDLQ:  rg.durableDLQ, PipeDLQ: rg.pipeDLQ, ChangeFeedDLQ: rg.feedDLQ, EventsTable: rg.eventsTbl, StateTable: rg.stateTbl,
		Logger: logger, Metrics: metrics, Budget: 20 * time.Second,
	}
	return rg
}

func (rg *rig) run(t *testing.T, req repair.Request) repair.Report {
	t.Helper()
	r, err := repair.New(rg.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-" + strings.ReplaceAll(t.Name(), "/", "-")})
	rep, err := r.Handle(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	t.Logf("report:\n%s", b)
	return rep
}

func tenantCtx(tenant string) context.Context {
	return tenancy.MustWithTenant(context.Background(), tenant)
}

func (rg *rig) place(t *testing.T, tenant, email string) orders.Order {
	t.Helper()
	o, err := rg.orders.Place(tenantCtx(tenant), email, []orders.Item{{SKU: "sku-1", Qty: 1}}, 1000, "EUR")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (rg *rig) event(t *testing.T, tenant string, seq int64) envelope.Envelope {
	t.Helper()
	p, err := rg.store.Events(context.Background(), tenant, seq-1, 1)
	if err != nil || len(p.Events) != 1 || p.Errs[0] != nil {
		t.Fatalf("read %s/%d: %v %v", tenant, seq, err, p.Errs)
	}
	return p.Events[0]
}

// toDLQ puts an envelope in the FIFO DLQ as redrive leaves it: the body
// stream-filter wrote, group = tenant, dedup id = event id.
func (rg *rig) toDLQ(t *testing.T, body, group, dedup string) {
	t.Helper()
	_, err := rg.q.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(rg.durableDLQ), MessageBody: aws.String(body),
		MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedup)})
	if err != nil {
		t.Fatal(err)
	}
}

func send(t *testing.T, q *sqs.Client, url, body string) {
	t.Helper()
	if _, err := q.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
}

func envJSON(t *testing.T, e envelope.Envelope) string {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// depth returns a queue's (visible, in flight) message counts.
func (rg *rig) depth(t *testing.T, url string) (int, int) {
	t.Helper()
	out, err := rg.q.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	f, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return v, f
}

func items(rep repair.Report, src, outcome string) []repair.Item {
	var out []repair.Item
	for _, it := range rep.Sources[src].Items {
		if it.Outcome == outcome {
			out = append(out, it)
		}
	}
	return out
}

// TestDurableDLQPoisonThenRepaired: two of tenant-1's envelopes sit in the
// real FIFO DLQ; the first cannot be delivered (its claim write fails,
// injected). The run fixes the second, re-parks the first (the tenant's group
// is not blocked) and reports it open; once the cause is gone the next run
// delivers it and empties the queue. Every email goes out once.
func TestDurableDLQPoisonThenRepaired(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	rg.place(t, "tenant-1", "ana@example.com")
	rg.place(t, "tenant-1", "ana@example.com")
	e1, e2 := rg.event(t, "tenant-1", 1), rg.event(t, "tenant-1", 2)
	rg.toDLQ(t, envJSON(t, e1), "tenant-1", e1.ID)
	rg.toDLQ(t, envJSON(t, e2), "tenant-1", e2.ID)
	rg.claims.set(e1.ID)

	rep := rg.run(t, repair.Request{Sources: []string{repair.SourceDurableDLQ}})
	src := rep.Sources[repair.SourceDurableDLQ]
	if src.Seen != 2 || src.Fixed != 1 || src.Open != 1 || !src.Complete {
		t.Fatalf("first run: %+v, want 2 seen, 1 fixed, 1 open, complete", src)
	}
	open := items(rep, repair.SourceDurableDLQ, repair.Open)
	if open[0].EventID != e1.ID || !strings.Contains(open[0].Reason, "infrastructure") || !strings.Contains(open[0].Reason, "re-parked") ||
		!strings.Contains(open[0].Error, "throughput exceeded") {
		t.Errorf("open item: %+v, want e1, infrastructure, re-parked, the injected error", open[0])
	}
	if fixed := items(rep, repair.SourceDurableDLQ, repair.Fixed); fixed[0].EventID != e2.ID || fixed[0].Subscriptions["notifications.order-email"] != "completed" {
		t.Errorf("fixed item: %+v, want e2 completed", fixed[0])
	}
	if v, f := rg.depth(t, rg.durableDLQ); v+f != 1 {
		t.Errorf("DLQ after the first run: %d visible + %d in flight, want the one poison message", v, f)
	}
	if logs := rg.logs.String(); !strings.Contains(logs, `"msg":"left open"`) || !strings.Contains(logs, `"level":"ERROR"`) {
		t.Error("the open item was not logged as an error")
	}

	rg.claims.set() // the cause is fixed
	rep = rg.run(t, repair.Request{Sources: []string{repair.SourceDurableDLQ}})
	if src := rep.Sources[repair.SourceDurableDLQ]; src.Fixed != 1 || src.Open != 0 {
		t.Fatalf("second run: %+v, want 1 fixed, 0 open", src)
	}
	if v, f := rg.depth(t, rg.durableDLQ); v+f != 0 {
		t.Errorf("DLQ after the second run: %d visible + %d in flight, want empty", v, f)
	}
	if n := rg.mail.count(); n != 2 {
		t.Errorf("emails: %d, want 2 (each event once)", n)
	}
	if m := rg.metrics.String(); !strings.Contains(m, `"`+keys.MetricRepaired+`"`) || !strings.Contains(m, keys.MetricRepairOpen) {
		t.Errorf("metrics lack %s or %s", keys.MetricRepaired, keys.MetricRepairOpen)
	}
}

// TestDurableDLQNeverTrustsTheBody: a body whose payload was altered (its
// hash kept) and a body that is not an envelope stay in the queue, loudly;
// nothing is delivered from them.
func TestDurableDLQNeverTrustsTheBody(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	rg.place(t, "tenant-1", "ana@example.com")
	e1 := rg.event(t, "tenant-1", 1)
	forged := e1
	forged.Payload = map[string]any{"order_id": "o-x", "customer_email": "eve@example.com", "items": []any{}, "total_cents": json.Number("1"), "currency": "EUR"}
	rg.toDLQ(t, envJSON(t, forged), "tenant-1", "forged")
	rg.toDLQ(t, `{"not":"an envelope"}`, "tenant-2", "garbage")

	rep := rg.run(t, repair.Request{Sources: []string{repair.SourceDurableDLQ}})
	if src := rep.Sources[repair.SourceDurableDLQ]; src.Open != 2 || src.Fixed != 0 {
		t.Fatalf("%+v, want 2 open", src)
	}
	reasons := ""
	for _, it := range rep.Sources[repair.SourceDurableDLQ].Items {
		reasons += it.Reason + " | "
	}
	if !strings.Contains(reasons, "differs from the log") || !strings.Contains(reasons, "undecodable") {
		t.Errorf("reasons: %s", reasons)
	}
	if n := rg.mail.count(); n != 0 {
		t.Errorf("emails: %d, want none", n)
	}
	if v, f := rg.depth(t, rg.durableDLQ); v+f != 2 {
		t.Errorf("DLQ: %d visible + %d in flight, want both messages kept", v, f)
	}
}

// streamRecords reads a stream's records from the start until want are there.
func (rg *rig) streamRecords(t *testing.T, arn string, want int) (string, []streamtypes.Record) {
	t.Helper()
	ctx := context.Background()
	d, err := rg.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	shard := aws.ToString(d.StreamDescription.Shards[0].ShardId)
	for deadline := time.Now().Add(10 * time.Second); ; {
		it, err := rg.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String(shard), ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		out, err := rg.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Records) >= want {
			return shard, out.Records
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream has %d records after 10 s, want %d", len(out.Records), want)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

// onFailure renders testdata/ddb-on-failure.json (Lambda's on-failure
// destination record) for a real range of a real stream.
func onFailure(t *testing.T, arn, shard string, first, last streamtypes.Record, n int) string {
	t.Helper()
	raw, err := os.ReadFile("testdata/ddb-on-failure.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	info := doc["DDBStreamBatchInfo"].(map[string]any)
	info["streamArn"], info["shardId"], info["batchSize"] = arn, shard, n
	info["startSequenceNumber"] = aws.ToString(first.Dynamodb.SequenceNumber)
	info["endSequenceNumber"] = aws.ToString(last.Dynamodb.SequenceNumber)
	info["approximateArrivalOfFirstRecord"] = first.Dynamodb.ApproximateCreationDateTime.UTC().Format(time.RFC3339)
	info["approximateArrivalOfLastRecord"] = last.Dynamodb.ApproximateCreationDateTime.UTC().Format(time.RFC3339)
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestChangeFeedOnFailureResolvedFromTheStream: the change feed gave up on a
// batch; its on-failure record names the range only. dlq-repair reads the
// range from the local DynamoDB's real stream, re-runs the change feed on it
// (applied by version) and deletes the message.
func TestChangeFeedOnFailureResolvedFromTheStream(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	o := rg.place(t, "tenant-1", "ana@example.com")
	o, err := rg.orders.Pay(tenantCtx("tenant-1"), o, "pay-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rg.orders.Ship(tenantCtx("tenant-1"), o, "DHL", "TRK1"); err != nil {
		t.Fatal(err)
	}
	shard, recs := rg.streamRecords(t, rg.ordersStream, 3)
	send(t, rg.q, rg.feedDLQ, onFailure(t, rg.ordersStream, shard, recs[0], recs[2], 3))

	rep := rg.run(t, repair.Request{Sources: []string{repair.SourceChangeFeedDLQ}})
	src := rep.Sources[repair.SourceChangeFeedDLQ]
	if src.Fixed != 1 || src.Open != 0 {
		t.Fatalf("%+v, want 1 fixed", src)
	}
	if it := src.Items[0]; it.Via != repair.ViaStream || it.Records != 3 || it.Stream == nil || it.Stream.Shard != shard {
		t.Errorf("item: %+v, want 3 records via the stream of shard %s", it, shard)
	}
	d, ok, err := rg.searchStore.Get(context.Background(), "tenant-1", orders.Entity, o.ID)
	if err != nil || !ok || d.Version != 3 || d.Item[orders.AttrStatus] != orders.StatusShipped {
		t.Errorf("search doc: %+v (found %v, %v), want v3 shipped", d, ok, err)
	}
	if v, f := rg.depth(t, rg.feedDLQ); v+f != 0 {
		t.Errorf("on-failure queue: %d + %d messages, want empty", v, f)
	}
}

// TestPipeDLQResolvedFromTheStream: the Pipe dead-lettered a batch of the
// events stream (head rows included). dlq-repair reads it from the stream,
// re-reads each event row from the log, delivers it, and skips head rows.
func TestPipeDLQResolvedFromTheStream(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	rg.place(t, "tenant-1", "ana@example.com")
	rg.place(t, "tenant-2", "bo@example.com")
	shard, recs := rg.streamRecords(t, rg.eventsStream, 4) // two heads, two events
	// The bare batch-info shape assumed for the Pipe DLQ.
	b, _ := json.Marshal(map[string]any{
		"shardId": shard, "streamArn": rg.eventsStream,
		"startSequenceNumber": aws.ToString(recs[0].Dynamodb.SequenceNumber), "endSequenceNumber": aws.ToString(recs[3].Dynamodb.SequenceNumber),
	})
	send(t, rg.q, rg.pipeDLQ, string(b))

	rep := rg.run(t, repair.Request{Sources: []string{repair.SourcePipeDLQ}})
	if src := rep.Sources[repair.SourcePipeDLQ]; src.Fixed != 1 || src.Open != 0 || src.Items[0].Records != 4 {
		t.Fatalf("%+v, want 1 fixed of 4 records", src)
	}
	if n := rg.mail.count(); n != 2 {
		t.Errorf("emails: %d, want 2", n)
	}
}

// TestStreamGoneFallsBackToTables: past the stream's retention, the records
// are re-read from their tables. The change feed's batch: every order is
// re-applied at its current version, closing the gap the lost change left
// in the projection (v3 parked behind a lost v2). The Pipe's batch: the
// events of its arrival window, found by a Scan of the log.
func TestStreamGoneFallsBackToTables(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	rg.cfg.Streams = trimmedStreams{rg.streams}
	o := rg.place(t, "tenant-1", "ana@example.com")
	o, _ = rg.orders.Pay(tenantCtx("tenant-1"), o, "pay-1")
	if _, err := rg.orders.Ship(tenantCtx("tenant-1"), o, "DHL", "TRK1"); err != nil {
		t.Fatal(err)
	}
	_, orec := rg.streamRecords(t, rg.ordersStream, 3)
	// The feed applied v1 and v3 (parked); v2's batch was dead-lettered.
	for _, i := range []int{0, 2} {
		r, err := changefeed.FromStreams(orec[i], rg.ordersStream)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rg.feed.Apply(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if d, _, _ := rg.searchStore.Get(context.Background(), "tenant-1", orders.Entity, o.ID); d.Version != 1 {
		t.Fatalf("projection before repair: v%d, want v1 (v3 parked)", d.Version)
	}
	send(t, rg.q, rg.feedDLQ, onFailure(t, rg.ordersStream, "shardId-gone", orec[1], orec[1], 1))
	shard, erec := rg.streamRecords(t, rg.eventsStream, 6)
	send(t, rg.q, rg.pipeDLQ, onFailure(t, rg.eventsStream, shard, erec[0], erec[5], 6))

	rep := rg.run(t, repair.Request{Sources: []string{repair.SourcePipeDLQ, repair.SourceChangeFeedDLQ}})
	for _, s := range []string{repair.SourcePipeDLQ, repair.SourceChangeFeedDLQ} {
		if src := rep.Sources[s]; src.Fixed != 1 || src.Items[0].Via != repair.ViaTable {
			t.Errorf("%s: %+v, want fixed via the table", s, src)
		}
	}
	if d, _, _ := rg.searchStore.Get(context.Background(), "tenant-1", orders.Entity, o.ID); d.Version != 3 {
		t.Errorf("projection after repair: v%d, want v3", d.Version)
	}
	if n := rg.mail.count(); n != 3 {
		t.Errorf("emails: %d, want 3 (placed, paid, shipped)", n)
	}
}

// TestDeadLetterReplayed: the mailer was down, so the subscription was
// dead-lettered for two events. Once it is back, the run replays that
// subscription only, from the log, and the dead letters are gone; an event
// whose handler still fails stays open with the new error.
func TestDeadLetterReplayed(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	rg.place(t, "tenant-1", "ana@example.com")
	rg.place(t, "tenant-1", "cy@example.com")
	d, err := delivery.New(mustRegistry(t, rg), delivery.Config{Store: rg.claimStore, Effects: rg.effects, Logger: obs.NewLogger(rg.logs, "debug"), Metrics: obs.NewMetrics(rg.metrics), Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	rg.mail.setFail(errors.New("smtp: 421 service not available"))
	for seq := int64(1); seq <= 2; seq++ {
		res, err := d.Deliver(context.Background(), rg.event(t, "tenant-1", seq))
		if err != nil || res.Count(delivery.DeadLettered) != 1 {
			t.Fatalf("deliver seq %d: %+v, %v; want dead-lettered", seq, res, err)
		}
	}
	if n, _ := rg.claimStore.CountDeadLetters(context.Background(), "tenant-1"); n != 2 {
		t.Fatalf("dead letters: %d, want 2", n)
	}

	rg.mail.setFail(nil)
	rep := rg.run(t, repair.Request{Sources: []string{repair.SourceDeadLetters}})
	if src := rep.Sources[repair.SourceDeadLetters]; src.Fixed != 2 || src.Open != 0 || !src.Complete {
		t.Fatalf("%+v, want 2 fixed, complete", src)
	}
	if n, _ := rg.claimStore.CountDeadLetters(context.Background(), "tenant-1"); n != 0 {
		t.Errorf("dead letters after the run: %d, want 0", n)
	}
	if n := rg.mail.count(); n != 2 {
		t.Errorf("emails: %d, want 2", n)
	}

	// A third event dead-lettered; the mailer still fails at repair time.
	rg.place(t, "tenant-1", "dee@example.com")
	rg.mail.setFail(errors.New("smtp: 421 service not available"))
	if _, err := d.Deliver(context.Background(), rg.event(t, "tenant-1", 3)); err != nil {
		t.Fatal(err)
	}
	rep = rg.run(t, repair.Request{Sources: []string{repair.SourceDeadLetters}, Tenants: []string{"tenant-1"}})
	open := items(rep, repair.SourceDeadLetters, repair.Open)
	if len(open) != 1 || open[0].Seq != 3 || !strings.Contains(open[0].Reason, "failed again") || !strings.Contains(open[0].Error, "421") {
		t.Errorf("open: %+v, want seq 3 failed again with the mailer's error", open)
	}
}

func mustRegistry(t *testing.T, rg *rig) *catalog.Registry {
	t.Helper()
	cat, err := example.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := catalog.NewRegistry(cat, notifications.Module.Bind(&notifications.Notifier{Mailer: rg.mail}))
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestUnrecognisedMetadataStays: a body that is not batch metadata is not
// deleted.
func TestUnrecognisedMetadataStays(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	send(t, rg.q, rg.pipeDLQ, "hello")
	send(t, rg.q, rg.feedDLQ, onFailure(t, "arn:aws:dynamodb:us-east-1:000000000000:table/not-tracked/stream/x", "shardId-1",
		streamtypes.Record{Dynamodb: &streamtypes.StreamRecord{SequenceNumber: aws.String("000000000000000000001"), ApproximateCreationDateTime: aws.Time(time.Now())}},
		streamtypes.Record{Dynamodb: &streamtypes.StreamRecord{SequenceNumber: aws.String("000000000000000000002"), ApproximateCreationDateTime: aws.Time(time.Now())}}, 2))
	rep := rg.run(t, repair.Request{Sources: []string{repair.SourcePipeDLQ, repair.SourceChangeFeedDLQ}})
	if it := items(rep, repair.SourcePipeDLQ, repair.Open); len(it) != 1 || !strings.Contains(it[0].Reason, "unrecognised body") {
		t.Errorf("pipe: %+v", it)
	}
	if it := items(rep, repair.SourceChangeFeedDLQ, repair.Open); len(it) != 1 || !strings.Contains(it[0].Reason, "does not track") {
		t.Errorf("changefeed: %+v", it)
	}
	for _, u := range []string{rg.pipeDLQ, rg.feedDLQ} {
		if v, f := rg.depth(t, u); v+f != 1 {
			t.Errorf("%s: %d + %d, want the message kept", u, v, f)
		}
	}
}

func TestUnknownSource(t *testing.T) {
	r, err := repair.New(repair.Config{SQS: localaws.NewSQS("http://127.0.0.1:1"), Streams: trimmedStreams{}, DB: localaws.NewDynamoDB("http://127.0.0.1:1"),
		Log: &eventstore.Store{}, Deliverer: &delivery.Deliverer{}, DeadLetters: delivery.NewMemoryStore(), Feed: &changefeed.Feed{},
		DurableDLQ: "d", PipeDLQ: "p", ChangeFeedDLQ: "c", EventsTable: "e", StateTable: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Handle(context.Background(), repair.Request{Sources: []string{"everything"}}); !errors.Is(err, repair.ErrUnknownSource) {
		t.Errorf("got %v, want ErrUnknownSource", err)
	}
}

func TestParseBatchInfo(t *testing.T) {
	raw, err := os.ReadFile("testdata/ddb-on-failure.json")
	if err != nil {
		t.Fatal(err)
	}
	bi, err := repair.ParseBatchInfo(raw)
	if err != nil {
		t.Fatal(err)
	}
	from, to, ok := bi.Window()
	if bi.ShardID != "shardId-00000001795950000000-864758bb" || bi.BatchSize != 3 || !ok || to.Sub(from) != time.Second {
		t.Errorf("parsed %+v, window %v..%v (%v)", bi, from, to, ok)
	}
	for _, bad := range []string{`hello`, `{}`, `{"DDBStreamBatchInfo":{"shardId":"s"}}`,
		`{"shardId":"s","streamArn":"a","startSequenceNumber":"10","endSequenceNumber":"9"}`} {
		if _, err := repair.ParseBatchInfo([]byte(bad)); !errors.Is(err, repair.ErrUnrecognisedBody) {
			t.Errorf("%s: got %v, want ErrUnrecognisedBody", bad, err)
		}
	}
	if _, err := repair.ParseBatchInfo([]byte(`{"shardId":"s","streamArn":"a","startSequenceNumber":"9","endSequenceNumber":"10"}`)); err != nil {
		t.Errorf("bare batch info with 9..10: %v (sequence numbers compare as numbers)", err)
	}
}

// TestNoTimeLeft: a run whose deadline leaves nothing after the reserve
// touches no queue and says it is incomplete.
func TestNoTimeLeft(t *testing.T) {
	r, err := repair.New(repair.Config{SQS: localaws.NewSQS("http://127.0.0.1:1"), Streams: trimmedStreams{}, DB: localaws.NewDynamoDB("http://127.0.0.1:1"),
		Log: &eventstore.Store{}, Deliverer: &delivery.Deliverer{}, DeadLetters: delivery.NewMemoryStore(), Feed: &changefeed.Feed{},
		DurableDLQ: "d", PipeDLQ: "p", ChangeFeedDLQ: "c", EventsTable: "e", StateTable: "s", Reserve: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // less than the reserve
	defer cancel()
	rep, err := r.Handle(ctx, repair.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Complete || len(rep.Sources) != len(repair.AllSources) {
		t.Fatalf("report %+v: want incomplete, all %d sources listed", rep, len(repair.AllSources))
	}
	for s, sr := range rep.Sources {
		if sr.Complete || sr.Error == "" {
			t.Errorf("%s: %+v, want incomplete with a reason", s, sr)
		}
	}
}
