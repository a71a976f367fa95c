package repair_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fourlanes/fourlanes/pkg/repair"
)

// TestPipeDLQConsolidatedBatch: a stream source's failure record describes
// a batch, not one record (DDBStreamBatchInfo with batchSize above 1;
// https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html).
// The message here has the shape the local twin sends to a Pipe's DLQ when
// a batch of several records exhausts its retries (twin pipe.go:
// the Lambda on-failure wrapper naming the Pipe). It spans the records of
// the second and third tenants only, in the middle of the stream:
// dlq-repair reads exactly that range, delivers those two events once each,
// leaves the first tenant's alone and deletes the message.
func TestPipeDLQConsolidatedBatch(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	rg.place(t, "tenant-1", "ana@example.com")
	rg.place(t, "tenant-2", "bo@example.com")
	rg.place(t, "tenant-3", "cy@example.com")
	shard, recs := rg.streamRecords(t, rg.eventsStream, 6) // a head and an event per tenant
	first, last := recs[2], recs[5]
	iso := func(r time.Time) string { return r.UTC().Format("2006-01-02T15:04:05.000Z") }
	b, err := json.Marshal(map[string]any{
		"requestContext": map[string]any{
			"requestId": "5c7b1f0e-2a43-4f0e-9d7e-1f2d3c4b5a69", "pipeArn": "arn:aws:pipes:us-east-1:000000000000:pipe/fourlanes-Pipe",
			"condition": "RetryAttemptsExhausted", "approximateInvokeCount": 3,
		},
		"responseContext": map[string]any{"errorMessage": "target DurableQueue: batch failed"},
		"version":         "1.0",
		"timestamp":       iso(time.Now()),
		"DDBStreamBatchInfo": map[string]any{
			"shardId": shard, "streamArn": rg.eventsStream, "batchSize": 4,
			"startSequenceNumber":             aws.ToString(first.Dynamodb.SequenceNumber),
			"endSequenceNumber":               aws.ToString(last.Dynamodb.SequenceNumber),
			"approximateArrivalOfFirstRecord": iso(aws.ToTime(first.Dynamodb.ApproximateCreationDateTime)),
			"approximateArrivalOfLastRecord":  iso(aws.ToTime(last.Dynamodb.ApproximateCreationDateTime)),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if bi, err := repair.ParseBatchInfo(b); err != nil || bi.BatchSize != 4 {
		t.Fatalf("ParseBatchInfo: %+v, %v", bi, err)
	}
	send(t, rg.q, rg.pipeDLQ, string(b))

	rep := rg.run(t, repair.Request{Sources: []string{repair.SourcePipeDLQ}})
	src := rep.Sources[repair.SourcePipeDLQ]
	if src.Fixed != 1 || src.Open != 0 {
		t.Fatalf("%+v, want the one message fixed", src)
	}
	if it := src.Items[0]; it.Via != repair.ViaStream || it.Records != 4 || it.Stream == nil || it.Stream.Start != aws.ToString(first.Dynamodb.SequenceNumber) {
		t.Errorf("item: %+v, want the 4 records of the range, read from the stream", it)
	}
	if n := rg.mail.count(); n != 2 {
		t.Errorf("emails: %d, want 2 (tenant-2 and tenant-3; tenant-1 is outside the range)", n)
	}
	if v, f := rg.depth(t, rg.pipeDLQ); v+f != 0 {
		t.Errorf("Pipe DLQ: %d + %d messages, want empty", v, f)
	}
}
