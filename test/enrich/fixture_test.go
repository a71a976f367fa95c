package enrich_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

var update = flag.Bool("update", false, "rewrite testdata fixtures")

// The fixtures are Pipe enrichment batches: JSON arrays of stream records in
// the shape of aws-lambda-go's events/testdata/dynamodb-event.json records,
// with this project's attributes. go test -run TestFixtures -update rewrites
// them from the envelopes below.
const (
	fixtureMixed    = "pipe-batch.json"
	fixtureTampered = "pipe-batch-tampered.json"
	streamARN       = "arn:aws:dynamodb:eu-west-1:123456789012:table/Fourlanes-EventsTable-1A2B3C4D5E6F/stream/2026-11-01T00:00:00.000"
)

var created = time.Unix(1795981500, 0)

// chainOf seals events of one tenant in order from its genesis.
func chainOf(t testing.TB, tenant string, specs ...envelope.Envelope) []envelope.Envelope {
	t.Helper()
	prev := chain.Genesis(tenant)
	out := make([]envelope.Envelope, len(specs))
	for i, e := range specs {
		e.TenantID = tenant
		e.Seq = int64(i + 1)
		e.PrevHash = prev
		p, err := envelope.NormalizePayload(e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		e.Payload = p
		if err := chain.Seal(&e); err != nil {
			t.Fatal(err)
		}
		prev = e.Hash
		out[i] = e
	}
	return out
}

func acmeChain(t testing.TB) []envelope.Envelope {
	return chainOf(t, "acme",
		envelope.Envelope{ID: "0190c5a8-7d4e-7c3b-9d1a-000000000001", Type: "order.placed", OccurredAt: "2026-11-29T19:45:00.123Z",
			SchemaVersion: 2, CorrelationID: "req-42", ActorID: "user-7",
			Payload: map[string]any{"order_id": "o-1001", "customer_email": "ada@example.com",
				"items": []any{map[string]any{"sku": "A-1", "qty": 2}}, "total_cents": 12995, "currency": "EUR"}},
		envelope.Envelope{ID: "0190c5a8-7d4e-7c3b-9d1a-000000000002", Type: "order.paid", OccurredAt: "2026-11-29T19:46:00Z",
			SchemaVersion: 1, CorrelationID: "req-43", CausationID: "0190c5a8-7d4e-7c3b-9d1a-000000000001",
			Payload: map[string]any{"order_id": "o-1001", "customer_email": "ada@example.com", "amount_cents": 12995, "payment_ref": "pay-9"}},
		envelope.Envelope{ID: "0190c5a8-7d4e-7c3b-9d1a-000000000003", Type: "order.shipped", OccurredAt: "2026-11-29T19:50:00Z",
			SchemaVersion: 1,
			Payload:       map[string]any{"order_id": "o-1001", "customer_email": "ada@example.com", "carrier": "DHL", "tracking_number": "JD0001"}},
		envelope.Envelope{ID: "0190c5a8-7d4e-7c3b-9d1a-000000000004", Type: "order.cancelled", OccurredAt: "2026-11-29T19:51:00Z",
			SchemaVersion: 1,
			Payload:       map[string]any{"order_id": "o-1001", "customer_email": "ada@example.com", "reason": "customer"}},
	)
}

func globexChain(t testing.TB) []envelope.Envelope {
	return chainOf(t, "globex",
		envelope.Envelope{ID: "0190c5a8-7d4e-7c3b-9d1a-0000000000a1", Type: "order.placed", OccurredAt: "2026-11-29T19:47:00Z",
			SchemaVersion: 1,
			Payload: map[string]any{"order_id": "g-7", "customer_email": "bo@example.com",
				"items": []any{map[string]any{"sku": "Z-9", "qty": 1}}, "total_cents": 500}})
}

func image(t testing.TB, e envelope.Envelope) map[string]events.DynamoDBAttributeValue {
	t.Helper()
	it, err := e.ToItem()
	if err != nil {
		t.Fatal(err)
	}
	img, err := envelope.ToStreamImage(it)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// headImage is the head row eventstore writes with e as the last event.
func headImage(e envelope.Envelope) map[string]events.DynamoDBAttributeValue {
	return map[string]events.DynamoDBAttributeValue{
		keys.AttrTenant:      events.NewStringAttribute(e.TenantID),
		keys.AttrSeq:         events.NewNumberAttribute(strconv.Itoa(keys.HeadSeq)),
		keys.AttrKind:        events.NewStringAttribute(keys.KindHead),
		keys.AttrLastSeq:     events.NewNumberAttribute(strconv.FormatInt(e.Seq, 10)),
		keys.AttrLastHash:    events.NewStringAttribute(e.Hash),
		keys.AttrLastEventID: events.NewStringAttribute(e.ID),
		keys.AttrDedupID:     events.NewStringAttribute(eventstore.HeadDedupID(e.ID)),
	}
}

func record(name string, n int, newImg, oldImg map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	img := newImg
	if img == nil {
		img = oldImg
	}
	view := "NEW_AND_OLD_IMAGES"
	keyImg := map[string]events.DynamoDBAttributeValue{}
	for _, k := range []string{keys.AttrTenant, keys.AttrSeq} {
		if v, ok := img[k]; ok {
			keyImg[k] = v
		}
	}
	return events.DynamoDBEventRecord{
		EventID: "e" + strconv.Itoa(1000+n) + "c87e4b5ce2fe28308fd9f2a7baf3", EventName: name, EventVersion: "1.1",
		EventSource: "aws:dynamodb", AWSRegion: "eu-west-1", EventSourceArn: streamARN,
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: created},
			Keys:                        keyImg,
			NewImage:                    newImg, OldImage: oldImg,
			SequenceNumber: "44215844000000000174504" + strconv.Itoa(38000+n),
			SizeBytes:      int64(200 + 10*n), StreamViewType: view,
		},
	}
}

