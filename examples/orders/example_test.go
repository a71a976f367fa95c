package example_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	example "github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/examples/orders/audit"
	"github.com/fourlanes/fourlanes/examples/orders/inventory"
	"github.com/fourlanes/fourlanes/examples/orders/notifications"
	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/examples/orders/search"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/heartbeat"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/projection"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

func TestMain(m *testing.M) { localaws.Main(m) }

func table(t *testing.T, db *dynamodb.Client, prefix, pk string, pkType types.ScalarAttributeType, sk string, skType types.ScalarAttributeType) string {
	t.Helper()
	desc := localaws.CreateTable(t, db, &dynamodb.CreateTableInput{
		TableName: aws.String(localaws.UniqueName(t, prefix)),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(pk), AttributeType: pkType},
			{AttributeName: aws.String(sk), AttributeType: skType},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(sk), KeyType: types.KeyTypeRange},
		},
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
	})
	return aws.ToString(desc.TableName)
}

// countingMailer records sent emails and fails the first failFirst sends.
type countingMailer struct {
	mu        sync.Mutex
	sent      map[string]int
	failFirst int
}

func (m *countingMailer) Send(_ context.Context, e notifications.Email) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failFirst > 0 {
		m.failFirst--
		return errors.New("mail relay unavailable")
	}
	m.sent[e.Key]++
	return nil
}

type world struct {
	db                           *dynamodb.Client
	eventsTable, ordersTable     string
	stateTable                   string
	cat                          *catalog.Catalog
	events                       *eventstore.Store
	inproc                       *lanes.InProcess
	stock                        *inventory.MemoryStock
	orders                       *orders.Service
	mailer                       *countingMailer
	deliverer                    *delivery.Deliverer
	effects                      *effect.Recorder
	claims                       *delivery.DynamoStore
	logs, metrics                *bytes.Buffer
	apiReg, consumerReg, feedReg *catalog.Registry
}

// newWorld wires the example as three processes would: the API (orders,
// inventory INLINE, audit LOCAL), the durable consumer (notifications) and
// the change feed (search).
func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{db: localaws.DynamoDB(t), logs: &bytes.Buffer{}, metrics: &bytes.Buffer{}}
	w.eventsTable = table(t, w.db, "events", keys.AttrTenant, types.ScalarAttributeTypeS, keys.AttrSeq, types.ScalarAttributeTypeN)
	w.ordersTable = table(t, w.db, "orders", orders.AttrTenant, types.ScalarAttributeTypeS, orders.AttrID, types.ScalarAttributeTypeS)
	w.stateTable = table(t, w.db, "state", keys.AttrPK, types.ScalarAttributeTypeS, keys.AttrSK, types.ScalarAttributeTypeS)
	var err error
	if w.cat, err = example.Catalog(); err != nil {
		t.Fatal(err)
	}
	log := obs.NewLogger(w.logs, "debug")
	metrics := obs.NewMetrics(w.metrics)

	w.stock = inventory.NewMemoryStock(map[string]int{"tea": 10, "mug": 1})
	if w.apiReg, err = catalog.NewRegistry(w.cat, orders.Module.Bind(catalog.NoHandlers{}),
		inventory.Module.Bind(&inventory.Reserver{Stock: w.stock}), audit.Module.Bind(&audit.Auditor{Logger: log, Metrics: metrics})); err != nil {
		t.Fatal(err)
	}
	w.inproc = lanes.NewInProcess(w.apiReg, lanes.Config{Logger: log, Metrics: metrics})
	if w.events, err = eventstore.New(w.db, eventstore.Config{Table: w.eventsTable, Catalog: w.cat, Dispatcher: w.inproc}); err != nil {
		t.Fatal(err)
	}
	w.orders = &orders.Service{Events: w.events, Table: w.ordersTable}

	w.mailer = &countingMailer{sent: map[string]int{}}
	notifier := &notifications.Notifier{Mailer: w.mailer}
	// The framework's module (the heartbeat's DURABLE subscriber) comes
	// with the application's catalog: the consumer binds it too.
	if w.consumerReg, err = catalog.NewRegistry(w.cat, notifications.Module.Bind(notifier),
		heartbeat.Module.Bind(&heartbeat.Monitor{Logger: log, Metrics: metrics})); err != nil {
		t.Fatal(err)
	}
	w.claims = delivery.NewDynamoStore(w.db, w.stateTable)
	if w.effects, err = effect.New(effect.Config{Store: effect.NewDynamoStore(w.db, w.stateTable), Logger: log, Metrics: metrics}); err != nil {
		t.Fatal(err)
	}
	if w.deliverer, err = delivery.New(w.consumerReg, delivery.Config{Store: w.claims, Effects: w.effects, Logger: log, Metrics: metrics}); err != nil {
		t.Fatal(err)
	}
	if w.feedReg, err = catalog.NewRegistry(w.cat, search.Module.Bind(&projection.Projector{Name: search.Name, Store: projection.NewMemory()})); err != nil {
		t.Fatal(err)
	}
	return w
}

