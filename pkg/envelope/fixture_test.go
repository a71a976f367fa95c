package envelope_test

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

var update = flag.Bool("update", false, "rewrite testdata fixtures")

// writtenEnvelope is the envelope the fixtures carry, as Emit wrote it.
func writtenEnvelope(t testing.TB) envelope.Envelope {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "written-envelope.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e envelope.Envelope
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	p, err := envelope.NormalizePayload(e.Payload)
	if err != nil {
		t.Fatal(err)
	}
	e.Payload = p
	return e
}

// TestStreamRecordFixtures un-types the stream records of the fixtures, in the
// JSON shape Lambda (a DynamoDBEvent) and Pipes (a JSON array of records)
// deliver, and checks the hash is the one written.
func TestStreamRecordFixtures(t *testing.T) {
	want := writtenEnvelope(t)
	if h, err := chain.Hash(&want); err != nil || h != want.Hash {
		t.Fatalf("written envelope: hash %s, recomputed %s (%v)", want.Hash, h, err)
	}
	if *update {
		writeFixtures(t, want)
	}

	var lambdaEvent events.DynamoDBEvent
	readJSON(t, "lambda-dynamodb-event.json", &lambdaEvent)
	var pipeBatch []events.DynamoDBEventRecord
	readJSON(t, "pipe-enrichment-batch.json", &pipeBatch)
	var rawPipe []struct {
		Dynamodb struct {
			NewImage json.RawMessage `json:"NewImage"`
		} `json:"dynamodb"`
	}
	readJSON(t, "pipe-enrichment-batch.json", &rawPipe)

	for name, recs := range map[string][]events.DynamoDBEventRecord{"lambda": lambdaEvent.Records, "pipe": pipeBatch} {
		if len(recs) != 2 {
			t.Fatalf("%s: got %d records, want 2 (event row, head row)", name, len(recs))
		}
		got, err := envelope.FromStreamImage(recs[0].Change.NewImage)
		if err != nil {
			t.Fatalf("%s: event row: %v", name, err)
		}
		h, err := chain.Hash(&got)
		if err != nil {
			t.Fatal(err)
		}
		if h != want.Hash || got.Hash != want.Hash {
			t.Errorf("%s: recomputed hash %s, stored %s, want %s", name, h, got.Hash, want.Hash)
		}
		if _, err := envelope.FromStreamImage(recs[1].Change.NewImage); !errors.Is(err, envelope.ErrNotEventRow) {
			t.Errorf("%s: head row: got %v, want ErrNotEventRow", name, err)
		}
	}
	got, err := envelope.FromStreamJSON(rawPipe[0].Dynamodb.NewImage)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := chain.Hash(&got); h != want.Hash {
		t.Errorf("raw JSON image: hash %s, want %s", h, want.Hash)
	}
}

func readJSON(t testing.TB, name string, v any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// writeFixtures renders the records in the shape of aws-lambda-go's
// events/testdata/dynamodb-event.json, with this project's attributes.
func writeFixtures(t testing.TB, e envelope.Envelope) {
	t.Helper()
	it, err := e.ToItem()
	if err != nil {
		t.Fatal(err)
	}
	img, err := envelope.ToStreamImage(it)
	if err != nil {
		t.Fatal(err)
	}
	head := map[string]events.DynamoDBAttributeValue{
		keys.AttrTenant:      events.NewStringAttribute(e.TenantID),
		keys.AttrSeq:         events.NewNumberAttribute("0"),
		keys.AttrKind:        events.NewStringAttribute(keys.KindHead),
		keys.AttrLastSeq:     events.NewNumberAttribute("1"),
		keys.AttrLastHash:    events.NewStringAttribute(e.Hash),
		keys.AttrLastEventID: events.NewStringAttribute(e.ID),
		keys.AttrDedupID:     events.NewStringAttribute("head-" + e.ID),
	}
	arn := "arn:aws:dynamodb:us-east-1:123456789012:table/fourlanes-Events-1ABCDEF/stream/2026-11-29T19:00:00.000"
	rec := func(id, seqNo string, keyImg, newImg map[string]events.DynamoDBAttributeValue, eventName string) events.DynamoDBEventRecord {
		return events.DynamoDBEventRecord{
			EventID: id, EventName: eventName, EventVersion: "1.1", EventSource: "aws:dynamodb",
			AWSRegion: "us-east-1", EventSourceArn: arn,
			Change: events.DynamoDBStreamRecord{
				ApproximateCreationDateTime: events.SecondsEpochTime{Time: time.Unix(1795981500, 0)},
				Keys:                        keyImg, NewImage: newImg, SequenceNumber: seqNo, SizeBytes: 512,
				StreamViewType: "NEW_AND_OLD_IMAGES",
			},
		}
	}
	evKeys := map[string]events.DynamoDBAttributeValue{keys.AttrTenant: img[keys.AttrTenant], keys.AttrSeq: img[keys.AttrSeq]}
	hdKeys := map[string]events.DynamoDBAttributeValue{keys.AttrTenant: head[keys.AttrTenant], keys.AttrSeq: head[keys.AttrSeq]}
	recs := []events.DynamoDBEventRecord{
		rec("7de3041dd709b024af6f29e4fa13d34c", "111100000000000000000001", evKeys, img, "INSERT"),
		rec("7de3041dd709b024af6f29e4fa13d34d", "111100000000000000000002", hdKeys, head, "INSERT"),
	}
	write := func(name string, v any) {
		raw, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", name), append(raw, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("lambda-dynamodb-event.json", events.DynamoDBEvent{Records: recs})
	write("pipe-enrichment-batch.json", recs)
}

// FuzzFromStreamJSON feeds arbitrary bytes to the stream-image decoder: it must
// never panic, and whatever it accepts must be a valid stored envelope whose
// canonical bytes survive another item round trip.
func FuzzFromStreamJSON(f *testing.F) {
	for _, name := range []string{"pipe-enrichment-batch.json"} {
		var recs []struct {
			Dynamodb struct {
				NewImage json.RawMessage `json:"NewImage"`
			} `json:"dynamodb"`
		}
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		if err := json.Unmarshal(raw, &recs); err != nil {
			f.Fatal(err)
		}
		for _, r := range recs {
			f.Add([]byte(r.Dynamodb.NewImage))
		}
	}
	f.Add([]byte(`{"kind":{"S":"event"},"payload":{"M":{"n":{"N":"1e400"}}}}`))
	f.Add([]byte(`{"kind":{"S":"event"},"seq":{"N":"x"}}`))
	f.Add([]byte(`{"kind":{"SS":["event"]}}`))
	f.Add([]byte(`{"payload":{"L":[{"NULL":true},{"BOOL":false}]}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := envelope.FromStreamJSON(data)
		if err != nil {
			return
		}
		if err := e.ValidateStored(); err != nil {
			t.Fatalf("decoder accepted an invalid envelope: %v", err)
		}
		it, err := e.ToItem()
		if err != nil {
			t.Fatalf("accepted envelope does not encode: %v", err)
		}
		again, err := envelope.FromItem(it)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		a, err1 := e.CanonicalBytes()
		b, err2 := again.CanonicalBytes()
		if err1 != nil || err2 != nil || string(a) != string(b) {
			t.Fatalf("canonical bytes changed in a round trip: %s vs %s (%v, %v)", a, b, err1, err2)
		}
	})
}
