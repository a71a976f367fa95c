package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

func TestMain(m *testing.M) { localaws.Main(m) }

// testCatalog declares a few types and accepts any object payload for them.
type testCatalog map[string]bool

func (c testCatalog) Prepare(t string, payload any) (int, map[string]any, error) {
	if !c[t] {
		return 0, nil, fmt.Errorf("event type %q is not declared", t)
	}
	p, err := envelope.NormalizePayload(payload)
	return 1, p, err
}

var catalog = testCatalog{"order.placed": true, "order.paid": true}

type fixture struct {
	db     *dynamodb.Client
	table  string
	orders string
	store  *eventstore.Store
}

func newFixture(t *testing.T, mut func(*eventstore.Config)) *fixture {
	t.Helper()
	db := localaws.DynamoDB(t)
	f := &fixture{db: db, table: localaws.UniqueName(t, "events"), orders: localaws.UniqueName(t, "orders")}
	localaws.CreateTable(t, db, eventstore.TableSchema(f.table))
	localaws.CreateTable(t, db, &dynamodb.CreateTableInput{
		TableName:            aws.String(f.orders),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	cfg := eventstore.Config{Table: f.table, Catalog: catalog}
	if mut != nil {
		mut(&cfg)
	}
	s, err := eventstore.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.store = s
	return f
}

func ctxFor(tenant string) context.Context {
	return tenancy.MustWithTenant(context.Background(), tenant)
}

func (f *fixture) verify(t *testing.T, tenant string, wantLast int64) {
	t.Helper()
	ctx := context.Background()
	evs, err := f.store.AllEvents(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	head, err := f.store.Head(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(evs)) != wantLast {
		t.Fatalf("tenant %s: got %d events, want %d", tenant, len(evs), wantLast)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("tenant %s: event %d has seq %d: gap or duplicate", tenant, i, e.Seq)
		}
	}
	if head == nil || head.LastSeq != wantLast {
		t.Fatalf("tenant %s: head %+v, want last_seq %d", tenant, head, wantLast)
	}
	if err := chain.Verify(tenant, evs, head); err != nil {
		t.Fatalf("tenant %s: %v", tenant, err)
	}
}

// emitConcurrently runs writers goroutines × per emits on each tenant at once.
func emitConcurrently(t *testing.T, s *eventstore.Store, tenants []string, writers, per int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(tenants)*writers*per)
	for _, tenant := range tenants {
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(tenant string, w int) {
				defer wg.Done()
				ctx := ctxFor(tenant)
				for i := 0; i < per; i++ {
					if _, err := s.Emit(ctx, "order.placed", map[string]any{"writer": w, "i": i}); err != nil {
						errs <- err
						return
					}
				}
			}(tenant, w)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("emit: %v", err)
	}
}

func TestConcurrentEmitsOneTenant(t *testing.T) {
	// The naive mode collapses under 32 writers on one head (its cost is in
	// make bench); its correctness is proven here at 8 × 25.
	for _, mode := range []struct {
		name          string
		batching      eventstore.Batching
		writers, each int
	}{{"group commit", eventstore.BatchPerTenant, 32, 50}, {"one transaction per event", eventstore.BatchNone, 8, 25}} {
		t.Run(mode.name, func(t *testing.T) {
			f := newFixture(t, func(c *eventstore.Config) {
				c.Batching = mode.batching
				c.MaxAttempts, c.MaxElapsed = 100000, 5*time.Minute
			})
			emitConcurrently(t, f.store, []string{"t1"}, mode.writers, mode.each)
			f.verify(t, "t1", int64(mode.writers*mode.each))
			st := f.store.Stats()
			t.Logf("%s: %d events in %d commits, %d attempts (%d failed), %.1f WCU",
				mode.name, st.Events, st.Commits, st.Attempts, st.FailedAttempts, st.WCU)
		})
	}
}

func TestConcurrentEmitsFourTenants(t *testing.T) {
	f := newFixture(t, func(c *eventstore.Config) { c.MaxAttempts, c.MaxElapsed = 100000, 5*time.Minute })
	tenants := []string{"t1", "t2", "t3", "t4"}
	emitConcurrently(t, f.store, tenants, 32, 50)
	for _, tn := range tenants {
		f.verify(t, tn, 1600)
	}
}

func TestCallerConditionFailsAloneAndWritesNothing(t *testing.T) {
	for _, mode := range []eventstore.Batching{eventstore.BatchPerTenant, eventstore.BatchNone} {
		t.Run(fmt.Sprint("batching=", mode), func(t *testing.T) {
			f := newFixture(t, func(c *eventstore.Config) { c.Batching = mode })
			ctx := ctxFor("t1")
			if _, err := f.store.Emit(ctx, "order.placed", map[string]any{"n": 1}); err != nil {
				t.Fatal(err)
			}
			put := func(id string, cond string) types.TransactWriteItem {
				p := &types.Put{TableName: aws.String(f.orders), Item: map[string]types.AttributeValue{
					"id": &types.AttributeValueMemberS{Value: id}}}
				if cond != "" {
					p.ConditionExpression = aws.String(cond)
				}
				return types.TransactWriteItem{Put: p}
			}
			// extra_writes[1] requires an item that does not exist.
			_, err := f.store.Emit(ctx, "order.paid", map[string]any{"n": 2},
				put("o-1", ""), put("o-2", "attribute_exists(id)"))
			var cw *eventstore.CallerWriteError
			if !errors.As(err, &cw) {
				t.Fatalf("got %v, want a *CallerWriteError", err)
			}
			if cw.Index != 1 || !cw.ConditionFailed() {
				t.Errorf("got index %d code %s, want extra_writes[1] ConditionalCheckFailed", cw.Index, cw.Code)
			}
			if want := "extra_writes[1] ConditionalCheckFailed"; !contains(err.Error(), want) {
				t.Errorf("message %q does not name %q", err, want)
			}
			// Nothing was written: no event 2, head still at 1, no caller write.
			head, _ := f.store.Head(context.Background(), "t1")
			if head.LastSeq != 1 {
				t.Errorf("head moved to %d after a refused emit", head.LastSeq)
			}
			for _, id := range []string{"o-1", "o-2"} {
				out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.orders),
					Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}}, ConsistentRead: aws.Bool(true)})
				if err != nil || out.Item != nil {
					t.Errorf("caller write %s exists after a refused emit (err %v)", id, err)
				}
			}
			// The next emit gets the next seq.
			e, err := f.store.Emit(ctx, "order.paid", map[string]any{"n": 3}, put("o-1", ""))
			if err != nil || e.Seq != 2 {
				t.Fatalf("next emit: seq %d, err %v; want seq 2", e.Seq, err)
			}
			f.verify(t, "t1", 2)
		})
	}
}

