package delivery_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/lanes"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/obs/obstest"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

type reactedV1 struct {
	Order string `json:"order"`
}

// reactor's DURABLE handler writes its own row to the state table and emits
// chain.reacted in the same transaction; its LOCAL handler counts the
// follow-on events it sees in the process that emitted them.
type reactor struct {
	table   string
	failOne atomic.Bool // the next run fails after its emit
	runs    atomic.Int32
	local   sync.Map // event id → runs
}

var errAfterEmit = errors.New("handler failed after its emit")

func (r *reactor) onHappened(ctx context.Context, e envelope.Envelope) error {
	r.runs.Add(1)
	em, err := eventstore.EmitterFrom(ctx)
	if err != nil {
		return err
	}
	own := types.TransactWriteItem{Put: &types.Put{TableName: aws.String(r.table), Item: map[string]types.AttributeValue{
		keys.AttrPK: &types.AttributeValueMemberS{Value: "reactor#" + e.ID}, keys.AttrSK: &types.AttributeValueMemberS{Value: "state"},
	}}}
	if _, err := em.Emit(ctx, "chain.reacted", reactedV1{Order: e.ID}, own); err != nil {
		return err
	}
	if r.failOne.CompareAndSwap(true, false) {
		return errAfterEmit
	}
	return nil
}

func (r *reactor) onReacted(ctx context.Context, e envelope.Envelope) error {
	n, _ := r.local.LoadOrStore(e.ID, new(atomic.Int32))
	n.(*atomic.Int32).Add(1)
	return nil
}

var reactorModule = catalog.Module[*reactor]{
	Name: "chain",
	Emits: []catalog.EventType{
		{Name: "thing.happened", Versions: []catalog.Version{catalog.V[thingV1](1)}},
		{Name: "chain.reacted", Versions: []catalog.Version{catalog.V[reactedV1](1)}},
	},
	Subscribes: []catalog.Subscription[*reactor]{
		{Name: "chain.react", Types: "thing.happened", Lane: catalog.Durable, Reads: []int{1}, Handler: (*reactor).onHappened},
		{Name: "chain.watch", Types: "chain.reacted", Lane: catalog.Local, Reads: []int{1}, Handler: (*reactor).onReacted},
	},
}

// failComplete makes the next n completions fail: the delivery ends with
// the handler's work done and its claim pending, as if its process died.
type failComplete struct {
	delivery.Store
	n atomic.Int32
}

func (f *failComplete) Complete(ctx context.Context, k delivery.Key, token string, now, expiresAt time.Time) error {
	if f.n.Add(-1) >= 0 {
		return errors.New("process killed before the claim was completed")
	}
	return f.Store.Complete(ctx, k, token, now, expiresAt)
}

// TestFollowOnEmitsOnce: a DURABLE handler's follow-on event commits with
// its own state write, caused by the triggering event; a retry within the
// delivery and a takeover after the claim was never completed (the kill
// between the effect and the completion) run the handler again and append
// nothing; the follow-on's LOCAL subscriber ran in the emitting process,
// once; a deliverer without Config.Events gives the handler a loud error.
func TestFollowOnEmitsOnce(t *testing.T) {
	ctx := context.Background()
	db, state := stateTable(t)
	events := localaws.UniqueName(t, "events")
	localaws.CreateTable(t, db, eventstore.TableSchema(events))
	cat, err := catalog.New(reactorModule.Spec())
	if err != nil {
		t.Fatal(err)
	}
	r := &reactor{table: state}
	reg, err := catalog.NewRegistry(cat, reactorModule.Bind(r))
	if err != nil {
		t.Fatal(err)
	}
	logs := &obstest.Buffer{}
	lcfg := lanes.Config{Logger: obs.NewLogger(logs, "debug"), Metrics: obs.NewMetrics(&obstest.Buffer{})}
	inproc := lanes.NewInProcess(reg, lcfg)
	log, err := eventstore.New(db, eventstore.Config{Table: events, Catalog: cat, Dispatcher: inproc})
	if err != nil {
		t.Fatal(err)
	}
	claims := &failComplete{Store: delivery.NewDynamoStore(db, state)}
	now := &clock{t: time.Now()}
	d, err := delivery.New(reg, delivery.Config{Store: claims, Events: log, Logger: lcfg.Logger, Metrics: lcfg.Metrics,
		Backoff: time.Millisecond, Now: now.Now})
	if err != nil {
		t.Fatal(err)
	}

	trigger, err := log.Emit(tenancy.WithCorrelation(tenancy.MustWithTenant(ctx, "t1"), "corr-1"), "thing.happened", thingV1{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	// First delivery: the handler emits, fails, is retried (emits again,
	// nothing new), and then its completion is lost.
	r.failOne.Store(true)
	claims.n.Store(1)
	res, err := d.Deliver(ctx, trigger)
	if err == nil || !res.RetryLater() {
		t.Fatalf("first delivery: %s, %v; want its completion failed", outcomes(res), err)
	}
	if r.runs.Load() != 2 {
		t.Errorf("handler runs in the first delivery: %d, want 2 (one retry)", r.runs.Load())
	}
	// The redelivery after the lease: a takeover, the handler once more.
	now.Add(10 * time.Minute)
	if res, err := d.Deliver(ctx, trigger); err != nil || res.Subscriptions[0].Outcome != delivery.Completed {
		t.Fatalf("redelivery: %s, %v; want completed", outcomes(res), err)
	}
	if r.runs.Load() != 3 {
		t.Errorf("handler runs: %d, want 3", r.runs.Load())
	}
	if err := inproc.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	all, err := log.AllEvents(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 {
		t.Fatalf("log of t1: %d events, want 2 (the trigger and one follow-on)", len(all))
	}
	fo := all[1]
	if fo.Type != "chain.reacted" || fo.CausationID != trigger.ID || fo.CorrelationID != "corr-1" {
		t.Errorf("follow-on: type %s causation %q correlation %q; want chain.reacted caused by %s in corr-1", fo.Type, fo.CausationID, fo.CorrelationID, trigger.ID)
	}
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(state), ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{
		keys.AttrPK: &types.AttributeValueMemberS{Value: "reactor#" + trigger.ID}, keys.AttrSK: &types.AttributeValueMemberS{Value: "state"}}})
	if err != nil || got.Item == nil {
		t.Errorf("the handler's own write: %v, %v; want it committed with the follow-on", got.Item, err)
	}
	n, _ := r.local.Load(fo.ID)
	if n == nil || n.(*atomic.Int32).Load() != 1 {
		t.Errorf("the follow-on's LOCAL subscriber ran %v times, want once", n)
	}

	// Without Config.Events the handler is told how to get an emitter, and
	// the subscription is dead-lettered with that reason.
	bare, err := delivery.New(reg, delivery.Config{Store: delivery.NewDynamoStore(db, state), Logger: lcfg.Logger, Metrics: lcfg.Metrics, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	other, err := log.Emit(tenancy.MustWithTenant(ctx, "t1"), "thing.happened", thingV1{N: 2})
	if err != nil {
		t.Fatal(err)
	}
	res, err = bare.Deliver(ctx, other)
	if err != nil || res.Subscriptions[0].Outcome != delivery.DeadLettered || !errors.Is(res.Subscriptions[0].Err, eventstore.ErrNoEmitter) {
		t.Errorf("without Events: %s, %v (%v); want dead-lettered with ErrNoEmitter", outcomes(res), err, res.Subscriptions[0].Err)
	}
}
