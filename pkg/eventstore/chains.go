package eventstore

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// chainsAttempts bounds the BatchGetItem calls of one Chains: DynamoDB
// returns UnprocessedKeys when the partition's read budget runs out, and a
// short backoff usually clears it.
const chainsAttempts = 8

// Chains returns the chains of tenant that have a head row, in shard order:
// tenant itself (shard 0) when it has one, then tenant~1 … tenant~31
// (tenancy.Chain). A tenant without chain shards gives [tenant], one
// without events none. It reads the tenancy.MaxShards possible head keys in
// one strongly consistent BatchGetItem (DynamoDB's limit is 100 keys), so
// it needs no knowledge of Config.Shards: an operator tool that opens the
// log without the emitters' config still sees every chain. It costs 32 read
// units (one per key, found or not; a head row is under 4 KB).
func (s *Store) Chains(ctx context.Context, tenant string) ([]string, error) {
	ks := make([]map[string]types.AttributeValue, tenancy.MaxShards)
	for k := range ks {
		ks[k] = map[string]types.AttributeValue{
			keys.AttrTenant: &types.AttributeValueMemberS{Value: tenancy.Chain(tenant, k)},
			keys.AttrSeq:    &types.AttributeValueMemberN{Value: strconv.Itoa(keys.HeadSeq)},
		}
	}
	pending := map[string]types.KeysAndAttributes{s.cfg.Table: {
		Keys:                     ks,
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#t"),
		ExpressionAttributeNames: map[string]string{"#t": keys.AttrTenant},
	}}
	var found []string
	delay := 10 * time.Millisecond
	for attempt := 1; ; attempt++ {
		out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: pending})
		if err != nil {
			return nil, fmt.Errorf("chains of tenant %q: %w", tenant, err)
		}
		for _, it := range out.Responses[s.cfg.Table] {
			if c, ok := it[keys.AttrTenant].(*types.AttributeValueMemberS); ok {
				found = append(found, c.Value)
			}
		}
		left, ok := out.UnprocessedKeys[s.cfg.Table]
		if !ok || len(left.Keys) == 0 {
			break
		}
		if attempt == chainsAttempts {
			return nil, fmt.Errorf("chains of tenant %q: %d head keys still unprocessed after %d BatchGetItem calls (the table's read capacity is exhausted); retry later",
				tenant, len(left.Keys), attempt)
		}
		pending = map[string]types.KeysAndAttributes{s.cfg.Table: left}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("chains of tenant %q: %w", tenant, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
	sort.Slice(found, func(i, j int) bool {
		_, a := tenancy.SplitChain(found[i])
		_, b := tenancy.SplitChain(found[j])
		return a < b
	})
	return found, nil
}

// ChainsOf returns the chains name stands for, for the tools that take a
// tenant or a chain (reconcile, export, watermarks): a chain shard's name
// stands for that chain alone; a tenant id for its own chain (listed first,
// head row or not) and then its shards' that have a head row (Chains).
func (s *Store) ChainsOf(ctx context.Context, name string) ([]string, error) {
	if _, k := tenancy.SplitChain(name); k > 0 {
		return []string{name}, nil
	}
	cs, err := s.Chains(ctx, name)
	if err != nil {
		return nil, err
	}
	out := []string{name}
	for _, c := range cs {
		if c != name {
			out = append(out, c)
		}
	}
	return out, nil
}
