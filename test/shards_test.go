package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	example "github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// A tenant split into chain shards flows end to end through the twin: each
// shard's chain goes through the stream, the Pipe (its MessageGroupId is the
// chain's name) and the FIFO queue to the DURABLE subscriber, whose handler
// runs for the tenant (its log line names the tenant and the chain); reconcile
// finds each chain intact, and the tenant's chains together.
func TestShardedTenantEndToEnd(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	const tenant, shards = "hot", 4
	s := startStack(t, nil)
	ctx := context.Background()
	cat, err := example.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	store, err := eventstore.New(s.ddb, eventstore.Config{Table: s.env[keys.EnvEventsTable], Catalog: cat, Shards: map[string]int{tenant: shards}})
	if err != nil {
		t.Fatal(err)
	}
	tctx := tenancy.MustWithTenant(ctx, tenant)
	var emitted []envelope.Envelope
	perChain := map[string]int64{}
	for i := range 12 {
		order := fmt.Sprintf("o-hot-%02d", i)
		e, err := store.EmitWith(tctx, eventstore.EmitInput{Type: "order.placed", ShardKey: order, Payload: map[string]any{
			"order_id": order, "customer_email": "hot@example.com", "items": []any{map[string]any{"sku": "A-1", "qty": 1}},
			"total_cents": 100 + i, "currency": "EUR"}})
		if err != nil {
			t.Fatal(err)
		}
		emitted = append(emitted, e)
		perChain[e.TenantID]++
	}
	if len(perChain) < 2 {
		t.Fatalf("12 orders used chains %v; want several of %d", perChain, shards)
	}

	s.waitDelivered(t, emitted)
	s.checkEmailsOnce(t, emitted)
	for _, e := range emitted {
		lines := s.grep(s.fn[keys.FnDurableConsumer], emailKey(e))
		if len(lines) != 1 || !strings.Contains(lines[0], `"tenant":"hot"`) {
			t.Errorf("event %s on chain %s: email lines %q; want one, for tenant hot", e.ID, e.TenantID, lines)
			continue
		}
		if _, shard := tenancy.SplitChain(e.TenantID); shard > 0 && !strings.Contains(lines[0], `"chain":"`+e.TenantID+`"`) {
			t.Errorf("event %s: email line %q does not name its chain %s", e.ID, lines[0], e.TenantID)
		}
	}

	for chain, n := range perChain {
		r := s.reconcile(chain)
		if r.Tenant != chain || r.ChainIntact == nil || !*r.ChainIntact || r.LastSeq != n {
			t.Errorf("reconcile -tenant %s: got %+v, want the chain intact at last_seq %d", chain, r, n)
		}
	}
	all := s.reconcile(tenant)
	if all.Chains != len(perChain) || all.ChainsIntact == nil || !*all.ChainsIntact || len(all.BrokenChains) != 0 {
		t.Errorf("reconcile -tenant %s: %d chains, intact %v, broken %v; want %d chains, all intact", tenant, all.Chains, all.ChainsIntact, all.BrokenChains, len(perChain))
	}
	walked := map[string]int64{all.Tenant: all.LastSeq}
	for _, r := range all.Shards {
		walked[r.Tenant] = r.LastSeq
	}
	for chain, n := range perChain {
		if walked[chain] != n {
			t.Errorf("reconcile -tenant %s walked %v; want chain %s at last_seq %d", tenant, walked, chain, n)
		}
	}

	// Each chain's head records the tenant's shard count (what an emitter
	// given another count is refused by), and the notary, handed every
	// head's advance by its stream mapping, finds nothing in them.
	advances := int64(0)
	for chain, n := range perChain {
		advances += n - 1 // a head's first write is an INSERT, which the mapping's filter drops
		out, err := s.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.env[keys.EnvEventsTable]), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{
				keys.AttrTenant: &types.AttributeValueMemberS{Value: chain},
				keys.AttrSeq:    &types.AttributeValueMemberN{Value: "0"},
			}})
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := out.Item[keys.AttrShards].(*types.AttributeValueMemberN); !ok || n.Value != fmt.Sprint(shards) {
			t.Errorf("head of %s: %s = %v, want %d", chain, keys.AttrShards, out.Item[keys.AttrShards], shards)
		}
	}
	if advances == 0 {
		t.Fatalf("chains %v: no head advanced, so the notary would see no advance", perChain)
	}
	eventually(t, 60*time.Second, "the notary handled the sharded heads' advances", func() (bool, string) {
		st, _ := s.tw.Poller(s.notaryMap)
		return st.Delivered >= advances, fmt.Sprintf("notary mapping %+v, want at least %d delivered", st, advances)
	})
	if lines := s.grep(s.fn[keys.FnNotary], "notary finding"); len(lines) != 0 {
		t.Fatalf("honest sharded appends reported as findings:\n%s", strings.Join(lines, "\n"))
	}
}
