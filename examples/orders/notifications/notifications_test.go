package notifications_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/examples/orders/notifications"
	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/obs/obstest"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

func TestMain(m *testing.M) { localaws.Main(m) }

// The faults that lost emails in the soak (issue 26), each against the
// DURABLE lane as deployed (claims and effects in a state table of the local
// DynamoDB, whose fault injection acts on the test's own table) with
// notifications' handler: the email is sent, and the claim completed.

// mailer counts emails by key. block, when set, holds every send until
// closed (a process that stops there), after sending when sendFirst.
type mailer struct {
	mu        sync.Mutex
	sent      map[string]int
	block     chan struct{}
	sendFirst bool
}

func (m *mailer) Send(ctx context.Context, e notifications.Email) error {
	m.mu.Lock()
	block, sendFirst := m.block, m.sendFirst
	if block == nil || sendFirst {
		m.sent[e.Key]++
	}
	m.mu.Unlock()
	if block != nil {
		<-block
		return context.Canceled // never reached by the test: its delivery is abandoned
	}
	return nil
}

func (m *mailer) count(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sent[key]
}

type lane struct {
	db      *dynamodb.Client
	table   string
	mail    *mailer
	d       *delivery.Deliverer
	claims  *delivery.DynamoStore
	logs    *obstest.Buffer
	metrics *obstest.Buffer
}