func TestEveryLaneIsServedByItsProcess(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	var logs bytes.Buffer
	log := obs.NewLogger(&logs, "info")
	for _, c := range []struct {
		reg   *catalog.Registry
		lanes []catalog.Lane
	}{
		{w.apiReg, []catalog.Lane{catalog.Inline, catalog.Local}},
		{w.consumerReg, []catalog.Lane{catalog.Durable}},
		{w.feedReg, []catalog.Lane{catalog.BestEffort}},
	} {
		if err := c.reg.LogServed(ctx, log, c.lanes...); err != nil {
			t.Errorf("lanes %v: %v", c.lanes, err)
		}
	}
	for _, s := range []string{"inventory.reserve", "audit.order-events", "notifications.order-email", "search.orders"} {
		if !strings.Contains(logs.String(), `"subscription":"`+s+`"`) {
			t.Errorf("start-up log does not name %s", s)
		}
	}
	// A consumer that forgot to register notifications refuses to start.
	forgot, err := catalog.NewRegistry(w.cat)
	if err != nil {
		t.Fatal(err)
	}
	if err := forgot.LogServed(ctx, log, catalog.Durable); !errors.Is(err, catalog.ErrUnbound) {
		t.Errorf("consumer without notifications: got %v, want ErrUnbound", err)
	}
}

