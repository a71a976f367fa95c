package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/pkg/tenancy/tenancytest"
)

// A tenant with chain shards: every event lands on the chain its shard key
// hashes to, each chain is gap-free and verifies on its own, one key's events
// keep their order on one chain, and a tenant without shards is untouched.
func TestShardedTenantSplitsByShardKey(t *testing.T) {
	const shards = 4
	f := newFixture(t, func(c *eventstore.Config) { c.Shards = map[string]int{"hot": shards} })
	ctx := ctxFor("hot")

	// Each writer emits for its own two orders, one after another, so an
	// order's emits happen in a known order, and writers race on the chains.
	const writers, per = 6, 10
	var mu sync.Mutex
	byKey := map[string][]envelope.Envelope{}
	var wg sync.WaitGroup
	errs := make(chan error, writers*per)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				key := fmt.Sprintf("order-%d-%d", w, i%2)
				e, err := f.store.EmitWith(ctx, eventstore.EmitInput{Type: "order.placed", Payload: map[string]any{"order_id": key}, ShardKey: key})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				byKey[key] = append(byKey[key], e)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	perChain := map[string]int64{}
	for key, evs := range byKey {
		want := tenancy.Chain("hot", tenancy.ShardOf(key, shards))
		for i, e := range evs {
			if e.TenantID != want {
				t.Fatalf("key %s: event %s on chain %q, want %q", key, e.ID, e.TenantID, want)
			}
			if i > 0 && e.Seq <= evs[i-1].Seq {
				t.Errorf("key %s: seq %d after %d: one key's events out of order on its chain", key, e.Seq, evs[i-1].Seq)
			}
		}
		perChain[want] += int64(len(evs))
	}
	if len(perChain) < 2 {
		t.Fatalf("%d keys used %d chain(s); want them spread over several of %d", len(byKey), len(perChain), shards)
	}
	var total int64
	for c, n := range perChain {
		f.verify(t, c, n) // gap-free, head at n, chain.Verify with the chain's genesis
		total += n
	}
	if total != writers*per {
		t.Fatalf("%d events on the chains, want %d", total, writers*per)
	}

	// Every chain with events is listed like a tenant (reconcile's sweep walks them all).
	listed, _, err := f.store.Tenants(context.Background(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for c := range perChain {
		if !strings.Contains(" "+strings.Join(listed, " ")+" ", " "+c+" ") {
			t.Errorf("Tenants() = %v, missing chain %q", listed, c)
		}
	}

	// A tenant with one chain ignores a shard key.
	e, err := f.store.EmitWith(ctxFor("cold"), eventstore.EmitInput{Type: "order.placed", Payload: map[string]any{}, ShardKey: "order-1"})
	if err != nil || e.TenantID != "cold" {
		t.Fatalf("cold tenant: got chain %q, %v; want cold", e.TenantID, err)
	}
}

// Emit for a sharded tenant without a shard key is refused by name and
// writes nothing.
func TestShardedTenantNeedsShardKey(t *testing.T) {
	f := newFixture(t, func(c *eventstore.Config) { c.Shards = map[string]int{"hot": 3} })
	_, err := f.store.Emit(ctxFor("hot"), "order.placed", map[string]any{})
	if !errors.Is(err, eventstore.ErrNoShardKey) || !strings.Contains(err.Error(), "EmitInput.ShardKey") {
		t.Fatalf("got %v, want ErrNoShardKey naming EmitInput.ShardKey", err)
	}
	for k := range 3 {
		h, err := f.store.Head(context.Background(), tenancy.Chain("hot", k))
		if err != nil || h != nil {
			t.Fatalf("chain %d: head %+v, %v; want none (nothing written)", k, h, err)
		}
	}
}

// An idempotency key is kept on the event's chain: a retry with the same
// shard key returns the first event and writes nothing.
func TestShardedTenantIdempotencyKey(t *testing.T) {
	f := newFixture(t, func(c *eventstore.Config) { c.Shards = map[string]int{"hot": 8} })
	in := eventstore.EmitInput{Type: "order.placed", Payload: map[string]any{"n": 1}, ShardKey: "order-7", IdempotencyKey: "req-1"}
	first, err := f.store.EmitWith(ctxFor("hot"), in)
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.store.EmitWith(ctxFor("hot"), in)
	if err != nil || again.ID != first.ID {
		t.Fatalf("retry: got %s, %v; want the first event %s", again.ID, err, first.ID)
	}
	f.verify(t, first.TenantID, 1)
}

func TestShardsConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		shards map[string]int
		want   string
	}{
		{map[string]int{"acme": 1}, "use 2 to 32"},
		{map[string]int{"acme": 33}, "use 2 to 32"},
		{map[string]int{"acme~2": 4}, "reserved for a chain shard"},
		{map[string]int{"": 4}, "is empty"},
	} {
		_, err := eventstore.New(nil, eventstore.Config{Table: "events", Catalog: catalog, Shards: tc.shards})
		if err == nil || !strings.Contains(err.Error(), "Config.Shards") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Shards %v: got %v, want an error naming Config.Shards and %q", tc.shards, err, tc.want)
		}
	}
}

