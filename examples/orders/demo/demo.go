// Package demo is the workload `fourlanes dev` and the end-to-end tests run
// on the local twin: the example orders application (examples/orders) as a
// service would run it, plus the two ways they break it on purpose.
//
//   - Order runs one order through its life (placed, paid, then shipped or
//     cancelled): each step writes the orders table and emits its event in
//     one transaction, with INLINE (inventory) and LOCAL (audit) in process.
//   - EmitUnchecked plays a producer that skipped the catalog's schema
//     check: the event is chained and delivered like any other, and the
//     DURABLE subscriber that cannot decode it dead-letters it.
//   - PlantPoison makes one order's change record fail in the change feed
//     every time (its search document is corrupt), the poison record AWS's
//     bisect isolates; FixPoison removes the cause so dlq-repair can apply it.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/examples/orders/audit"
	"github.com/fourlanes/fourlanes/examples/orders/inventory"
	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/examples/orders/search"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// Tables names the tables the application writes.
type Tables struct {
	Events, Orders, Search string
}

// TablesFromEnv reads the tables from a function's environment (the
// template's variables, resolved by the twin): dlq-repair's names them all.
func TablesFromEnv(env map[string]string) (Tables, error) {
	t := Tables{Events: env[keys.EnvEventsTable], Orders: env[orders.EnvTable], Search: env[search.EnvTable]}
	if t.Events == "" || t.Orders == "" || t.Search == "" {
		return t, fmt.Errorf("demo: want %s, %s and %s in the environment, got %v", keys.EnvEventsTable, orders.EnvTable, search.EnvTable, env)
	}
	return t, nil
}

// App is the example application.
type App struct {
	Events *eventstore.Store
	Orders *orders.Service
	Tables Tables

	db      *dynamodb.Client
	inproc  *lanes.InProcess
	emitted atomic.Int64
}

// New wires the application: the catalog of examples/orders, the INLINE
// inventory (stock for every order the demo places) and the LOCAL audit.
// log receives the application's and its handlers' logs.
func New(db *dynamodb.Client, t Tables, log *slog.Logger) (*App, error) {
	cat, err := example.Catalog()
	if err != nil {
		return nil, fmt.Errorf("demo: catalog: %w", err)
	}
	metrics := obs.NewMetrics(io.Discard)
	stock := inventory.NewMemoryStock(map[string]int{"sku-mug": 1 << 30, "sku-tea": 1 << 30, "sku-pot": 1 << 30})
	reg, err := catalog.NewRegistry(cat,
		inventory.Module.Bind(&inventory.Reserver{Stock: stock}),
		audit.Module.Bind(&audit.Auditor{Logger: log, Metrics: metrics}),
	)
	if err != nil {
		return nil, fmt.Errorf("demo: registry: %w", err)
	}
	inproc := lanes.NewInProcess(reg, lanes.Config{Logger: log, Metrics: metrics})
	store, err := eventstore.New(db, eventstore.Config{Table: t.Events, Catalog: uncheckedCatalog{cat}, Dispatcher: inproc})
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	return &App{Events: store, Orders: &orders.Service{Events: store, Table: t.Orders}, Tables: t, db: db, inproc: inproc}, nil
}

// Emitted counts the events the application has appended.
func (a *App) Emitted() int64 { return a.emitted.Load() }

// Flush waits for the LOCAL handlers started so far.
func (a *App) Flush(ctx context.Context) error { return a.inproc.Flush(ctx) }

var items = [][]orders.Item{
	{{SKU: "sku-mug", Qty: 2}},
	{{SKU: "sku-tea", Qty: 1}, {SKU: "sku-pot", Qty: 1}},
	{{SKU: "sku-tea", Qty: 3}},
}

// Order runs order number i of tenant through its life: placed, paid, and
// then shipped, or (every fourth order) cancelled. It returns the order.
func (a *App) Order(ctx context.Context, tenant string, i int) (orders.Order, error) {
	ctx, err := tenancy.WithTenant(ctx, tenant)
	if err != nil {
		return orders.Order{}, err
	}
	ctx = tenancy.WithActor(ctx, "demo")
	email := fmt.Sprintf("customer-%d@%s.example", i, tenant)
	o, err := a.Orders.Place(ctx, email, items[i%len(items)], int64(1000+i), "EUR")
	if err != nil {
		return o, err
	}
	a.emitted.Add(1)
	if o, err = a.Orders.Pay(ctx, o, fmt.Sprintf("pay-%s-%d", tenant, i)); err != nil {
		return o, err
	}
	a.emitted.Add(1)
	if i%4 == 3 {
		o, err = a.Orders.Cancel(ctx, o, "customer")
	} else {
		o, err = a.Orders.Ship(ctx, o, "demo-post", fmt.Sprintf("TRK%s%04d", tenant, i))
	}
	if err == nil {
		a.emitted.Add(1)
	}
	return o, err
}

