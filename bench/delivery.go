package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/examples/orders/notifications"
	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// The delivery bench uses the example application's DURABLE subscription
// (notifications.order-email on order.*), bound as functions/durable-consumer
// binds it, but with an in-memory sent log: the handler's own bookkeeping is
// the application's cost, not delivery's, and stays out of the count. (The
// bench declares no module of its own: the catalog gate reads this package.)

// memSentLog is notifications.SentLog in memory.
type memSentLog struct {
	mu   sync.Mutex
	sent map[string]sentEntry
}

type sentEntry struct {
	token string
	done  bool
}

var _ notifications.SentLog = (*memSentLog)(nil)

func (m *memSentLog) Reserve(_ context.Context, key, token string) (ok, sent bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, held := m.sent[key]; held {
		return false, e.done, nil
	}
	m.sent[key] = sentEntry{token: token}
	return true, false, nil
}

func (m *memSentLog) MarkSent(_ context.Context, key, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.sent[key]; e.token == token {
		e.done = true
		m.sent[key] = e
	}
	return nil
}

func (m *memSentLog) Release(_ context.Context, key, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.sent[key]; e.token == token {
		delete(m.sent, key)
	}
	return nil
}

// countingMailer counts the emails the handler sends: its runs.
type countingMailer struct{ sends atomic.Int64 }

func (c *countingMailer) Send(context.Context, notifications.Email) error {
	c.sends.Add(1)
	return nil
}

// deliveryEvents seals n order.placed events (schema 2) of one tenant.
func deliveryEvents(n int, tenant string) ([]envelope.Envelope, error) {
	evs := make([]envelope.Envelope, n)
	prev := chain.Genesis(tenant)
	for i := range evs {
		id, err := envelope.NewID()
		if err != nil {
			return nil, err
		}
		p, err := envelope.NormalizePayload(orders.PlacedV2{
			OrderID: fmt.Sprintf("o-%06d", i), CustomerEmail: "zoe.mueller@example.com",
			Items: []orders.Item{{SKU: "SKU-1001", Qty: 2}, {SKU: "SKU-2002", Qty: 1}}, TotalCents: 28923, Currency: "EUR",
		})
		if err != nil {
			return nil, err
		}
		evs[i] = envelope.Envelope{ID: id, Type: orders.TypePlaced, TenantID: tenant,
			OccurredAt: envelope.FormatTime(time.Now()), SchemaVersion: 2, Payload: p, Seq: int64(i + 1), PrevHash: prev}
		if err := chain.Seal(&evs[i]); err != nil {
			return nil, err
		}
		prev = evs[i].Hash
	}
	return evs, nil
}