// Emitters that disagree on a tenant's shard count would send one key's
// events to different chains and lose their order. Each head records the
// count it was written with; an emitter configured with fewer (one that was
// not given Config.Shards, or a lowered count) refuses, naming both counts,
// and writes nothing. A larger count is a growth and is taken, after which
// the smaller is refused.
func TestShardCountDisagreementRefused(t *testing.T) {
	f := newFixture(t, func(c *eventstore.Config) { c.Shards = map[string]int{"hot": 4} })
	withShards := func(n int) *eventstore.Store {
		cfg := eventstore.Config{Table: f.table, Catalog: catalog}
		if n > 1 {
			cfg.Shards = map[string]int{"hot": n}
		}
		return mustStore(t, f.db, cfg)
	}
	emit := func(s *eventstore.Store, shards int) error {
		_, err := s.EmitWith(ctxFor("hot"), eventstore.EmitInput{Type: "order.placed", Payload: map[string]any{},
			ShardKey: tenancytest.KeyFor(0, max(shards, 1))}) // the tenant's own chain, "hot"
		return err
	}
	refused := func(err error, configured, recorded int) {
		t.Helper()
		var sc *eventstore.ShardCountError
		if !errors.As(err, &sc) || !errors.Is(err, eventstore.ErrShardCount) {
			t.Fatalf("got %v, want a *ShardCountError", err)
		}
		if *sc != (eventstore.ShardCountError{Tenant: "hot", Chain: "hot", Configured: configured, Recorded: recorded}) {
			t.Errorf("got %+v, want tenant hot, chain hot, configured %d, recorded %d", *sc, configured, recorded)
		}
		for _, want := range []string{"Config.Shards", "ChainShards", "nothing was written", fmt.Sprintf("configured with %d chain shards", recorded)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("message %q does not say %q", err, want)
			}
		}
	}

	if err := emit(f.store, 4); err != nil {
		t.Fatal(err)
	}
	refused(emit(withShards(1), 1), 1, 4) // not given the application's ChainShards
	refused(emit(withShards(2), 2), 2, 4) // a lowered count
	f.verify(t, "hot", 1)                 // nothing written by either

	// A tenant the stores agree on is untouched.
	if _, err := withShards(1).Emit(ctxFor("cold"), "order.placed", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	// Growing the count is taken; the emitter left at the old count is then refused.
	if err := emit(withShards(8), 8); err != nil {
		t.Fatal(err)
	}
	refused(emit(f.store, 4), 4, 8)
	f.verify(t, "hot", 2)
}

// The count is checked on the head an emitter is about to write, however it
// learnt it: here an emitter without shards read the head before a sharded
// emitter moved it, so its transaction loses the race, and the head that won
// (returned with the failed condition) carries the larger count. It refuses
// then, without another attempt, instead of re-sealing on that head.
func TestShardCountCaughtOnTheHeadThatWon(t *testing.T) {
	f := newFixture(t, func(c *eventstore.Config) { c.Shards = map[string]int{"hot": 4} })
	plain := eventstore.Config{Table: f.table, Catalog: catalog}
	if _, err := mustStore(t, f.db, plain).Emit(ctxFor("hot"), "order.placed", map[string]any{}); err != nil {
		t.Fatal(err) // the tenant's chain, written with one chain
	}
	var once sync.Once
	racing := &racingDB{DynamoDB: f.db, before: func() {
		once.Do(func() {
			if _, err := f.store.EmitWith(ctxFor("hot"), eventstore.EmitInput{Type: "order.placed", Payload: map[string]any{},
				ShardKey: tenancytest.KeyFor(0, 4)}); err != nil {
				t.Error(err)
			}
		})
	}}
	late := mustStore(t, racing, plain)
	_, err := late.Emit(ctxFor("hot"), "order.placed", map[string]any{})
	var sc *eventstore.ShardCountError
	if !errors.As(err, &sc) || sc.Recorded != 4 || sc.Configured != 1 {
		t.Fatalf("got %v, want a *ShardCountError recording 4", err)
	}
	if st := late.Stats(); st.Attempts != 1 {
		t.Errorf("the refused emitter made %d attempts, want 1 (refused on the head that won, never re-sealed)", st.Attempts)
	}
	f.verify(t, "hot", 2) // its own first event and the sharded emitter's; nothing of the refused one
}

// A head whose recorded count is not a count was not written by the event
// store: the emitter refuses to write on it, naming the chain and the
// attribute, instead of guessing.
func TestShardCountUnreadableRefused(t *testing.T) {
	f := newFixture(t, nil)
	if _, err := f.store.Emit(ctxFor("acme"), "order.placed", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	key := map[string]types.AttributeValue{
		keys.AttrTenant: &types.AttributeValueMemberS{Value: "acme"},
		keys.AttrSeq:    &types.AttributeValueMemberN{Value: "0"},
	}
	got, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	got.Item[keys.AttrShards] = &types.AttributeValueMemberS{Value: "four"}
	if _, err := f.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: got.Item}); err != nil {
		t.Fatal(err)
	}
	_, err = f.store.Emit(ctxFor("acme"), "order.placed", map[string]any{})
	if err == nil || !strings.Contains(err.Error(), `chain "acme"`) || !strings.Contains(err.Error(), keys.AttrShards) {
		t.Fatalf("got %v, want an error naming chain acme and %s", err, keys.AttrShards)
	}
	f.verify(t, "acme", 1)
}
