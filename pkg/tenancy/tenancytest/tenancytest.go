// Package tenancytest helps tests and benchmarks write to a chosen chain
// shard: a shard key is hashed (tenancy.ShardOf), so the key for a given
// shard has to be searched for.
package tenancytest

import (
	"fmt"
	"strconv"

	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// KeyFor returns a shard key that tenancy.ShardOf sends to shard among
// shards: "key-<n>" for the smallest such n. It panics for a shard outside
// 0 to shards−1, which no key reaches.
func KeyFor(shard, shards int) string {
	if shard < 0 || shard >= max(shards, 1) {
		panic(fmt.Sprintf("tenancytest.KeyFor: shard %d of %d", shard, shards))
	}
	for i := 0; ; i++ {
		if k := "key-" + strconv.Itoa(i); tenancy.ShardOf(k, shards) == shard {
			return k
		}
	}
}