func benchDelivery(ctx context.Context, env *benchEnv, o options) (section, error) {
	sec := section{title: "4. Durable delivery: DynamoDB writes per (event, subscription)"}
	if err := env.requireDB(); err != nil {
		return sec, err
	}
	state, drop, err := createTable(ctx, env.db, delivery.StateTableSchema(uniqueName("state")))
	if err != nil {
		return sec, err
	}
	defer drop()
	cat, err := example.Catalog()
	if err != nil {
		return sec, err
	}
	quiet, noMetrics := slog.New(slog.NewTextHandler(io.Discard, nil)), obs.NewMetrics(io.Discard)
	mailer := &countingMailer{}
	reg, err := catalog.NewRegistry(cat, notifications.Module.Bind(&notifications.Notifier{
		Mailer: mailer, Sent: &memSentLog{sent: map[string]sentEntry{}}, Logger: quiet,
	}))
	if err != nil {
		return sec, err
	}
	subs := len(reg.Route(orders.TypePlaced, catalog.Durable).Bound)
	if subs == 0 {
		return sec, fmt.Errorf("no DURABLE subscription bound for %s", orders.TypePlaced)
	}
	db := &countingDB{Client: env.db}
	plain, err := delivery.New(reg, delivery.Config{Store: delivery.NewDynamoStore(db, state), Logger: quiet, Metrics: noMetrics})
	if err != nil {
		return sec, err
	}
	batchedStore, err := delivery.NewBatchedStore(delivery.NewDynamoStore(db, state))
	if err != nil {
		return sec, err
	}
	batched, err := delivery.New(reg, delivery.Config{Store: batchedStore, Logger: quiet, Metrics: noMetrics})
	if err != nil {
		return sec, err
	}

	const batchSize = 10 // an SQS FIFO batch
	n := 60
	if o.reconcileN < 100 {
		n = 10
	}
	perMessage, err := deliveryEvents(n, "tenant-deliver-a")
	if err != nil {
		return sec, err
	}
	perBatch, err := deliveryEvents(n, "tenant-deliver-b")
	if err != nil {
		return sec, err
	}

	// run delivers evs in batches of batchSize (Prefetch first when
	// prefetch) and returns the counters' change and the outcomes.
	run := func(d *delivery.Deliverer, evs []envelope.Envelope, prefetch bool) (counters, map[delivery.Outcome]int, int64, error) {
		c0, r0 := db.snapshot(), mailer.sends.Load()
		outcomes := map[delivery.Outcome]int{}
		for i := 0; i < len(evs); i += batchSize {
			batch := evs[i:min(i+batchSize, len(evs))]
			var pre *delivery.Prefetched
			if prefetch {
				var err error
				if pre, _, err = d.Prefetch(ctx, batch); err != nil {
					return counters{}, nil, 0, err
				}
			}
			for _, e := range batch {
				res, err := d.DeliverWith(ctx, e, pre)
				if err != nil {
					return counters{}, nil, 0, err
				}
				for _, s := range res.Subscriptions {
					outcomes[s.Outcome]++
				}
			}
		}
		c1 := db.snapshot()
		return diff(c1, c0), outcomes, mailer.sends.Load() - r0, nil
	}

	t := &table{head: []string{"scenario", "(event, subscription) pairs", "handler runs", "writes / pair",
		"refused conditional writes / pair", "read requests", "items read / pair", "outcomes"}}
	var common float64
	for _, sc := range []struct {
		name     string
		d        *delivery.Deliverer
		evs      []envelope.Envelope
		prefetch bool
		common   bool
	}{
		{"first delivery, message by message (`Deliver`)", plain, perMessage, false, true},
		{"first delivery, batches of 10 (`Prefetch` + `Deliver`, as durable-consumer does)", batched, perBatch, true, true},
		{"redelivery of completed events, message by message", plain, perMessage, false, false},
		{"redelivery of completed events, batches of 10 with `Prefetch`", batched, perBatch, true, false},
	} {
		c, outcomes, runs, err := run(sc.d, sc.evs, sc.prefetch)
		if err != nil {
			return sec, fmt.Errorf("%s: %w", sc.name, err)
		}
		pairs := float64(len(sc.evs) * subs)
		writes := float64(c.writes()) / pairs
		if sc.common {
			common = max(common, writes)
		}
		reads := float64(c.getItems+c.batchGetItems+c.queryItems) / pairs
		var oc []string
		for _, k := range []delivery.Outcome{delivery.Completed, delivery.AlreadyCompleted, delivery.Pending,
			delivery.DeadLettered, delivery.AlreadyDead, delivery.Failed} {
			if outcomes[k] > 0 {
				oc = append(oc, fmt.Sprintf("%s %d", k, outcomes[k]))
			}
		}
		t.add(sc.name, f0(pairs), fmt.Sprint(runs), f2(writes), f2(float64(c.refused)/pairs),
			fmt.Sprintf("%d GetItem, %d BatchGetItem, %d Query", c.gets, c.batchGets, c.queries), f2(reads), strings.Join(oc, ", "))
	}

	sec.para("`pkg/delivery` over the state table in the local DynamoDB, through a wrapper that counts what its DynamoDB "+
		"client sends. %d `order.placed` events of one tenant, delivered to the example application's DURABLE "+
		"subscriptions (%d per event: notifications.order-email), bound as durable-consumer binds them but with an "+
		"in-memory sent log, so only delivery's own DynamoDB traffic is counted; every handler succeeds. "+
		"*Writes* are item writes that succeeded (UpdateItem, PutItem, DeleteItem, items in BatchWriteItem and in "+
		"TransactWriteItems); *refused conditional writes* failed their condition (AWS bills them as writes); "+
		"*items read* are items returned (GetItem, BatchGetItem, Query).", n, subs)
	sec.table(t)
	sec.para("Target (issue 7): at most 2 DynamoDB writes per (event, subscription) in the common path (first "+
		"delivery, handler succeeds): %.2f — %s.", common, verdict(common <= 2))
	return sec, nil
}

// diff is a − b, counter by counter.
func diff(a, b counters) counters {
	return counters{
		transactOK: a.transactOK - b.transactOK, transactFail: a.transactFail - b.transactFail,
		transactItems: a.transactItems - b.transactItems, conditionChecks: a.conditionChecks - b.conditionChecks,
		puts: a.puts - b.puts, updates: a.updates - b.updates, deletes: a.deletes - b.deletes,
		batchWrites: a.batchWrites - b.batchWrites, refused: a.refused - b.refused,
		modelWCU: a.modelWCU - b.modelWCU, localWCU: a.localWCU - b.localWCU,
		gets: a.gets - b.gets, getItems: a.getItems - b.getItems, queries: a.queries - b.queries, queryItems: a.queryItems - b.queryItems,
		scans: a.scans - b.scans, scanItems: a.scanItems - b.scanItems,
		batchGets: a.batchGets - b.batchGets, batchGetItems: a.batchGetItems - b.batchGetItems,
	}
}