func TestOrderFlowThroughEveryInProcessLane(t *testing.T) {
	w := newWorld(t)
	ctx := tenancy.MustWithTenant(context.Background(), "acme")

	o, err := w.orders.Place(ctx, "ann@example.com", []orders.Item{{SKU: "tea", Qty: 2}}, 1250, "EUR")
	if err != nil {
		t.Fatalf("place: %v", err)
	}
	if got := w.stock.Level("tea"); got != 8 {
		t.Errorf("tea after the INLINE reservation: got %d, want 8", got)
	}
	if o, err = w.orders.Pay(ctx, o, "pay-1"); err != nil || o.Version != 2 {
		t.Fatalf("pay: %v (version %d)", err, o.Version)
	}
	stale := o
	stale.Version = 1
	if _, err := w.orders.Ship(ctx, stale, "dhl", "T1"); !errors.Is(err, orders.ErrStale) {
		t.Errorf("ship with a stale version: got %v, want ErrStale", err)
	}
	if o, err = w.orders.Ship(ctx, o, "dhl", "T1"); err != nil {
		t.Fatal(err)
	}
	got, ok, err := orders.Get(context.Background(), w.db, w.ordersTable, "acme", o.ID)
	if err != nil || !ok || got.Version != 3 || got.Status != orders.StatusShipped {
		t.Fatalf("order row: %+v %v %v; want version 3, shipped", got, ok, err)
	}

	// Out of stock: the order commits, the INLINE error reaches the caller.
	big, err := w.orders.Place(ctx, "bob@example.com", []orders.Item{{SKU: "mug", Qty: 5}}, 900, "EUR")
	var pc *eventstore.PostCommitError
	if !errors.As(err, &pc) || !errors.Is(err, inventory.ErrOutOfStock) {
		t.Fatalf("place out of stock: got %v, want a PostCommitError wrapping ErrOutOfStock", err)
	}
	if _, ok, _ := orders.Get(context.Background(), w.db, w.ordersTable, "acme", big.ID); !ok {
		t.Error("the order that failed INLINE was not committed")
	}
	if _, err := w.orders.Cancel(ctx, big, "out_of_stock"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if err := w.inproc.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(w.logs.String(), `"msg":"audit"`); n != 5 {
		t.Errorf("audit lines: got %d, want 5 (placed, paid, shipped, placed, cancelled)", n)
	}

	// Every event reaches notifications exactly once, however often it is delivered.
	evs, err := w.events.AllEvents(context.Background(), "acme")
	if err != nil || len(evs) != 5 {
		t.Fatalf("log: %d events, %v; want 5", len(evs), err)
	}
	for range 5 {
		for _, e := range evs {
			res, err := w.deliverer.Deliver(context.Background(), e)
			if err != nil || res.RetryLater() {
				t.Fatalf("deliver %s: %v", e.Type, err)
			}
		}
	}
	if len(w.mailer.sent) != 5 {
		t.Errorf("emails: got %d keys, want 5", len(w.mailer.sent))
	}
	for k, n := range w.mailer.sent {
		if n != 1 {
			t.Errorf("email %s sent %d times, want 1", k, n)
		}
	}
}

func TestNotificationOnceAcrossDeliveries(t *testing.T) {
	w := newWorld(t)
	ctx := tenancy.MustWithTenant(context.Background(), "acme")
	if _, err := w.orders.Place(ctx, "ann@example.com", []orders.Item{{SKU: "tea", Qty: 1}}, 500, "EUR"); err != nil {
		t.Fatal(err)
	}
	evs, err := w.events.AllEvents(context.Background(), "acme")
	if err != nil || len(evs) != 1 {
		t.Fatal(err)
	}
	e := evs[0]

	// The mail relay fails once: the delivery's retry sends it, once.
	w.mailer.failFirst = 1
	res, err := w.deliverer.Deliver(context.Background(), e)
	if err != nil || res.Subscriptions[0].Outcome != delivery.Completed || res.Subscriptions[0].Attempts != 2 {
		t.Fatalf("deliver: %+v, %v; want completed on the second attempt", res, err)
	}
	if n := w.mailer.sent[emailKey(e)]; n != 1 {
		t.Errorf("sent %d times, want 1", n)
	}

	// Even with the claim gone (say, a replay from the log after it expired),
	// the effect's record keeps the email from going out again.
	hctx, _ := lanes.HandlerContext(context.Background(), e, catalog.Durable)
	hctx = w.effects.Bind(hctx, effect.Scope{Tenant: e.TenantID, EventID: e.ID, Seq: e.Seq, Subscription: emailSub, Lane: effect.LaneDurable, Token: "another-delivery"})
	n := &notifications.Notifier{Mailer: w.mailer}
	if err := n.OnOrderEvent(hctx, e); err != nil {
		t.Fatal(err)
	}
	if n := w.mailer.sent[emailKey(e)]; n != 1 {
		t.Errorf("after a second handler run: sent %d times, want 1", n)
	}
}

const emailSub = "notifications.order-email"

func emailKey(e envelope.Envelope) string {
	return e.ID + ":" + emailSub + ":" + notifications.EffectEmail
}

// TestAppIsValid: the application value the functions and the construct
// take is valid, and binds exactly the modules with DURABLE or BEST_EFFORT
// subscriptions, search reading its table from the environment.
func TestAppIsValid(t *testing.T) {
	if err := example.App.Validate(); err != nil {
		t.Fatal(err)
	}
	var bound []string
	for _, m := range example.App.Runs(catalog.Durable, catalog.BestEffort) {
		bound = append(bound, m.Spec.Name)
	}
	// The framework's own module (the heartbeat's subscriber) runs on the
	// DURABLE lane of every application, after the application's.
	if got, want := strings.Join(bound, " "), "notifications search "+keys.HeartbeatModule; got != want {
		t.Errorf("modules bound in functions: %q, want %s", got, want)
	}
	if got := example.App.Env(catalog.BestEffort); len(got) != 1 || got[0] != search.EnvTable {
		t.Errorf("BEST_EFFORT environment: %v, want [%s]", got, search.EnvTable)
	}
}

// TestHotTenantOrdersStayInOrder: the orders service names each order as its
// shard key, so declaring a tenant hot (Config.Shards, from the
// application's ChainShards) needs no change to it: each order's events go
// to one chain, in the order they happened, its INLINE and LOCAL lanes run
// for the tenant, and the tenant's orders spread over its chains.
func TestHotTenantOrdersStayInOrder(t *testing.T) {
	w := newWorld(t)
	const shards = 4
	hot, err := eventstore.New(w.db, eventstore.Config{Table: w.eventsTable, Catalog: w.cat, Dispatcher: w.inproc, Shards: map[string]int{"acme": shards}})
	if err != nil {
		t.Fatal(err)
	}
	svc := &orders.Service{Events: hot, Table: w.ordersTable}
	ctx := tenancy.MustWithTenant(context.Background(), "acme")
	placed := map[string]bool{}
	for i := range 8 {
		o, err := svc.Place(ctx, fmt.Sprintf("c%d@example.com", i), []orders.Item{{SKU: "tea", Qty: 1}}, 100, "EUR")
		if err != nil {
			t.Fatal(err)
		}
		if o, err = svc.Pay(ctx, o, "pay"); err != nil {
			t.Fatal(err)
		}
		if _, err = svc.Cancel(ctx, o, "changed my mind"); err != nil {
			t.Fatal(err)
		}
		placed[o.ID] = true
	}
	if err := w.inproc.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	chains, err := hot.ChainsOf(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	steps := map[string][]string{} // order id → its event types in log order
	for _, c := range chains {
		evs, err := hot.AllEvents(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			id, _ := e.Payload["order_id"].(string)
			if want := tenancy.Chain("acme", tenancy.ShardOf(id, shards)); e.TenantID != want {
				t.Errorf("order %s: %s on chain %s, want %s", id, e.Type, e.TenantID, want)
			}
			steps[id] = append(steps[id], e.Type)
		}
	}
	if len(chains) < 2 || len(steps) != len(placed) {
		t.Fatalf("%d orders on chains %v; want all 8, over several chains", len(steps), chains)
	}
	for id, s := range steps {
		if got := strings.Join(s, " "); got != "order.placed order.paid order.cancelled" {
			t.Errorf("order %s: %s; want placed, paid, cancelled in that order", id, got)
		}
	}
	if n := strings.Count(w.logs.String(), `"msg":"audit"`); n != 24 {
		t.Errorf("audit lines: %d, want 24 (the LOCAL lane ran for every event)", n)
	}
	if strings.Contains(w.logs.String(), `"tenant":"acme~`) {
		t.Error("a lane ran bound to a chain's name instead of the tenant")
	}
}
