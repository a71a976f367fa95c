package eventstore_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/pkg/tenancy/tenancytest"
)

// emitOn writes one event on each of shards' chains of a tenant split into
// tenancy.MaxShards chains.
func emitOn(t *testing.T, s *eventstore.Store, tenant string, shards ...int) {
	t.Helper()
	for _, k := range shards {
		e, err := s.EmitWith(ctxFor(tenant), eventstore.EmitInput{Type: "order.placed", Payload: map[string]any{}, ShardKey: tenancytest.KeyFor(k, tenancy.MaxShards)})
		if err != nil {
			t.Fatal(err)
		}
		if want := tenancy.Chain(tenant, k); e.TenantID != want {
			t.Fatalf("event on chain %q, want %q", e.TenantID, want)
		}
	}
}

func TestChains(t *testing.T) {
	f := newFixture(t, func(c *eventstore.Config) {
		c.Shards = map[string]int{"hot": tenancy.MaxShards, "nozero": tenancy.MaxShards}
	})
	// Written out of shard order, twice on one chain: listed once each, in shard order.
	emitOn(t, f.store, "hot", 17, 0, 3, 17)
	emitOn(t, f.store, "nozero", 31, 2)
	if _, err := f.store.Emit(ctxFor("cold"), "order.placed", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	// A tenant whose name is a prefix of another's is not mixed up with it.
	if _, err := f.store.Emit(ctxFor("ho"), "order.placed", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	// A store opened without Config.Shards (an operator tool) sees the same.
	reader, err := eventstore.New(f.db, eventstore.Config{Table: f.table})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tenant string
		want   []string
	}{
		{"hot", []string{"hot", "hot~3", "hot~17"}},
		{"nozero", []string{"nozero~2", "nozero~31"}}, // shard 0 has no head: not listed
		{"cold", []string{"cold"}},
		{"ho", []string{"ho"}},
		{"none", nil},
	} {
		got, err := reader.Chains(context.Background(), tc.tenant)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Chains(%q) = %q, want %q", tc.tenant, got, tc.want)
		}
	}
	// ChainsOf: a tenant id stands for its own chain, head row or not, then
	// its shards'; a shard's name for itself alone.
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"hot", []string{"hot", "hot~3", "hot~17"}},
		{"nozero", []string{"nozero", "nozero~2", "nozero~31"}},
		{"none", []string{"none"}},
		{"hot~3", []string{"hot~3"}},
		{"hot~5", []string{"hot~5"}}, // named, so walked (and found empty) even without a head
	} {
		got, err := reader.ChainsOf(context.Background(), tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("ChainsOf(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// unprocessedDB answers the first BatchGetItem for half of its keys only and
// returns the rest as UnprocessedKeys, as DynamoDB does when the read budget
// runs out; with always, every call answers one key only (a budget that
// stays short).
type unprocessedDB struct {
	eventstore.DynamoDB
	always bool
	calls  atomic.Int32
}

func (u *unprocessedDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if u.calls.Add(1) > 1 && !u.always {
		return u.DynamoDB.BatchGetItem(ctx, in, opts...)
	}
	first := map[string]types.KeysAndAttributes{}
	left := map[string]types.KeysAndAttributes{}
	for table, ka := range in.RequestItems {
		half := len(ka.Keys) / 2
		if u.always {
			half = 1
		}
		a, b := ka, ka
		a.Keys, b.Keys = ka.Keys[:half], ka.Keys[half:]
		first[table], left[table] = a, b
	}
	out, err := u.DynamoDB.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: first}, opts...)
	if err != nil {
		return nil, err
	}
	out.UnprocessedKeys = left
	return out, nil
}

func TestChainsRetriesUnprocessedKeys(t *testing.T) {
	f := newFixture(t, func(c *eventstore.Config) { c.Shards = map[string]int{"hot": tenancy.MaxShards} })
	emitOn(t, f.store, "hot", 1, 30) // one key in each half of the request
	db := &unprocessedDB{DynamoDB: f.db}
	s, err := eventstore.New(db, eventstore.Config{Table: f.table})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Chains(context.Background(), "hot")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"hot~1", "hot~30"}; !slices.Equal(got, want) {
		t.Fatalf("Chains = %q, want %q", got, want)
	}
	if n := db.calls.Load(); n != 2 {
		t.Fatalf("%d BatchGetItem calls, want 2 (the unprocessed keys asked again)", n)
	}
}

// A read budget that stays short (one key answered per call, 32 asked):
// Chains gives up after its bounded number of calls with an error that says what is left and to retry, never a
// partial list of chains (which reconcile would take for the whole tenant).
func TestChainsUnprocessedKeysGiveUpLoudly(t *testing.T) {
	f := newFixture(t, func(c *eventstore.Config) { c.Shards = map[string]int{"hot": tenancy.MaxShards} })
	emitOn(t, f.store, "hot", 1, 30)
	db := &unprocessedDB{DynamoDB: f.db, always: true}
	s, err := eventstore.New(db, eventstore.Config{Table: f.table})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Chains(context.Background(), "hot")
	if err == nil || !strings.Contains(err.Error(), "still unprocessed") || !strings.Contains(err.Error(), "retry later") {
		t.Fatalf("Chains = %q, %v; want an error saying keys are still unprocessed", got, err)
	}
	if n := db.calls.Load(); n != 8 {
		t.Errorf("%d BatchGetItem calls, want 8 (the bound)", n)
	}
}
