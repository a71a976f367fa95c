// Package eventpath follows one event from Emit to a DURABLE handler, in
// one process, through the code that handles it in the stack: the event
// store appends it, the stream's INSERT record goes through the Pipe's
// enrichment (pkg/enrich), its envelope arrives as a
// FIFO message at the durable consumer (pkg/consumer),
// which claims it (pkg/delivery) and runs the orders example's
// notifications handler. Our DynamoDB runs in its own process (make test's
// with-servers), so it is not part of the path.
//
// `make bench` runs this test with coverage and reports how many files and
// packages the event touches (bench/eventpath.go): issue 14 asks for fewer
// than before the framework split.
package eventpath_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/consumer"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/enrich"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

func TestMain(m *testing.M) { localaws.Main(m) }

// EnvSetupOnly, set to 1, stops the test once everything is wired, before
// the event: make bench takes two coverage profiles, with and without it,
// and counts the blocks the event itself ran (bench/eventpath.go). (The
// runtime cannot clear a test binary's counters: runtime/coverage refuses.)
const EnvSetupOnly = "FOURLANES_EVENTPATH_SETUP_ONLY"

// path is the event path wired as the service and serve.StreamFilter and
// serve.DurableConsumer wire it: start-up, not the event's path.
type path struct {
	store     *eventstore.Store
	en        *enrich.Handler
	h         *consumer.Handler
	logs      *bytes.Buffer
	endpoint  string
	streamARN string
	stream    *streamReader
}

