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
	"strings"
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

func TestOneEventFromEmitToDurableHandler(t *testing.T) {
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

	// The event store, the enrichment and the durable consumer, wired as the
	// service and serve.StreamFilter and serve.DurableConsumer wire them:
	// start-up, not the event's path.
	store, err := eventstore.New(db, eventstore.Config{Table: eventsTable, Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
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
	// From here on, one event.
	if os.Getenv(EnvSetupOnly) == "1" {
		return
	}

	// 1. The service emits.
	tctx := tenancy.WithActor(tenancy.MustWithTenant(ctx, "acme"), "user-7")
	e, err := store.Emit(tctx, orders.TypePlaced, orders.PlacedV2{OrderID: "o-1", CustomerEmail: "zoe@acme.example",
		Items: []orders.Item{{SKU: "sku-mug", Qty: 1}}, TotalCents: 1200, Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}

	// 2. The stream's INSERT of the event row, as the Pipe hands it to the
	// enrichment (aws-lambda-go's DynamoDB event record).
	rec := insertRecord(t, ep, aws.ToString(events_.LatestStreamArn), e.ID)
	out, err := en.Handle(ctx, []json.RawMessage{rec})
	if err != nil || len(out) != 1 || out[0].ID != e.ID {
		t.Fatalf("enrichment: %d envelopes, err %v; want the event %s", len(out), err, e.ID)
	}
	body, err := json.Marshal(out[0])
	if err != nil {
		t.Fatal(err)
	}

	// 3. Its envelope as the FIFO message the durable consumer receives.
	lctx, cancel := context.WithDeadline(lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "req-1"}), time.Now().Add(30*time.Second))
	defer cancel()
	resp, err := h.Handle(lctx, events.SQSEvent{Records: []events.SQSMessage{{
		MessageId: "m-1", ReceiptHandle: "r-1", Body: string(body), EventSource: "aws:sqs",
		Attributes: map[string]string{"MessageGroupId": e.TenantID, "MessageDeduplicationId": e.ID, "ApproximateReceiveCount": "1", "SequenceNumber": "1"},
	}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("durable consumer: failures %v, err %v\n%s", resp.BatchItemFailures, err, logs.String())
	}
	// The notifications handler ran: it logged the email it sent.
	if !strings.Contains(logs.String(), "zoe@acme.example") {
		t.Fatalf("the DURABLE handler did not send the order's email; logs:\n%s", logs.String())
	}
}

// insertRecord reads the stream's INSERT of event id and returns it as the
// Pipe's enrichment receives it.
func insertRecord(t *testing.T, endpoint, streamARN, id string) json.RawMessage {
	t.Helper()
	ctx := context.Background()
	sc := localaws.NewDynamoDBStreams(endpoint)
	desc, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(streamARN)})
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range desc.StreamDescription.Shards {
		it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(streamARN), ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		got, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range got.Records {
			img := lambdaImage(r.Dynamodb.NewImage)
			if r.EventName != streamtypes.OperationTypeInsert || img[keys.AttrID].String() != id {
				continue
			}
			b, err := json.Marshal(events.DynamoDBEventRecord{
				EventID: aws.ToString(r.EventID), EventName: string(r.EventName), EventVersion: aws.ToString(r.EventVersion),
				EventSource: "aws:dynamodb", AWSRegion: aws.ToString(r.AwsRegion), EventSourceArn: streamARN,
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
			return b
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