// TestGroupCommitIsolatesCallerFailures: under group commit, one caller's
// failing condition fails only that caller; the others commit.
func TestGroupCommitIsolatesCallerFailures(t *testing.T) {
	f := newFixture(t, nil)
	var wg sync.WaitGroup
	results := make([]error, 40)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cond := ""
			if i%4 == 0 {
				cond = "attribute_exists(id)" // fails: the order does not exist
			}
			p := &types.Put{TableName: aws.String(f.orders), Item: map[string]types.AttributeValue{
				"id": &types.AttributeValueMemberS{Value: fmt.Sprintf("o-%d", i)}}}
			if cond != "" {
				p.ConditionExpression = aws.String(cond)
			}
			_, results[i] = f.store.Emit(ctxFor("t1"), "order.placed", map[string]any{"i": i}, types.TransactWriteItem{Put: p})
		}(i)
	}
	wg.Wait()
	ok := 0
	for i, err := range results {
		var cw *eventstore.CallerWriteError
		switch {
		case i%4 == 0 && !errors.As(err, &cw):
			t.Errorf("caller %d: got %v, want its own CallerWriteError", i, err)
		case i%4 != 0 && err != nil:
			t.Errorf("caller %d: got %v, want success", i, err)
		case err == nil:
			ok++
		}
	}
	f.verify(t, "t1", int64(ok))
}

