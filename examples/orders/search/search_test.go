package search_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
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
	"github.com/fourlanes/fourlanes/pkg/projection"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestMain(m *testing.M) { localaws.Main(m) }

type rig struct {
	db         *dynamodb.Client
	stateTable string
	proj       *projection.Projector
	handle     func(context.Context, envelope.Envelope) error
}

// newRig binds search.Module over fresh search and state tables in our
// DynamoDB, the way the orders application binds it.
func newRig(t *testing.T) *rig {
	t.Helper()
	db := localaws.DynamoDB(t)
	create := func(schema func(string) *dynamodb.CreateTableInput, prefix string) string {
		return aws.ToString(localaws.CreateTable(t, db, schema(localaws.UniqueName(t, prefix))).TableName)
	}
	rg := &rig{db: db, stateTable: create(delivery.StateTableSchema, "state")}
	rg.proj = search.New(db, create(projection.TableSchema, "search"), rg.stateTable, quiet, obs.NewMetrics(io.Discard))
	if len(search.Module.Subscribes) != 1 {
		t.Fatalf("search declares %d subscriptions, want 1", len(search.Module.Subscribes))
	}
	h := search.Module.Subscribes[0].Handler
	rg.handle = func(ctx context.Context, e envelope.Envelope) error { return h(rg.proj, ctx, e) }
	return rg
}

func change(t *testing.T, id string, version int64, deleted bool) envelope.Envelope {
	t.Helper()
	c := catalog.ChangeV1{Entity: search.Entity, ID: id, Version: version}
	if !deleted {
		c.Item = map[string]any{"order_id": id, "status": fmt.Sprintf("v%d", version)}
	}
	p, err := envelope.NormalizePayload(c)
	if err != nil {
		t.Fatal(err)
	}
	return envelope.Envelope{ID: fmt.Sprintf("c-%s-%d-%v", id, version, deleted), Type: catalog.ChangeType(search.Entity, deleted),
		TenantID: "t1", SchemaVersion: 1, Payload: p}
}

func (rg *rig) state(t *testing.T, id string) string {
	t.Helper()
	d, ok, err := rg.proj.Store.Get(context.Background(), "t1", search.Entity, id)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case !ok:
		return "absent"
	case d.Deleted:
		return fmt.Sprintf("tombstone@%d", d.Version)
	}
	return fmt.Sprintf("%v@%d", d.Item["status"], d.Version)
}

// TestSearchConvergesOnShuffledRepeatedChanges: versions 1..N and the
// delete, each delivered twice in random order, end as the tombstone.
func TestSearchConvergesOnShuffledRepeatedChanges(t *testing.T) {
	rg := newRig(t)
	const n = 8
	var evs []envelope.Envelope
	for v := int64(1); v <= n; v++ {
		evs = append(evs, change(t, "o1", v, false), change(t, "o1", v, false), change(t, "o2", v, false))
	}
	evs = append(evs, change(t, "o1", n, true))
	rand.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	for _, e := range evs {
		if err := rg.handle(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := rg.state(t, "o1"), fmt.Sprintf("tombstone@%d", n); got != want {
		t.Errorf("o1: got %s, want %s", got, want)
	}
	if got, want := rg.state(t, "o2"), fmt.Sprintf("v%d@%d", n, n); got != want {
		t.Errorf("o2: got %s, want %s", got, want)
	}
}

func TestSearchRefusesAnotherEntity(t *testing.T) {
	rg := newRig(t)
	e := change(t, "o1", 1, false)
	e.Type = catalog.ChangeType("BOOK", false)
	if err := rg.handle(context.Background(), e); err == nil {
		t.Error("a BOOK change was accepted by the ORDER search")
	}
}

// TestRepairClosesAPermanentGap: dlq-repair re-reads the order at the lost
// version; the parked successors follow.
func TestRepairClosesAPermanentGap(t *testing.T) {
	rg := newRig(t)
	ctx := context.Background()
	for _, v := range []int64{1, 3, 4} { // version 2 was lost by the feed
		if err := rg.handle(ctx, change(t, "o3", v, false)); err != nil {
			t.Fatal(err)
		}
	}
	if got := rg.state(t, "o3"); got != "v1@1" {
		t.Fatalf("before repair: got %s, want v1@1", got)
	}
	if err := rg.proj.Repair(ctx, "t1", search.Entity, "o3", 2, map[string]any{"order_id": "o3", "status": "v2"}); err != nil {
		t.Fatal(err)
	}
	if got := rg.state(t, "o3"); got != "v4@4" {
		t.Errorf("after repair: got %s, want v4@4 (parked 3 and 4 applied)", got)
	}
}

func TestParksLiveInTheStateTable(t *testing.T) {
	rg := newRig(t)
	if err := rg.handle(context.Background(), change(t, "o4", 2, false)); err != nil {
		t.Fatal(err)
	}
	out, err := rg.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(rg.stateTable)})
	if err != nil || len(out.Items) != 1 {
		t.Fatalf("state table: %d items (%v), want the one park", len(out.Items), err)
	}
	it := out.Items[0]
	pk := it[keys.AttrPK].(*types.AttributeValueMemberS).Value
	sk := it[keys.AttrSK].(*types.AttributeValueMemberS).Value
	if want := "2:t1#5:ORDER#o4#00000000000000000002"; len(pk) < len("park#search#") || pk[:len("park#search#")] != "park#search#" || sk != want {
		t.Errorf("park key (%s, %s), want (park#search#<shard>, %s)", pk, sk, want)
	}
	if _, ok := it[keys.AttrExpiresAt]; !ok {
		t.Error("park has no TTL")
	}
}
