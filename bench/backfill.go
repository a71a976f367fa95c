package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/changefeed"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/repair"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// benchBackfill measures what a backfill costs (issue 21): a subscription
// that went live after a tenant's history was written receives that
// history through repair's backfill, at a given rate, over the local
// DynamoDB; counted through the same wrapper as the delivery section.
func benchBackfill(ctx context.Context, env *benchEnv, o options) (section, error) {
	sec := section{title: "Backfill: what delivering a new subscription's history costs"}
	if err := env.requireDB(); err != nil {
		return sec, err
	}
	n := 10000
	if o.reconcileN < 100 {
		n = 500
	}
	events, dropE, err := createTable(ctx, env.db, eventstore.TableSchema(uniqueName("events")))
	if err != nil {
		return sec, err
	}
	defer dropE()
	state, dropS, err := createTable(ctx, env.db, delivery.StateTableSchema(uniqueName("state")))
	if err != nil {
		return sec, err
	}
	defer dropS()
	const tenant = "tenant-backfill"
	evs, err := deliveryEvents(n, tenant)
	if err != nil {
		return sec, err
	}
	// The history, written as the log holds it (outside the counters).
	for i := 0; i < len(evs); i += 25 {
		var reqs []types.WriteRequest
		for _, e := range evs[i:min(i+25, len(evs))] {
			it, err := e.ToItem()
			if err != nil {
				return sec, err
			}
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
		}
		if err := batchWrite(ctx, env.db, events, reqs); err != nil {
			return sec, err
		}
	}
	head := map[string]types.AttributeValue{keys.AttrTenant: avS(tenant), keys.AttrSeq: avN(keys.HeadSeq), keys.AttrKind: avS(keys.KindHead),
		keys.AttrLastSeq: avN(int64(n)), keys.AttrLastHash: avS(evs[n-1].Hash)}
	if _, err := env.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(events), Item: head}); err != nil {
		return sec, err
	}

	quiet, noMetrics := slog.New(slog.NewTextHandler(io.Discard, nil)), obs.NewMetrics(io.Discard)
	t := &table{head: []string{"events", "rate asked (events/s)", "took", "events/s", "handler runs", "writes / event",
		"reads / event", "WCU / event", "RCU / event"}}
	for _, rate := range []float64{float64(repair.MaxBackfillRate)} {
		db := &capacityDB{countingDB: &countingDB{Client: env.db}}
		h := &benchHandlers{}
		reg, err := benchRegistry(1, h)
		if err != nil {
			return sec, err
		}
		store := delivery.NewDynamoStore(db, state).WithLog(events)
		d, err := delivery.New(reg, delivery.Config{Store: store, Logger: quiet, Metrics: noMetrics})
		if err != nil {
			return sec, err
		}
		log, err := eventstore.New(db, eventstore.Config{Table: events})
		if err != nil {
			return sec, err
		}
		nowhere := "http://127.0.0.1:1" // backfill sends nothing to a queue or a stream
		r, err := repair.New(repair.Config{SQS: localaws.NewSQS(nowhere), Streams: localaws.NewDynamoDBStreams(nowhere), DB: db, Log: log,
			Deliverer: d, DeadLetters: store, Feed: &changefeed.Feed{}, Backfills: store, Subscriptions: reg, Cursors: store,
			DurableDLQ: nowhere, PipeDLQ: nowhere, ChangeFeedDLQ: nowhere, EventsTable: events, StateTable: state,
			Logger: quiet, Metrics: noMetrics, Budget: 30 * time.Minute})
		if err != nil {
			return sec, err
		}
		sub := reg.Catalog().Subscriptions()[0].Name
		c0 := db.snapshot()
		w0, r0 := db.units()
		begin := time.Now()
		rep, err := r.Handle(ctx, repair.Request{Backfill: &repair.BackfillRequest{Subscription: sub, Tenants: []string{tenant}, From: "1", Rate: rate}})
		took := time.Since(begin)
		if err != nil {
			return sec, err
		}
		if rep.Backfill == nil || !rep.Backfill.Done || rep.Backfill.Tenants[0].Delivered != n {
			return sec, fmt.Errorf("backfill at %v/s: %+v, want done with %d delivered", rate, rep.Backfill, n)
		}
		c := diff(db.snapshot(), c0)
		w1, r1 := db.units()
		ev := float64(n)
		t.add(strconv.Itoa(n), f0(rate), took.Round(10*time.Millisecond).String(), f0(ev/took.Seconds()), strconv.FormatInt(h.runs.Load(), 10),
			f2(float64(c.writes()+c.refused)/ev), f2(float64(c.gets+c.queries+c.batchGets)/ev), f2((w1-w0)/ev), f2((r1-r0)/ev))
	}
	sec.para("One tenant's %d events already in the log; a Deliverer made after them, so its one DURABLE subscription's start "+
		"(live) puts them all before it. `repair.Handle` with a backfill request from seq 1 delivers them to that subscription "+
		"alone at the asked rate, saving its position every second. *Writes* are billed write requests (the event's claim, "+
		"its completion, the saved positions, the watermark begun at the start, the subscription's start). "+
		"*Reads* are GetItem, BatchGetItem and Query requests: the log is read 100 events per Query, each claim write first reads "+
		"the event's claim item and the earlier layout's per-pair claim in one BatchGetItem, and resolving the start is a "+
		"binary search of GetItems. *WCU* and *RCU* are the capacity the server reported (Queries are not asked for it). "+
		"The rate is a ceiling: one invocation delivers one event after another, so below it the throughput is the "+
		"round trips of a claim and a completion on this machine.", n)
	sec.table(t)
	return sec, nil
}

// batchWrite writes reqs, again for what the server left unprocessed.
func batchWrite(ctx context.Context, db *dynamodb.Client, table string, reqs []types.WriteRequest) error {
	for len(reqs) > 0 {
		out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
		if err != nil {
			return fmt.Errorf("write the history: %w", err)
		}
		reqs = out.UnprocessedItems[table]
	}
	return nil
}