// mixedBatch: event rows, head rows (INSERT and MODIFY), a MODIFY of an
// event row and a REMOVE, across two tenants. The envelopes that pass are
// acme 1, 2, 3 and globex 1, in that order.
func mixedBatch(t testing.TB) []events.DynamoDBEventRecord {
	a, g := acmeChain(t), globexChain(t)
	edited := a[0]
	edited.Payload = map[string]any{"order_id": "o-1001", "customer_email": "mallory@example.com",
		"items": []any{map[string]any{"sku": "A-1", "qty": 2}}, "total_cents": 1, "currency": "EUR"}
	editedImg := image(t, a[0])
	editedImg[keys.AttrPayload] = image(t, withPayload(t, a[0], edited.Payload))[keys.AttrPayload]
	return []events.DynamoDBEventRecord{
		record("INSERT", 0, image(t, a[0]), nil),
		record("INSERT", 1, headImage(a[0]), nil),
		record("INSERT", 2, image(t, a[1]), nil),
		record("MODIFY", 3, headImage(a[1]), headImage(a[0])),
		record("INSERT", 4, image(t, g[0]), nil),
		record("INSERT", 5, headImage(g[0]), nil),
		record("MODIFY", 6, editedImg, image(t, a[0])),
		record("REMOVE", 7, nil, image(t, a[1])),
		record("INSERT", 8, image(t, a[2]), nil),
		record("MODIFY", 9, headImage(a[2]), headImage(a[1])),
	}
}

// tamperedBatch: the mixed batch, then acme's seq 4 whose payload was edited
// after it was sealed (its stored hash no longer matches), with its head.
func tamperedBatch(t testing.TB) []events.DynamoDBEventRecord {
	a := acmeChain(t)
	img := image(t, a[3])
	img[keys.AttrPayload] = image(t, withPayload(t, a[3], map[string]any{
		"order_id": "o-1001", "customer_email": "ada@example.com", "reason": "fraud"}))[keys.AttrPayload]
	return append(mixedBatch(t),
		record("INSERT", 10, img, nil),
		record("MODIFY", 11, headImage(a[3]), headImage(a[2])),
	)
}

func withPayload(t testing.TB, e envelope.Envelope, p map[string]any) envelope.Envelope {
	t.Helper()
	norm, err := envelope.NormalizePayload(p)
	if err != nil {
		t.Fatal(err)
	}
	e.Payload = norm
	return e
}

func writeFixture(t testing.TB, name string, recs []events.DynamoDBEventRecord) {
	t.Helper()
	raw, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", name), append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestFixtures keeps the checked-in fixtures equal to what the envelopes
// above produce (run with -update to rewrite them).
func TestFixtures(t *testing.T) {
	for name, recs := range map[string][]events.DynamoDBEventRecord{
		fixtureMixed: mixedBatch(t), fixtureTampered: tamperedBatch(t),
	} {
		if *update {
			writeFixture(t, name, recs)
		}
		var got, want any
		if err := json.Unmarshal(readFixture(t, name), &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		raw, _ := json.Marshal(recs)
		_ = json.Unmarshal(raw, &want)
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if string(g) != string(w) {
			t.Errorf("%s is stale: run go test ./pkg/enrich -run TestFixtures -update", name)
		}
	}
}