// Workload runs perTenant orders for each tenant, the tenants concurrently,
// and returns every order placed by tenant.
func (a *App) Workload(ctx context.Context, tenants []string, perTenant int) (map[string][]orders.Order, error) {
	var mu sync.Mutex
	out := map[string][]orders.Order{}
	errs := make([]error, len(tenants))
	var wg sync.WaitGroup
	for ti, tenant := range tenants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perTenant {
				o, err := a.Order(ctx, tenant, i)
				if err != nil {
					errs[ti] = fmt.Errorf("tenant %s order %d: %w", tenant, i, err)
					return
				}
				mu.Lock()
				out[tenant] = append(out[tenant], o)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// Unchecked is a payload emitted without the catalog's schema check.
type Unchecked struct {
	Payload map[string]any
}

// uncheckedCatalog is the application's catalog, except that an Unchecked
// payload skips the schema check (as a producer built with a stale or
// hand-edited catalog would): the type must still be declared.
type uncheckedCatalog struct{ *catalog.Catalog }

func (c uncheckedCatalog) Prepare(eventType string, payload any) (int, map[string]any, error) {
	u, ok := payload.(Unchecked)
	if !ok {
		return c.Catalog.Prepare(eventType, payload)
	}
	t, _, ok := c.Type(eventType)
	if !ok {
		return c.Catalog.Prepare(eventType, payload)
	}
	norm, err := envelope.NormalizePayload(u.Payload)
	if err != nil {
		return 0, nil, err
	}
	return t.Current().Schema, norm, nil
}

// PrepareFor is Prepare for the event store (eventstore.TenantCatalog): an
// Unchecked payload skips the catalog here too.
func (c uncheckedCatalog) PrepareFor(ctx context.Context, tenant, eventType string, payload any) (int, map[string]any, error) {
	if _, ok := payload.(Unchecked); ok {
		return c.Prepare(eventType, payload)
	}
	return c.Catalog.PrepareFor(ctx, tenant, eventType, payload)
}

// EmitUnchecked appends an order.paid event whose payload lacks a field the
// declared schema requires (payment_ref), as a producer built with a stale
// catalog would write it, and carries one it does not declare (gift_wrap,
// which readers ignore). It is chained and delivered like any other event;
// the DURABLE notifications subscriber's decode refuses it naming
// payload.payment_ref, permanently, and dead-letters it: one dead letter for
// tenant, as reconcile then counts.
func (a *App) EmitUnchecked(ctx context.Context, tenant string) (envelope.Envelope, error) {
	ctx, err := tenancy.WithTenant(ctx, tenant)
	if err != nil {
		return envelope.Envelope{}, err
	}
	e, err := a.Events.Emit(ctx, orders.TypePaid, Unchecked{Payload: map[string]any{
		"order_id": uuid.NewString(), "customer_email": "someone@" + tenant + ".example",
		"amount_cents": 100, "gift_wrap": true,
	}})
	if err == nil {
		a.emitted.Add(1)
	}
	return e, err
}

// PlantPoison places an order of tenant whose search document is already
// there, and corrupt (not JSON): the change feed's projection fails on the
// order's change record every time, so the mapping bisects the batch down
// to that record, retries it, and sends its metadata to the on-failure
// queue; the records around it are applied. It returns the order.
func (a *App) PlantPoison(ctx context.Context, tenant string) (orders.Order, error) {
	o := orders.Order{ID: uuid.NewString(), Version: 1, Status: orders.StatusPlaced, CustomerEmail: "poison@" + tenant + ".example",
		Items: items[0], TotalCents: 999, Currency: "EUR"}
	_, err := a.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(a.Tables.Search), Item: map[string]types.AttributeValue{
		keys.AttrPK:      &types.AttributeValueMemberS{Value: tenant},
		keys.AttrSK:      &types.AttributeValueMemberS{Value: orders.Entity + search.SKSep + o.ID},
		keys.AttrVersion: &types.AttributeValueMemberN{Value: "0"},
		search.AttrDoc:   &types.AttributeValueMemberS{Value: "{corrupt"},
	}})
	if err != nil {
		return o, fmt.Errorf("plant poison: %w", err)
	}
	tctx, err := tenancy.WithTenant(ctx, tenant)
	if err != nil {
		return o, err
	}
	put := orders.PutNew(a.Tables.Orders, tenant, o, time.Now())
	_, err = a.Events.Emit(tctx, orders.TypePlaced, orders.PlacedV2{OrderID: o.ID, CustomerEmail: o.CustomerEmail, Items: o.Items, TotalCents: o.TotalCents, Currency: o.Currency}, put)
	if err != nil {
		return o, fmt.Errorf("plant poison: %w", err)
	}
	a.emitted.Add(1)
	return o, nil
}

// FixPoison removes the corrupt search document PlantPoison planted: the
// cause is fixed, and dlq-repair can now apply the order.
func (a *App) FixPoison(ctx context.Context, tenant, orderID string) error {
	_, err := a.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(a.Tables.Search), Key: map[string]types.AttributeValue{
		keys.AttrPK: &types.AttributeValueMemberS{Value: tenant},
		keys.AttrSK: &types.AttributeValueMemberS{Value: orders.Entity + search.SKSep + orderID},
	}})
	if err != nil {
		return fmt.Errorf("fix poison: %w", err)
	}
	return nil
}

// SearchVersion reads the version the search projection holds for an
// order, and whether it holds one.
func (a *App) SearchVersion(ctx context.Context, tenant, orderID string) (int64, bool, error) {
	out, err := a.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(a.Tables.Search), ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{
		keys.AttrPK: &types.AttributeValueMemberS{Value: tenant},
		keys.AttrSK: &types.AttributeValueMemberS{Value: orders.Entity + search.SKSep + orderID},
	}})
	if err != nil || out.Item == nil {
		return 0, false, err
	}
	n, ok := out.Item[keys.AttrVersion].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false, nil
	}
	var v int64
	_, err = fmt.Sscan(n.Value, &v)
	return v, true, err
}