func TestEmitWithoutTenantWritesNothing(t *testing.T) {
	f := newFixture(t, nil)
	_, err := f.store.Emit(context.Background(), "order.placed", map[string]any{})
	if !errors.Is(err, tenancy.ErrNoTenant) {
		t.Fatalf("got %v, want ErrNoTenant", err)
	}
	out, err := f.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(f.table)})
	if err != nil || len(out.Items) != 0 {
		t.Fatalf("table has %d items after an emit without tenant (err %v)", len(out.Items), err)
	}
}

func TestEmitRefusesBadInputBeforeSending(t *testing.T) {
	f := newFixture(t, nil)
	ctx := ctxFor("t1")
	many := make([]types.TransactWriteItem, 99)
	for i := range many {
		many[i] = types.TransactWriteItem{Put: &types.Put{TableName: aws.String(f.orders),
			Item: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: fmt.Sprint(i)}}}}
	}
	blob := make([]byte, 350*1024)
	for i := range blob {
		blob[i] = 'x'
	}
	big := make([]types.TransactWriteItem, 12)
	for i := range big {
		big[i] = types.TransactWriteItem{Put: &types.Put{TableName: aws.String(f.orders),
			Item: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: fmt.Sprint(i)},
				"blob": &types.AttributeValueMemberS{Value: string(blob)}}}}
	}
	tests := []struct {
		name    string
		typ     string
		payload any
		extra   []types.TransactWriteItem
		want    error
	}{
		{"undeclared type", "order.refunded", map[string]any{}, nil, nil},
		{"bad type name", "Refunded", map[string]any{}, nil, envelope.ErrInvalid},
		{"number outside I-JSON", "order.placed", map[string]any{"n": uint64(1) << 60}, nil, envelope.ErrInvalid},
		{"too many actions", "order.placed", map[string]any{}, many, eventstore.ErrTooLarge},
		{"too many bytes", "order.placed", map[string]any{}, big, eventstore.ErrTooLarge},
		{"write with two actions", "order.placed", map[string]any{}, []types.TransactWriteItem{{
			Put:    many[0].Put,
			Delete: &types.Delete{TableName: aws.String(f.orders)},
		}}, eventstore.ErrBadWrite},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.store.Emit(ctx, tc.typ, tc.payload, tc.extra...)
			if err == nil {
				t.Fatal("got nil error")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			t.Log(err)
		})
	}
	if st := f.store.Stats(); st.Attempts != 0 {
		t.Errorf("%d transactions were sent for refused emits", st.Attempts)
	}
	out, _ := f.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(f.table)})
	if len(out.Items) != 0 {
		t.Errorf("events table has %d items", len(out.Items))
	}
}