func wire(t testing.TB) *path {
	t.Helper()
	ctx := context.Background()
	ep := localaws.DynamoDBEndpoint(t)
	db := localaws.NewDynamoDB(ep)
	events_ := localaws.CreateTable(t, db, eventstore.TableSchema(localaws.UniqueName(t, "events")))
	state := localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "state")))
	eventsTable, stateTable := aws.ToString(events_.TableName), aws.ToString(state.TableName)
	cat, err := example.App.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	store, err := eventstore.New(db, eventstore.Config{Table: eventsTable, Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	metrics := obs.NewMetrics(&bytes.Buffer{})
	en, err := enrich.New(enrich.Config{Catalog: cat, Logger: log, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	var bindings []catalog.Binding
	for _, m := range example.App.Runs(catalog.Durable) {
		b, err := m.Bind(app.Runtime{Function: keys.FnDurableConsumer, DynamoDB: db, StateTable: stateTable, Env: map[string]string{}, Logger: log, Metrics: metrics})
		if err != nil {
			t.Fatal(err)
		}
		bindings = append(bindings, b.Binding)
	}
	reg, err := catalog.NewRegistry(cat, bindings...)
	if err != nil {
		t.Fatal(err)
	}
	claims := delivery.NewDynamoStore(db, stateTable).WithLog(eventsTable)
	bs, err := delivery.NewBatchedStore(claims)
	if err != nil {
		t.Fatal(err)
	}
	effects, err := effect.New(effect.Config{Store: effect.NewDynamoStore(db, stateTable), Logger: log, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	d, err := delivery.New(reg, delivery.Config{Store: bs, Log: claims, Effects: effects, Logger: log, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	h, err := consumer.New(ctx, consumer.Config{Deliverer: d, Registry: reg, Logger: log, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(events_.LatestStreamArn)
	return &path{store: store, en: en, h: h, logs: logs, endpoint: ep, streamARN: arn, stream: &streamReader{endpoint: ep, arn: arn}}
}

// placed is the order the path carries, n making it an order of its own.
func placed(n int) orders.PlacedV2 {
	return orders.PlacedV2{OrderID: fmt.Sprintf("o-%d", n), CustomerEmail: "zoe@acme.example",
		Items: []orders.Item{{SKU: "sku-mug", Qty: 1}}, TotalCents: 1200, Currency: "EUR"}
}

// emit is step 1: the service emits.
func (p *path) emit(t testing.TB, n int) envelope.Envelope {
	tctx := tenancy.WithActor(tenancy.MustWithTenant(context.Background(), "acme"), "user-7")
	e, err := p.store.Emit(tctx, orders.TypePlaced, placed(n))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// enrich is step 2: the stream's INSERT of the event row (rec), as the
// Pipe hands it to the enrichment, becomes the FIFO message's body.
func (p *path) enrich(t testing.TB, e envelope.Envelope, rec json.RawMessage) []byte {
	out, err := p.en.Handle(context.Background(), []json.RawMessage{rec})
	if err != nil || len(out) != 1 || out[0].ID != e.ID {
		t.Fatalf("enrichment: %d envelopes, err %v; want the event %s", len(out), err, e.ID)
	}
	body, err := json.Marshal(out[0])
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// deliver is step 3: the envelope as the FIFO message the durable consumer
// receives.
func (p *path) deliver(t testing.TB, e envelope.Envelope, body []byte, n int) {
	lctx, cancel := context.WithDeadline(lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"}), time.Now().Add(30*time.Second))
	defer cancel()
	resp, err := p.h.Handle(lctx, events.SQSEvent{Records: []events.SQSMessage{{
		MessageId: fmt.Sprintf("m-%d", n), ReceiptHandle: "r-1", Body: string(body), EventSource: "aws:sqs",
		Attributes: map[string]string{"MessageGroupId": e.TenantID, "MessageDeduplicationId": e.ID, "ApproximateReceiveCount": "1", "SequenceNumber": strconv.Itoa(n)},
	}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("durable consumer: failures %v, err %v\n%s", resp.BatchItemFailures, err, p.logs.String())
	}
}

func TestOneEventFromEmitToDurableHandler(t *testing.T) {
	p := wire(t)
	// From here on, one event.
	if os.Getenv(EnvSetupOnly) == "1" {
		return
	}
	e := p.emit(t, 1)
	body := p.enrich(t, e, p.stream.insert(t, e.ID))
	p.deliver(t, e, body, 1)
	// The notifications handler ran: it logged the email it sent.
	if !strings.Contains(p.logs.String(), "zoe@acme.example") {
		t.Fatalf("the DURABLE handler did not send the order's email; logs:\n%s", p.logs.String())
	}
}

// BenchmarkEventPath carries b.N events of one tenant along the path and
// reports the CPU this process spends per event on each step (user+system,
// every thread, GC included; our DynamoDB runs in a process of its own, so
// this is the client's side, the AWS SDK's work included): emit-cpu-us,
// enrich-cpu-us and deliver-cpu-us (a first delivery). Reading the stream is
// the test's stand-in for the Pipe and is not counted.
func BenchmarkEventPath(b *testing.B) {
	p := wire(b)
	var emit, enr, del time.Duration
	n := 0
	for b.Loop() {
		n++
		c0 := cpuTime()
		e := p.emit(b, n)
		c1 := cpuTime()
		rec := p.stream.insert(b, e.ID)
		c2 := cpuTime()
		body := p.enrich(b, e, rec)
		c3 := cpuTime()
		p.deliver(b, e, body, n)
		c4 := cpuTime()
		emit, enr, del = emit+c1-c0, enr+c3-c2, del+c4-c3
		p.logs.Reset()
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	b.ReportMetric(us(emit), "emit-cpu-us/event")
	b.ReportMetric(us(enr), "enrich-cpu-us/event")
	b.ReportMetric(us(del), "deliver-cpu-us/event")
}

// cpuTime is the CPU time this process has used (all threads, GC included).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// streamReader reads the events table's stream from its start, once: each
// insert call goes on from where the last one stopped.
type streamReader struct {
	endpoint, arn string
	iters         []*string // per shard, the next iterator
	seen          map[string]json.RawMessage
}

// insert returns the stream's INSERT of event id as the Pipe's enrichment
// receives it (aws-lambda-go's DynamoDB event record).
func (s *streamReader) insert(t testing.TB, id string) json.RawMessage {
	t.Helper()
	ctx := context.Background()
	sc := localaws.NewDynamoDBStreams(s.endpoint)
	if s.seen == nil {
		s.seen = map[string]json.RawMessage{}
		desc, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(s.arn)})
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range desc.StreamDescription.Shards {
			it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(s.arn), ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
			if err != nil {
				t.Fatal(err)
			}
			s.iters = append(s.iters, it.ShardIterator)
		}
	}
	for i := range s.iters {
		for s.iters[i] != nil {
			if rec, ok := s.seen[id]; ok {
				return rec
			}
			got, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: s.iters[i]})
			if err != nil {
				t.Fatal(err)
			}
			s.iters[i] = got.NextShardIterator
			for _, r := range got.Records {
				img := lambdaImage(r.Dynamodb.NewImage)
				if r.EventName != streamtypes.OperationTypeInsert || img[keys.AttrKind].String() != keys.KindEvent {
					continue
				}
				b, err := json.Marshal(events.DynamoDBEventRecord{
					EventID: aws.ToString(r.EventID), EventName: string(r.EventName), EventVersion: aws.ToString(r.EventVersion),
					EventSource: "aws:dynamodb", AWSRegion: aws.ToString(r.AwsRegion), EventSourceArn: s.arn,
					Change: events.DynamoDBStreamRecord{
						ApproximateCreationDateTime: events.SecondsEpochTime{Time: aws.ToTime(r.Dynamodb.ApproximateCreationDateTime)},
						Keys:                        lambdaImage(r.Dynamodb.Keys), NewImage: img,
						SequenceNumber: aws.ToString(r.Dynamodb.SequenceNumber), SizeBytes: aws.ToInt64(r.Dynamodb.SizeBytes),
						StreamViewType: string(r.Dynamodb.StreamViewType),
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				s.seen[img[keys.AttrID].String()] = b
			}
			if len(got.Records) == 0 {
				break // this shard has nothing more yet
			}
		}
		if rec, ok := s.seen[id]; ok {
			return rec
		}
	}
	t.Fatalf("no INSERT of event %s on the stream", id)
	return nil
}

// lambdaImage converts a stream image to aws-lambda-go's attribute values.
func lambdaImage(m map[string]streamtypes.AttributeValue) map[string]events.DynamoDBAttributeValue {
	out := make(map[string]events.DynamoDBAttributeValue, len(m))
	for k, v := range m {
		out[k] = lambdaValue(v)
	}
	return out
}

func lambdaValue(v streamtypes.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *streamtypes.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *streamtypes.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *streamtypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *streamtypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *streamtypes.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *streamtypes.AttributeValueMemberM:
		return events.NewMapAttribute(lambdaImage(v.Value))
	case *streamtypes.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = lambdaValue(e)
		}
		return events.NewListAttribute(l)
	case *streamtypes.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *streamtypes.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	}
	panic(fmt.Sprintf("eventpath: attribute type %T", v))
}
