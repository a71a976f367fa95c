package consumer_test

import (
	"context"
	"crypto/md5"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
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

	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/examples/orders/notifications"
	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/consumer"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/heartbeat"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/obs/obstest"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

func TestMain(m *testing.M) { localaws.Main(m) }

var update = flag.Bool("update", false, "rewrite testdata/sqs-fifo-event.json")

// ---- fixtures ----

// chainOf builds a tenant's stored events from payloads, hash-chained from genesis.
func chainOf(t *testing.T, tenant string, ids []string, types []string, payloads []any) []envelope.Envelope {
	t.Helper()
	prev := chain.Genesis(tenant)
	out := make([]envelope.Envelope, len(ids))
	for i := range ids {
		p, err := envelope.NormalizePayload(payloads[i])
		if err != nil {
			t.Fatal(err)
		}
		e := envelope.Envelope{ID: ids[i], Type: types[i], TenantID: tenant, SchemaVersion: schemaOf(types[i]),
			OccurredAt: envelope.FormatTime(time.Date(2026, 11, 29, 12, 0, i, 0, time.UTC)), Payload: p, Seq: int64(i + 1), PrevHash: prev,
			CorrelationID: "req-" + tenant}
		if err := chain.Seal(&e); err != nil {
			t.Fatal(err)
		}
		prev = e.Hash
		out[i] = e
	}
	return out
}

func schemaOf(typ string) int {
	if typ == orders.TypePlaced {
		return 2
	}
	return 1
}

func body(t *testing.T, e envelope.Envelope) string {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fifoMessage is an SQS message as Lambda delivers it from a FIFO queue.
func fifoMessage(id, group, dedup, body string, seq int) events.SQSMessage {
	return events.SQSMessage{
		MessageId:     id,
		ReceiptHandle: "AQEB" + id + "-receipt",
		Body:          body,
		Md5OfBody:     fmt.Sprintf("%x", md5.Sum([]byte(body))),
		Attributes: map[string]string{
			"ApproximateReceiveCount":          "1",
			"SentTimestamp":                    "1795953600000",
			"SequenceNumber":                   fmt.Sprintf("188884%014d", seq),
			"MessageGroupId":                   group,
			"SenderId":                         "AROAEXAMPLEPIPEROLE:pipes",
			"MessageDeduplicationId":           dedup,
			"ApproximateFirstReceiveTimestamp": "1795953600100",
		},
		MessageAttributes: map[string]events.SQSMessageAttribute{},
		EventSourceARN:    "arn:aws:sqs:us-east-1:000000000000:fourlanes-DurableQueue.fifo",
		EventSource:       "aws:sqs",
		AWSRegion:         "us-east-1",
	}
}

// Fixed ids, so that -update rewrites the fixture byte for byte.
const (
	idT1Placed = "01937c9a-0000-7000-8000-00000000a101"
	idT1Paid   = "01937c9a-0000-7000-8000-00000000a102"
	idT1Ship   = "01937c9a-0000-7000-8000-00000000a103"
	idT2Placed = "01937c9a-0000-7000-8000-00000000b201"
	idT2Paid   = "01937c9a-0000-7000-8000-00000000b202"
)

// fixtureEvents are the five events of testdata/sqs-fifo-event.json, in queue order.
func fixtureEvents(t *testing.T) []envelope.Envelope {
	t.Helper()
	items := []orders.Item{{SKU: "sku-1", Qty: 2}}
	t1 := chainOf(t, "tenant-1", []string{idT1Placed, idT1Paid, idT1Ship}, []string{orders.TypePlaced, orders.TypePaid, orders.TypeShipped}, []any{
		orders.PlacedV2{OrderID: "o-1", CustomerEmail: "ana@example.com", Items: items, TotalCents: 2500, Currency: "EUR"},
		orders.PaidV1{OrderID: "o-1", CustomerEmail: "ana@example.com", AmountCents: 2500, PaymentRef: "pay-1"},
		orders.ShippedV1{OrderID: "o-1", CustomerEmail: "ana@example.com", Carrier: "DHL", TrackingNumber: "TRK1"},
	})
	t2 := chainOf(t, "tenant-2", []string{idT2Placed, idT2Paid}, []string{orders.TypePlaced, orders.TypePaid}, []any{
		orders.PlacedV2{OrderID: "o-2", CustomerEmail: "bo@example.com", Items: items, TotalCents: 900, Currency: "USD"},
		orders.PaidV1{OrderID: "o-2", CustomerEmail: "bo@example.com", AmountCents: 900, PaymentRef: "pay-2"},
	})
	return []envelope.Envelope{t1[0], t2[0], t1[1], t2[1], t1[2]}
}

const fixturePath = "testdata/sqs-fifo-event.json"

func loadFixture(t *testing.T) events.SQSEvent {
	t.Helper()
	if *update {
		var ev events.SQSEvent
		for i, e := range fixtureEvents(t) {
			ev.Records = append(ev.Records, fifoMessage(fmt.Sprintf("0c1f8f5e-58a4-4a5c-9d1e-00000000000%d", i+1), e.TenantID, e.ID, body(t, e), i+1))
		}
		b, err := json.MarshalIndent(ev, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(fixturePath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fixturePath, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(fixturePath)
	if err != nil {
		t.Fatalf("%v (regenerate with go test -run Fixture -update)", err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestFixtureRoundTrip: the fixture is in AWS's shape (it survives a JSON
// round trip through events.SQSEvent unchanged) and its bodies are the
// events fixtureEvents builds.
func TestFixtureRoundTrip(t *testing.T) {
	ev := loadFixture(t)
	raw, _ := os.ReadFile(fixturePath)
	again, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	_ = json.Unmarshal(raw, &a)
	_ = json.Unmarshal(again, &b)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("round trip changed the fixture:\n got %s\nwant %s", again, raw)
	}
	for i, e := range fixtureEvents(t) {
		got, err := consumer.DecodeMessage(ev.Records[i])
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if got.ID != e.ID || got.Hash != e.Hash {
			t.Errorf("record %d: got %s/%s, want %s/%s (stale fixture? go test -run Fixture -update)", i, got.ID, got.Hash, e.ID, e.Hash)
		}
	}
}

// ---- the rig: a state table in the local DynamoDB, the example's DURABLE module ----

type mailbox struct {
	mu   sync.Mutex
	sent []notifications.Email
	fail error
}

func (m *mailbox) Send(_ context.Context, e notifications.Email) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.sent = append(m.sent, e)
	return nil
}

func (m *mailbox) subjects() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, e := range m.sent {
		out = append(out, e.Subject)
	}
	return out
}

// faultyDB fails claims of the events in failFor with a throttling error, and
// counts writes: claims, completions and dead letters in writes, delivery
// watermarks apart in marks.
type faultyDB struct {
	*dynamodb.Client
	mu      sync.Mutex
	failFor map[string]bool
	writes  int
	marks   int
}

var _ delivery.DynamoDB = (*faultyDB)(nil)

func (f *faultyDB) failing(pk string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.failFor {
		if strings.Contains(pk, id) {
			return true
		}
	}
	return false
}

func (f *faultyDB) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failFor = map[string]bool{}
}

func (f *faultyDB) count(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes += n
}

func (f *faultyDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if pk, ok := in.Key[keys.AttrPK].(*types.AttributeValueMemberS); ok && f.failing(pk.Value) {
		return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("injected: throughput exceeded")}
	}
	if pk, ok := in.Key[keys.AttrPK].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, keys.StateWatermarkPrefix) {
		f.mu.Lock()
		f.marks++
		f.mu.Unlock()
		return f.Client.UpdateItem(ctx, in, o...)
	}
	f.count(1)
	return f.Client.UpdateItem(ctx, in, o...)
}

func (f *faultyDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	f.count(len(in.TransactItems))
	return f.Client.TransactWriteItems(ctx, in, o...)
}

type flushRecorder struct {
	mu sync.Mutex
	n  int
}

func (f *flushRecorder) Flush(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return nil
}

type rig struct {
	db      *faultyDB
	table   string
	store   delivery.Store
	mail    *mailbox
	h       *consumer.Handler
	flush   *flushRecorder
	logs    *obstest.Buffer
	metrics *obstest.Buffer
	// cfg built h; a test may build another handler from it.
	cfg consumer.Config
}

func newRig(t *testing.T, tune ...func(*delivery.Config)) *rig {
	t.Helper()
	raw := localaws.DynamoDB(t)
	desc := localaws.CreateTable(t, raw, delivery.StateTableSchema(localaws.UniqueName(t, "state")))
	rg := &rig{db: &faultyDB{Client: raw, failFor: map[string]bool{}}, table: aws.ToString(desc.TableName), mail: &mailbox{},
		flush: &flushRecorder{}, logs: &obstest.Buffer{}, metrics: &obstest.Buffer{}}
	cat, err := example.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	logger := obs.NewLogger(rg.logs, "debug")
	// The application's catalog carries the framework's module (the
	// heartbeat's DURABLE subscriber), which a consumer must bind too.
	reg, err := catalog.NewRegistry(cat, notifications.Module.Bind(&notifications.Notifier{Mailer: rg.mail}),
		heartbeat.Module.Bind(&heartbeat.Monitor{Logger: logger, Metrics: obs.NewMetrics(rg.metrics)}))
	if err != nil {
		t.Fatal(err)
	}
	bs, err := delivery.NewBatchedStore(delivery.NewDynamoStore(rg.db, rg.table))
	if err != nil {
		t.Fatal(err)
	}
	rg.store = bs
	effects, err := effect.New(effect.Config{Store: effect.NewDynamoStore(raw, rg.table), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	dcfg := delivery.Config{Store: bs, Effects: effects, Logger: logger, Metrics: obs.NewMetrics(rg.metrics), Backoff: time.Millisecond}
	for _, f := range tune {
		f(&dcfg)
	}
	d, err := delivery.New(reg, dcfg)
	if err != nil {
		t.Fatal(err)
	}
	rg.cfg = consumer.Config{Deliverer: d, Registry: reg, Flusher: rg.flush, Logger: logger, Metrics: obs.NewMetrics(rg.metrics)}
	rg.h, err = consumer.New(context.Background(), rg.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rg
}

func lambdaCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "req-" + strings.ReplaceAll(t.Name(), "/", "-")})
}

func failures(resp events.SQSEventResponse) []string {
	var out []string
	for _, f := range resp.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

func (rg *rig) claim(t *testing.T, eventID string) (delivery.ClaimRecord, bool) {
	t.Helper()
	r, ok, err := rg.store.Get(context.Background(), delivery.Key{EventID: eventID, Subscription: "notifications.order-email"})
	if err != nil {
		t.Fatal(err)
	}
	return r, ok
}

// TestTwoTenantsOneInfrastructureFailure is the FIFO contract: tenant-1's
// second message fails on DynamoDB (injected), so it and tenant-1's third
// come back; tenant-1's first and all of tenant-2's are delivered. When the
// cause is gone, the redelivered messages complete, and the first message's
// redelivery costs no write.
func TestTwoTenantsOneInfrastructureFailure(t *testing.T) {
	rg := newRig(t)
	ev := loadFixture(t)
	rg.db.failFor[idT1Paid] = true

	resp, err := rg.h.Handle(lambdaCtx(t), ev)
	if err != nil {
		t.Fatal(err)
	}
	m := func(i int) string { return ev.Records[i].MessageId }
	if got, want := failures(resp), []string{m(2), m(4)}; !slices.Equal(got, want) {
		t.Fatalf("batchItemFailures: got %v, want %v (tenant-1's failed message and the one after it)", got, want)
	}
	for _, c := range []struct {
		id     string
		status delivery.Status
		found  bool
	}{
		{idT1Placed, delivery.StatusCompleted, true},
		{idT2Placed, delivery.StatusCompleted, true},
		{idT2Paid, delivery.StatusCompleted, true},
		{idT1Paid, "", false}, // its claim failed
		{idT1Ship, "", false}, // never attempted
	} {
		r, ok := rg.claim(t, c.id)
		if ok != c.found || r.Status != c.status {
			t.Errorf("claim of %s: got found=%v status=%q, want found=%v status=%q", c.id, ok, r.Status, c.found, c.status)
		}
	}
	if got := rg.mail.subjects(); len(got) != 3 {
		t.Errorf("emails: got %v, want 3 (placed o-1, placed o-2, paid o-2)", got)
	}
	logs := rg.logs.String()
	for _, want := range []string{`"reason":"infrastructure"`, `"reason":"behind_failure"`, `"blocked_by":"` + m(2) + `"`, `"request_id":"req-`, `"tenant":"tenant-1"`, `"lane":"DURABLE"`, `"event_id":"` + idT1Paid + `"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %s", want)
		}
	}
	if met := rg.metrics.String(); !strings.Contains(met, keys.MetricDurableMessageFailed) || !strings.Contains(met, `"Reason":"behind_failure"`) {
		t.Errorf("no %s metric by reason; got %s", keys.MetricDurableMessageFailed, met)
	}
	if rg.flush.n != 1 {
		t.Errorf("Flush called %d times, want 1", rg.flush.n)
	}

	// The cause is fixed; SQS brings back the two failed messages, and (as a
	// redelivery of the whole batch would) the first one again.
	rg.db.heal()
	rg.db.writes, rg.db.marks = 0, 0
	again := events.SQSEvent{Records: []events.SQSMessage{ev.Records[0], ev.Records[2], ev.Records[4]}}
	resp, err = rg.h.Handle(lambdaCtx(t), again)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("redelivery: failures %v, err %v; want none", failures(resp), err)
	}
	if rg.db.writes != 4 {
		t.Errorf("redelivery: %d writes, want 4 (claim + complete for the two new ones; the completed one skipped by the prefetch)", rg.db.writes)
	}
	if rg.db.marks != 0 {
		t.Errorf("redelivery: %d watermark writes, want 0 (the consumer writes none: a watermark is derived from the claims)", rg.db.marks)
	}
	if got := rg.mail.subjects(); len(got) != 5 {
		t.Errorf("emails after redelivery: got %d (%v), want 5, each event once", len(got), got)
	}
}

// TestServedSubscriptionsLoggedAtStart: New names what it serves.
func TestServedSubscriptionsLoggedAtStart(t *testing.T) {
	rg := newRig(t)
	if logs := rg.logs.String(); !strings.Contains(logs, "serving subscription") || !strings.Contains(logs, "notifications.order-email") {
		t.Errorf("start-up logs do not name the DURABLE subscription:\n%s", logs)
	}
}

// TestUnboundDurableSubscriptionRefusesToStart: a DURABLE subscription
// declared but not bound would never run; the consumer does not start.
func TestUnboundDurableSubscriptionRefusesToStart(t *testing.T) {
	cat, err := example.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := catalog.NewRegistry(cat) // notifications not bound
	if err != nil {
		t.Fatal(err)
	}
	d, err := delivery.New(reg, delivery.Config{Store: delivery.NewMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	var logs obstest.Buffer
	_, err = consumer.New(context.Background(), consumer.Config{Deliverer: d, Registry: reg, Logger: obs.NewLogger(&logs, "info")})
	if !errors.Is(err, catalog.ErrUnbound) {
		t.Errorf("got %v, want ErrUnbound", err)
	}
}

// TestPoisonMessages: bodies that are not deliverable envelopes come back
// (never deleted unread) and hold their tenant's later messages; other
// tenants go on. A handler failure, by contrast, does not fail the message.
func TestPoisonMessages(t *testing.T) {
	evs := fixtureEvents(t)
	tampered := evs[0]
	tampered.Payload = map[string]any{"order_id": "o-1", "customer_email": "eve@example.com", "items": []any{}, "total_cents": json.Number("1"), "currency": "EUR"}
	cases := []struct {
		name string
		msg  events.SQSMessage
		why  string
		want []string // batchItemFailures
	}{
		{"not json", fifoMessage("m-bad", "tenant-1", idT1Placed, `{"id":`, 1), "unexpected EOF", nil},
		{"stream record, not an envelope", fifoMessage("m-bad", "tenant-1", idT1Placed, `{"eventID":"1","dynamodb":{}}`, 1), "unknown field", nil},
		{"tampered payload", fifoMessage("m-bad", "tenant-1", idT1Placed, body(t, tampered), 1), "tampered", nil},
		{"group is another tenant", fifoMessage("m-bad", "tenant-9", idT1Placed, body(t, evs[0]), 1), "message group", []string{"m-bad"}}, // its group is tenant-9's
		{"head row dedup id", fifoMessage("m-bad", "tenant-1", "head-"+idT1Placed, body(t, evs[0]), 1), "deduplication id", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rg := newRig(t)
			ev := events.SQSEvent{Records: []events.SQSMessage{
				c.msg,
				fifoMessage("m-t2", "tenant-2", idT2Placed, body(t, evs[1]), 2),
				fifoMessage("m-t1-later", "tenant-1", idT1Paid, body(t, evs[2]), 3),
			}}
			resp, err := rg.h.Handle(lambdaCtx(t), ev)
			if err != nil {
				t.Fatal(err)
			}
			want := c.want
			if want == nil {
				want = []string{"m-bad", "m-t1-later"}
			}
			if got := failures(resp); !slices.Equal(got, want) {
				t.Errorf("batchItemFailures: got %v, want %v", got, want)
			}
			if r, ok := rg.claim(t, idT2Placed); !ok || r.Status != delivery.StatusCompleted {
				t.Errorf("tenant-2's message: claim %+v found=%v, want completed", r, ok)
			}
			logs := rg.logs.String()
			if !strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, "undecodable message") || !strings.Contains(logs, c.why) {
				t.Errorf("no loud error naming %q:\n%s", c.why, logs)
			}
		})
	}
}

// TestDecodeEnvelopeIntegrity: a body that is not a trustworthy stored event
// wraps ErrUndecodable and the *chain.IntegrityError that says why, naming
// its tenant and seq.
func TestDecodeEnvelopeIntegrity(t *testing.T) {
	evs := fixtureEvents(t)
	tampered := evs[2]
	tampered.Payload = map[string]any{"order_id": "o-1", "customer_email": "eve@example.com", "amount_cents": json.Number("1"), "payment_ref": "pay-1"}
	badHash := evs[2]
	badHash.Hash = strings.ToUpper(badHash.Hash) // not lowercase hex
	for _, c := range []struct {
		name   string
		e      envelope.Envelope
		reason chain.Reason
	}{
		{"tampered payload", tampered, chain.ReasonHashMismatch},
		{"hash in upper case", badHash, chain.ReasonMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := consumer.DecodeEnvelope([]byte(body(t, c.e)))
			var ie *chain.IntegrityError
			if !errors.Is(err, consumer.ErrUndecodable) || !errors.As(err, &ie) {
				t.Fatalf("got %v, want ErrUndecodable wrapping a *chain.IntegrityError", err)
			}
			if ie.Reason != c.reason || ie.Tenant != "tenant-1" || ie.Seq != 2 {
				t.Errorf("got %s for tenant %q seq %d, want %s for tenant-1 seq 2", ie.Reason, ie.Tenant, ie.Seq, c.reason)
			}
		})
	}
	if _, err := consumer.DecodeEnvelope([]byte(body(t, evs[2]))); err != nil {
		t.Errorf("the untouched event: got %v, want nil", err)
	}
}

// TestHandlerFailureDoesNotFailTheMessage: the mailer is down; the
// subscription is dead-lettered and the message is done.
func TestHandlerFailureDoesNotFailTheMessage(t *testing.T) {
	rg := newRig(t)
	rg.mail.fail = errors.New("smtp: 421 service not available")
	ev := loadFixture(t)
	resp, err := rg.h.Handle(lambdaCtx(t), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v, err %v; want none", failures(resp), err)
	}
	for _, e := range fixtureEvents(t) {
		if r, ok := rg.claim(t, e.ID); !ok || r.Status != delivery.StatusDead {
			t.Errorf("claim of %s: %+v, want dead", e.ID, r)
		}
	}
	n, err := rg.store.CountDeadLetters(context.Background(), "tenant-1")
	if err != nil || n != 3 {
		t.Errorf("tenant-1 dead letters: %d, %v; want 3", n, err)
	}
}

// TestHeldLeaseComesBack: another delivery holds the claim; the message and
// its tenant's later ones come back.
func TestHeldLeaseComesBack(t *testing.T) {
	rg := newRig(t)
	ev := loadFixture(t)
	now := time.Now()
	c, err := rg.store.Claim(context.Background(), delivery.ClaimRequest{Key: delivery.Key{EventID: idT2Placed, Subscription: "notifications.order-email"},
		Tenant: "tenant-2", Type: orders.TypePlaced, Seq: 1, SchemaVersion: 2, Token: "other", Now: now, LeaseUntil: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour)})
	if err != nil || !c.Acquired {
		t.Fatalf("hold the lease: %+v, %v", c, err)
	}
	resp, err := rg.h.Handle(lambdaCtx(t), ev)
	if err != nil {
		t.Fatal(err)
	}
	m := func(i int) string { return ev.Records[i].MessageId }
	if got, want := failures(resp), []string{m(1), m(3)}; !slices.Equal(got, want) {
		t.Errorf("batchItemFailures: got %v, want %v (tenant-2's two)", got, want)
	}
	if !strings.Contains(rg.logs.String(), `"reason":"retry_later"`) {
		t.Error("no retry_later log")
	}
}

// TestOutOfTime: with no time left before the reserve, nothing starts and
// everything comes back.
func TestOutOfTime(t *testing.T) {
	rg := newRig(t)
	ev := loadFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second) // < the 2 s reserve
	defer cancel()
	resp, err := rg.h.Handle(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != len(ev.Records) {
		t.Errorf("got %d failures, want all %d", len(resp.BatchItemFailures), len(ev.Records))
	}
	if got := rg.mail.subjects(); len(got) != 0 {
		t.Errorf("emails sent: %v, want none", got)
	}
}

// TestReparkedMessageIsDeliverable: a message dlq-repair re-parked (new
// deduplication id) and an operator redrove to the source queue is delivered.
func TestReparkedMessageIsDeliverable(t *testing.T) {
	rg := newRig(t)
	e := fixtureEvents(t)[0]
	ev := events.SQSEvent{Records: []events.SQSMessage{fifoMessage("m-1", e.TenantID, keys.DedupReparkPrefix+"1795953600000000000-0f00", body(t, e), 1)}}
	resp, err := rg.h.Handle(lambdaCtx(t), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v, err %v; want none", failures(resp), err)
	}
	if r, ok := rg.claim(t, e.ID); !ok || r.Status != delivery.StatusCompleted {
		t.Errorf("claim: %+v, want completed", r)
	}
}

// TestShardChainDeliveredForItsTenant: an event of a chain shard (tenant_id
// "tenant-3~2", in a message group of that name, as the Pipe sends it) is
// delivered; its handler runs bound to the tenant, and log records name
// the tenant and the chain.
func TestShardChainDeliveredForItsTenant(t *testing.T) {
	rg := newRig(t)
	const shard = "tenant-3~2"
	e := chainOf(t, shard, []string{"01937c9a-0000-7000-8000-00000000c301"}, []string{orders.TypePlaced}, []any{
		orders.PlacedV2{OrderID: "o-3", CustomerEmail: "cy@example.com", Items: []orders.Item{{SKU: "sku-1", Qty: 1}}, TotalCents: 100, Currency: "EUR"},
	})[0]
	ev := events.SQSEvent{Records: []events.SQSMessage{fifoMessage("0c1f8f5e-58a4-4a5c-9d1e-000000000301", shard, e.ID, body(t, e), 1)}}
	resp, err := rg.h.Handle(lambdaCtx(t), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v, err %v; want none", failures(resp), err)
	}
	if r, ok := rg.claim(t, e.ID); !ok || r.Status != delivery.StatusCompleted {
		t.Fatalf("claim: %+v (found %v), want completed", r, ok)
	}
	logs := rg.logs.String()
	if !strings.Contains(logs, `"tenant":"tenant-3","chain":"tenant-3~2"`) {
		t.Errorf("logs do not name the tenant and the chain:\n%s", logs)
	}
	if strings.Contains(logs, `"tenant":"tenant-3~2"`) {
		t.Errorf("a log record names the chain as the tenant:\n%s", logs)
	}
}