// TestContentionBudgetExhausted forces contention on a real head: a tiny
// budget and a competing writer that always wins.
func TestContentionBudgetExhausted(t *testing.T) {
	f := newFixture(t, func(c *eventstore.Config) {
		c.Batching = eventstore.BatchNone
		c.MaxAttempts = 2
	})
	rival, err := eventstore.New(f.db, eventstore.Config{Table: f.table, Catalog: catalog, Batching: eventstore.BatchNone})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor("t1")
	if _, err := f.store.Emit(ctx, "order.placed", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	// The rival moves the head between our read and our write, every time.
	f.store = mustStore(t, &racingDB{DynamoDB: f.db, before: func() {
		if _, err := rival.Emit(ctx, "order.placed", map[string]any{"rival": true}); err != nil {
			t.Error(err)
		}
	}}, eventstore.Config{Table: f.table, Catalog: catalog, Batching: eventstore.BatchNone, MaxAttempts: 3})
	_, err = f.store.Emit(ctx, "order.paid", map[string]any{})
	var ce *eventstore.ContentionError
	if !errors.As(err, &ce) || !errors.Is(err, eventstore.ErrContention) {
		t.Fatalf("got %v, want a *ContentionError", err)
	}
	if ce.Tenant != "t1" || ce.Attempts != 3 || ce.Elapsed <= 0 {
		t.Errorf("got %+v, want tenant t1, 3 attempts, elapsed > 0", ce)
	}
	for _, want := range []string{`"t1"`, "3 attempts"} {
		if !contains(err.Error(), want) {
			t.Errorf("message %q does not say %s", err, want)
		}
	}
	f.verify(t, "t1", 4) // ours is absent; the rival's three are there
}

type racingDB struct {
	eventstore.DynamoDB
	before func()
}

func (r *racingDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	r.before()
	return r.DynamoDB.TransactWriteItems(ctx, in, o...)
}

func mustStore(t *testing.T, db eventstore.DynamoDB, cfg eventstore.Config) *eventstore.Store {
	t.Helper()
	s, err := eventstore.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStreamImageHashMatchesWrittenEnvelope reads the real stream of our local
// DynamoDB (twin/ddb) and recomputes each event's hash from the stream image.
func TestStreamImageHashMatchesWrittenEnvelope(t *testing.T) {
	f := newFixture(t, nil)
	ctx := tenancy.WithActor(tenancy.WithCorrelation(ctxFor("t1"), "req-1"), "user-9")
	var written []envelope.Envelope
	for i := 0; i < 3; i++ {
		e, err := f.store.Emit(ctx, "order.placed", map[string]any{"i": i, "price": 12.5, "tags": []string{"a", "é"}, "none": nil})
		if err != nil {
			t.Fatal(err)
		}
		written = append(written, e)
	}
	streams := localaws.DynamoDBStreams(t)
	desc, err := f.db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(f.table)})
	if err != nil {
		t.Fatal(err)
	}
	sd, err := streams.DescribeStream(context.Background(), &dynamodbstreams.DescribeStreamInput{StreamArn: desc.Table.LatestStreamArn})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]envelope.Envelope{}
	heads := 0
	deadline := time.Now().Add(10 * time.Second)
	for _, sh := range sd.StreamDescription.Shards {
		it, err := streams.GetShardIterator(context.Background(), &dynamodbstreams.GetShardIteratorInput{
			StreamArn: desc.Table.LatestStreamArn, ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		for iter != nil && len(got) < 3 && time.Now().Before(deadline) {
			out, err := streams.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range out.Records {
				item, err := envelope.ItemFromStreamsSDK(r.Dynamodb.NewImage)
				if err != nil {
					t.Fatal(err)
				}
				e, err := envelope.FromItem(item)
				if errors.Is(err, envelope.ErrNotEventRow) {
					heads++
					if _, ok := item[keys.AttrDedupID]; !ok {
						t.Errorf("head row on the stream is not stamped with %s", keys.AttrDedupID)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				got[e.ID] = e
			}
			iter = out.NextShardIterator
		}
	}
	for _, w := range written {
		e, ok := got[w.ID]
		if !ok {
			t.Fatalf("event %s (seq %d) not on the stream", w.ID, w.Seq)
		}
		h, err := chain.Hash(&e)
		if err != nil {
			t.Fatal(err)
		}
		if h != w.Hash || e.Hash != w.Hash {
			t.Errorf("seq %d: hash from stream image %s (stored %s), written %s", w.Seq, h, e.Hash, w.Hash)
		}
		if e.ActorID != "user-9" || e.CorrelationID != "req-1" || e.CausationID != "" {
			t.Errorf("seq %d: context fields %q %q %q", w.Seq, e.ActorID, e.CorrelationID, e.CausationID)
		}
	}
	if heads == 0 {
		t.Error("no head rows on the stream; they are written in every transaction")
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// countingDB counts head reads.
type countingDB struct {
	eventstore.DynamoDB
	gets atomic.Int64
}

func (c *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.gets.Add(1)
	return c.DynamoDB.GetItem(ctx, in, o...)
}

// TestGroupCommitLeaderSkipsHeadReads: a leader that commits batch after
// batch knows the head it wrote, so it reads the head far less often than it
// commits; and two processes (two stores) sharing one tenant, whose remembered
// heads go stale, still produce one gapless chain.
func TestGroupCommitLeaderSkipsHeadReads(t *testing.T) {
	f := newFixture(t, nil)
	cdb := &countingDB{DynamoDB: f.db}
	a := mustStore(t, cdb, eventstore.Config{Table: f.table, Catalog: catalog, MaxAttempts: 100000, MaxElapsed: 5 * time.Minute})
	emitConcurrently(t, a, []string{"t1"}, 32, 20)
	st := a.Stats()
	if gets := cdb.gets.Load(); gets >= st.Commits {
		t.Errorf("%d head reads for %d transactions: the leader should reuse the head it committed", gets, st.Commits)
	} else {
		t.Logf("%d head reads for %d transactions", gets, st.Commits)
	}
	f.verify(t, "t1", 640)

	b := mustStore(t, f.db, eventstore.Config{Table: f.table, Catalog: catalog, MaxAttempts: 100000, MaxElapsed: 5 * time.Minute})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for _, s := range []*eventstore.Store{a, b} {
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(s *eventstore.Store) {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					if _, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{"i": i}); err != nil {
						errs <- err
						return
					}
				}
			}(s)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("emit from two processes: %v", err)
	}
	f.verify(t, "t1", 640+320)
}

// TestIdleStoreCarriesTheHead: a store whose Emits come one at a time (a
// Lambda instance's) reads the head once, for its first Emit, and then seals
// every later one on the head it committed: one round trip per event.
func TestIdleStoreCarriesTheHead(t *testing.T) {
	f := newFixture(t, nil)
	cdb := &countingDB{DynamoDB: f.db}
	s := mustStore(t, cdb, eventstore.Config{Table: f.table, Catalog: catalog})
	for i := range 10 {
		if _, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	if gets := cdb.gets.Load(); gets != 1 {
		t.Errorf("%d head reads for 10 Emits one after another, want 1 (the first)", gets)
	}
	if st := s.Stats(); st.Attempts != 10 || st.FailedAttempts != 0 {
		t.Errorf("got %d attempts, %d failed, want 10 and 0", st.Attempts, st.FailedAttempts)
	}
	f.verify(t, "t1", 10)
}

// TestStaleHeadCostsOneLostAttempt: two stores taking turns on one tenant
// each find their remembered head moved by the other. The lost attempt's
// failed condition returns the head that won, so that Emit costs one lost
// attempt and no read, and it does not wait out a backoff window (a stale
// head is not contention). Having seen its remembered head go stale, a store
// reads the head before its next Emits instead of losing again.
func TestStaleHeadCostsOneLostAttempt(t *testing.T) {
	f := newFixture(t, nil)
	adb, bdb := &countingDB{DynamoDB: f.db}, &countingDB{DynamoDB: f.db}
	// A contention window of a minute: an Emit that waited one out would
	// sleep a random share of it (a whole minute at most), so the turns
	// below, a few round trips each, would take seconds, not milliseconds.
	cfg := eventstore.Config{Table: f.table, Catalog: catalog, BaseDelay: time.Minute, MaxDelay: time.Minute, MaxElapsed: time.Minute}
	a, b := mustStore(t, adb, cfg), mustStore(t, bdb, cfg)
	const turns = 5
	start := time.Now()
	defer func() {
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("the turns took %v: an Emit waited out a backoff window on a stale head", took)
		}
	}()
	for i := range turns {
		for _, s := range []*eventstore.Store{a, b} {
			// A store tells a stale head from a race in flight by its age:
			// older than half the round trip it measures. The other store's
			// turn is long over, as between two Lambdas; on a loaded machine
			// a turn can take less than half a slow round trip, so each
			// starts well after the last.
			time.Sleep(30 * time.Millisecond)
			if _, err := s.Emit(ctxFor("t1"), "order.placed", map[string]any{"i": i}); err != nil {
				t.Fatalf("turn %d: %v", i, err)
			}
		}
	}
	// Each store: its first Emit reads (no head known), its second seals on
	// the head it committed, finds it stale, loses once and commits on the
	// head the loss returned; its later ones read first.
	for name, x := range map[string]struct {
		c *countingDB
		s *eventstore.Store
	}{"a": {adb, a}, "b": {bdb, b}} {
		if gets := x.c.gets.Load(); gets != turns-1 {
			t.Errorf("store %s read the head %d times, want %d", name, gets, turns-1)
		}
		if st := x.s.Stats(); st.Attempts != turns+1 || st.FailedAttempts != 1 {
			t.Errorf("store %s: %d attempts, %d failed, want %d and 1", name, st.Attempts, st.FailedAttempts, turns+1)
		}
	}
	f.verify(t, "t1", 2*turns)
}