func newLane(t *testing.T) *lane {
	t.Helper()
	db := localaws.DynamoDB(t)
	table := aws.ToString(localaws.CreateTable(t, db, keys.PKSKTable(localaws.UniqueName(t, "state"))).TableName)
	l := &lane{db: db, table: table, mail: &mailer{sent: map[string]int{}}, claims: delivery.NewDynamoStore(db, table),
		logs: &obstest.Buffer{}, metrics: &obstest.Buffer{}}
	cat, err := example.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := catalog.NewRegistry(cat, notifications.Module.Bind(&notifications.Notifier{Mailer: l.mail}))
	if err != nil {
		t.Fatal(err)
	}
	log, metrics := obs.NewLogger(l.logs, "debug"), obs.NewMetrics(l.metrics)
	effects, err := effect.New(effect.Config{Store: effect.NewDynamoStore(db, table), Logger: log, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	// A short lease grace, so that a delivery cut off is taken over soon.
	l.d, err = delivery.New(reg, delivery.Config{Store: l.claims, Effects: effects, Logger: log, Metrics: metrics,
		Backoff: time.Millisecond, LeaseGrace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func placed(t *testing.T) envelope.Envelope {
	t.Helper()
	p, err := envelope.NormalizePayload(orders.PlacedV2{OrderID: "o-1", CustomerEmail: "ann@example.com",
		Items: []orders.Item{{SKU: "tea", Qty: 1}}, TotalCents: 500, Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	e := envelope.Envelope{ID: "0190c2a4-1111-7000-8000-000000000001", Type: orders.TypePlaced, TenantID: "acme", Seq: 1,
		OccurredAt: "2026-12-01T12:00:00Z", SchemaVersion: 2, PrevHash: strings.Repeat("0", 64), Hash: strings.Repeat("1", 64), Payload: p}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	return e
}

func key(e envelope.Envelope) string {
	return effect.Key{EventID: e.ID, Subscription: "notifications.order-email", Name: notifications.EffectEmail}.String()
}

// deliver delivers e with a deadline of within, and returns the result.
func (l *lane) deliver(t *testing.T, e envelope.Envelope, within time.Duration) (delivery.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return l.d.Deliver(ctx, e)
}

func (l *lane) checkOnce(t *testing.T, e envelope.Envelope, wantEmails int) {
	t.Helper()
	if n := l.mail.count(key(e)); n != wantEmails {
		t.Errorf("%d emails sent, want %d\n%s", n, wantEmails, l.logs)
	}
	c, ok, err := l.claims.Get(context.Background(), delivery.Key{EventID: e.ID, Subscription: "notifications.order-email"})
	if err != nil || !ok || c.Status != delivery.StatusCompleted {
		t.Errorf("claim %+v (found %v, %v), want completed", c, ok, err)
	}
}

// TestEmailStartAnswerLost is the soak's cause A: the write that records the
// email's start commits and its answer is lost; the SDK resends it and the
// resend meets the first attempt's record. The reservation the example had
// took it for an earlier delivery's and never sent (0 emails, claim
// completed, one WARN); the effect recognises its own token and sends.
func TestEmailStartAnswerLost(t *testing.T) {
	l := newLane(t)
	e := placed(t)
	localaws.InjectFault(t, l.db, localaws.Fault{Action: "UpdateItem", Table: l.table, Match: `"` + keys.StateEffectPrefix, Kind: "drop"})
	if res, err := l.deliver(t, e, 10*time.Second); err != nil || res.RetryLater() {
		t.Fatalf("deliver: %+v %v", res, err)
	}
	l.checkOnce(t, e, 1)
}

// TestEmailStartAnswerAfterDeadline is the soak's cause B: the start
// commits and its answer comes after the invocation's deadline. The example
// returned the error without releasing its reservation, and every
// redelivery refused to send; the redelivery now sends it.
func TestEmailStartAnswerAfterDeadline(t *testing.T) {
	l := newLane(t)
	e := placed(t)
	localaws.InjectFault(t, l.db, localaws.Fault{Action: "UpdateItem", Table: l.table, Match: `"` + keys.StateEffectPrefix, Kind: "delay", DelayMs: 1500})
	if res, err := l.deliver(t, e, 500*time.Millisecond); err == nil && !res.RetryLater() {
		t.Fatalf("the first delivery past its deadline completed: %+v", res)
	}
	if n := l.mail.count(key(e)); n != 0 {
		t.Fatalf("%d emails before the redelivery, want 0", n)
	}
	time.Sleep(1500 * time.Millisecond) // the held answer lands; the lease is over
	if res, err := l.deliver(t, e, 10*time.Second); err != nil || res.RetryLater() {
		t.Fatalf("redelivery: %+v %v", res, err)
	}
	l.checkOnce(t, e, 1)
}

// TestEmailKillBetweenRecordAndSend: the first delivery's process stops
// after the start is recorded and before the email is sent (its send never
// returns, as a SIGKILL leaves it). The redelivery, once the lease is over,
// sends it: never zero times. It says it may be a second send (it cannot
// know) and counts it.
func TestEmailKillBetweenRecordAndSend(t *testing.T) {
	l := newLane(t)
	e := placed(t)
	l.abandoned(t, e, false)
	if res, err := l.deliver(t, e, 10*time.Second); err != nil || res.RetryLater() {
		t.Fatalf("redelivery: %+v %v", res, err)
	}
	l.checkOnce(t, e, 1)
	if !strings.Contains(l.metrics.String(), `"`+keys.MetricEffectRedone+`"`) {
		t.Errorf("no %s metric for the redone email", keys.MetricEffectRedone)
	}
}

// TestEmailKillAfterSend: the first delivery's process stops after the
// email went out and before it was recorded. At least once: the redelivery
// sends it again (the example's mailer takes no idempotency key), WARNs
// that it may be twice and counts it, so the duplicate is bounded and seen.
func TestEmailKillAfterSend(t *testing.T) {
	l := newLane(t)
	e := placed(t)
	l.abandoned(t, e, true)
	if res, err := l.deliver(t, e, 10*time.Second); err != nil || res.RetryLater() {
		t.Fatalf("redelivery: %+v %v", res, err)
	}
	l.checkOnce(t, e, 2)
	if !strings.Contains(l.metrics.String(), `"`+keys.MetricEffectRedone+`"`) || !strings.Contains(l.logs.String(), "it may happen twice") {
		t.Errorf("the second send is not counted (%s) and WARNed:\n%s", keys.MetricEffectRedone, l.logs)
	}
}

// abandoned starts a delivery of e whose send never returns (after sending,
// when sent), as a killed process leaves it, and waits until its lease is
// over. The goroutine is released when the test ends.
func (l *lane) abandoned(t *testing.T, e envelope.Envelope, sent bool) {
	t.Helper()
	block := make(chan struct{})
	l.mail.mu.Lock()
	l.mail.block, l.mail.sendFirst = block, sent
	l.mail.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = l.deliver(t, e, 300*time.Millisecond)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if r, ok, _ := effect.NewDynamoStore(l.db, l.table).Get(context.Background(), mustKey(t, key(e))); ok && r.Status == effect.StatusStarted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first delivery never recorded its start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(400 * time.Millisecond) // past its deadline and lease
	l.mail.mu.Lock()
	l.mail.block = nil
	l.mail.mu.Unlock()
	t.Cleanup(func() { close(block); <-done })
}

func mustKey(t *testing.T, s string) effect.Key {
	t.Helper()
	k, err := effect.ParseKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
