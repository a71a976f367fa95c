package search_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/examples/orders/search"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestMain(m *testing.M) { localaws.Main(m) }

func table(t *testing.T, db *dynamodb.Client, schema func(string) *dynamodb.CreateTableInput, prefix string) string {
	t.Helper()
	return aws.ToString(localaws.CreateTable(t, db, schema(localaws.UniqueName(t, prefix))).TableName)
}

// stores runs f against the in-memory store and the DynamoDB store.
func stores(t *testing.T, f func(t *testing.T, newStore func(t *testing.T) search.Store)) {
	t.Run("memory", func(t *testing.T) { f(t, func(*testing.T) search.Store { return search.NewMemoryStore() }) })
	t.Run("dynamodb", func(t *testing.T) {
		f(t, func(t *testing.T) search.Store {
			db := localaws.DynamoDB(t)
			return &search.DynamoStore{DB: db, SearchTable: table(t, db, search.TableSchema, "search"), StateTable: table(t, db, delivery.StateTableSchema, "state")}
		})
	})
}

func change(t *testing.T, id string, version int64, deleted bool) envelope.Envelope {
	t.Helper()
	c := catalog.ChangeV1{Entity: "ORDER", ID: id, Version: version}
	if !deleted {
		c.Item = map[string]any{"order_id": id, "status": fmt.Sprintf("v%d", version)}
	}
	p, err := envelope.NormalizePayload(c)
	if err != nil {
		t.Fatal(err)
	}
	return envelope.Envelope{ID: fmt.Sprintf("c-%s-%d-%v", id, version, deleted), Type: catalog.ChangeType("ORDER", deleted),
		TenantID: "t1", SchemaVersion: 1, Payload: p}
}

func state(t *testing.T, st search.Store, id string) string {
	t.Helper()
	d, ok, err := st.Get(context.Background(), "t1", "ORDER", id)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return "absent"
	}
	if d.Deleted {
		return fmt.Sprintf("tombstone@%d", d.Version)
	}
	return fmt.Sprintf("%v@%d", d.Item["status"], d.Version)
}

func TestProjectionAppliesByVersion(t *testing.T) {
	type step struct {
		version int64
		deleted bool
		want    string
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"in order", []step{{1, false, "v1@1"}, {2, false, "v2@2"}, {3, false, "v3@3"}}},
		{"duplicate and old skipped", []step{{1, false, "v1@1"}, {2, false, "v2@2"}, {2, false, "v2@2"}, {1, false, "v2@2"}}},
		{"early one parked until the gap closes", []step{{1, false, "v1@1"}, {3, false, "v1@1"}, {4, false, "v1@1"}, {2, false, "v4@4"}}},
		{"first write late", []step{{2, false, "absent"}, {1, false, "v2@2"}}},
		{"tombstone blocks a late write", []step{{1, false, "v1@1"}, {2, true, "tombstone@2"}, {2, false, "tombstone@2"}, {1, false, "tombstone@2"}}},
		{"delete before its writes", []step{{3, true, "tombstone@3"}, {1, false, "tombstone@3"}, {3, false, "tombstone@3"}}},
		{"duplicate delete", []step{{1, false, "v1@1"}, {1, true, "tombstone@1"}, {1, true, "tombstone@1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stores(t, func(t *testing.T, newStore func(t *testing.T) search.Store) {
				st := newStore(t)
				p := &search.Projector{Store: st, Logger: quiet, Metrics: obs.NewMetrics(io.Discard)}
				for i, s := range tc.steps {
					if err := p.OnChange(context.Background(), change(t, "o1", s.version, s.deleted)); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if got := state(t, st, "o1"); got != s.want {
						t.Fatalf("after step %d (v%d deleted=%v): got %s, want %s", i, s.version, s.deleted, got, s.want)
					}
				}
			})
		})
	}
}

// TestProjectionConvergesUnderShuffledConcurrentDelivery: versions 1..N,
// each delivered twice, in random order, from several goroutines.
func TestProjectionConvergesUnderShuffledConcurrentDelivery(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) search.Store) {
		st := newStore(t)
		p := &search.Projector{Store: st, Logger: quiet, Metrics: obs.NewMetrics(io.Discard)}
		const n = 12
		var evs []envelope.Envelope
		for v := int64(1); v <= n; v++ {
			evs = append(evs, change(t, "o2", v, false), change(t, "o2", v, false))
		}
		rand.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
		var wg sync.WaitGroup
		ch := make(chan envelope.Envelope)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for e := range ch {
					if err := p.OnChange(context.Background(), e); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		for _, e := range evs {
			ch <- e
		}
		close(ch)
		wg.Wait()
		if got, want := state(t, st, "o2"), fmt.Sprintf("v%d@%d", n, n); got != want {
			t.Errorf("after shuffled delivery: got %s, want %s", got, want)
		}
	})
}

func TestRepairClosesAPermanentGap(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) search.Store) {
		st := newStore(t)
		p := &search.Projector{Store: st, Logger: quiet, Metrics: obs.NewMetrics(io.Discard)}
		ctx := context.Background()
		for _, v := range []int64{1, 3, 4} { // version 2 was lost by the feed
			if err := p.OnChange(ctx, change(t, "o3", v, false)); err != nil {
				t.Fatal(err)
			}
		}
		if got := state(t, st, "o3"); got != "v1@1" {
			t.Fatalf("before repair: got %s, want v1@1", got)
		}
		// Repair re-reads the order (at version 2) from its table.
		if err := p.Repair(ctx, "t1", "ORDER", "o3", 2, map[string]any{"order_id": "o3", "status": "v2"}); err != nil {
			t.Fatal(err)
		}
		if got := state(t, st, "o3"); got != "v4@4" {
			t.Errorf("after repair: got %s, want v4@4 (parked 3 and 4 applied)", got)
		}
	})
}

func TestParkedRowsLiveInTheStateTable(t *testing.T) {
	db := localaws.DynamoDB(t)
	state := table(t, db, delivery.StateTableSchema, "state")
	st := &search.DynamoStore{DB: db, SearchTable: table(t, db, search.TableSchema, "search"), StateTable: state}
	p := &search.Projector{Store: st, Logger: quiet, Metrics: obs.NewMetrics(io.Discard)}
	if err := p.OnChange(context.Background(), change(t, "o4", 2, false)); err != nil {
		t.Fatal(err)
	}
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(state), Key: map[string]types.AttributeValue{
		keys.AttrPK: &types.AttributeValueMemberS{Value: "park#search#2:t1#5:ORDER#o4"},
		keys.AttrSK: &types.AttributeValueMemberS{Value: "00000000000000000002"},
	}})
	if err != nil || out.Item == nil {
		t.Fatalf("parked row: %v, %v", out, err)
	}
	if _, ok := out.Item[keys.AttrExpiresAt]; !ok {
		t.Error("parked row has no TTL")
	}
	var c catalog.ChangeV1
	if err := json.Unmarshal([]byte(out.Item[keys.AttrChange].(*types.AttributeValueMemberS).Value), &c); err != nil || c.Version != 2 {
		t.Errorf("parked change: %+v, %v", c, err)
	}
}
