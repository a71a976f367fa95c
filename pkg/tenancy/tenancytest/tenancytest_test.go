package tenancytest_test

import (
	"testing"

	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/pkg/tenancy/tenancytest"
)

func TestKeyFor(t *testing.T) {
	for _, shards := range []int{1, 2, 7, tenancy.MaxShards} {
		for shard := range shards {
			if k := tenancytest.KeyFor(shard, shards); tenancy.ShardOf(k, shards) != shard {
				t.Errorf("KeyFor(%d, %d) = %q, which goes to shard %d", shard, shards, k, tenancy.ShardOf(k, shards))
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("KeyFor(4, 4) did not panic")
		}
	}()
	tenancytest.KeyFor(4, 4)
}
