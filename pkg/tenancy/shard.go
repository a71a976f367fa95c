package tenancy

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Chain shards (DESIGN-NOTES.md, "Hot tenants"). A tenant's log is one hash chain by default.
// A tenant declared with S chain shards (eventstore.Config.Shards) has S
// chains: shard 0 is the chain named by the tenant id itself (so a tenant
// that becomes sharded keeps its chain), shard k ≥ 1 the chain named
// "<tenant>~<k>". Each chain is an ordinary chain of pkg/chain/SPEC.md (the
// envelope's tenant_id is the chain's name): its own head, partition key,
// FIFO message group, watermarks, checkpoints and reconcile walk. An event
// goes to the shard its shard key (an aggregate id, say) hashes to, so one
// aggregate's events stay in order on one chain; order across aggregates of
// the tenant is lost.
//
// The suffix "~<digits>" is reserved: the edge (CheckTenant, WithTenant)
// refuses a tenant id that ends with it, so no caller can bind a shard's
// chain as a tenant of its own, and TenantOf maps a chain back to its
// tenant without any configuration.
const (
	// MaxShards is the most chains one tenant's log can be split into. By
	// AWS's 1,000 WCU/s per partition key that is 32 × about 470 one-KB
	// events/s for one tenant; make bench measures this setting
	// (bench/RESULTS.md §1).
	MaxShards = 32
	// ShardSep separates a tenant id from a shard number in a chain's name.
	ShardSep = '~'
)

// Chain returns the name of shard's chain of tenant: the tenant id for shard
// 0, "<tenant>~<shard>" otherwise. It does not check its arguments (see
// CheckShards).
func Chain(tenant string, shard int) string {
	if shard == 0 {
		return tenant
	}
	return tenant + string(ShardSep) + strconv.Itoa(shard)
}

// SplitChain is the inverse of Chain: the tenant and shard a chain's name
// stands for. A name without a shard suffix (every tenant id the edge
// accepts) is shard 0 of the tenant of that name.
func SplitChain(chain string) (tenant string, shard int) {
	i, digits := digitSuffix(chain)
	// A shard number as Chain writes it: 1 to MaxShards−1, no leading zero.
	if i <= 0 || len(digits) > 2 || digits[0] == '0' {
		return chain, 0
	}
	if n, _ := strconv.Atoi(digits); n < MaxShards {
		return chain[:i], n
	}
	return chain, 0
}

// TenantOf returns the tenant a chain belongs to (the chain's name without
// its shard suffix). A consumer binds it, not the chain, to a delivered
// event's context: handlers see the tenant, whichever shard carried it.
func TenantOf(chain string) string {
	t, _ := SplitChain(chain)
	return t
}

// digitSuffix finds a final '~' followed by one or more digits: the index
// of the '~' and the digits, or -1 and "". Every name of that form is
// reserved (the edge refuses it as a tenant id); SplitChain reads the ones
// Chain writes.
func digitSuffix(name string) (int, string) {
	i := strings.LastIndexByte(name, ShardSep)
	if i < 0 || i == len(name)-1 {
		return -1, ""
	}
	for j := i + 1; j < len(name); j++ {
		if name[j] < '0' || name[j] > '9' {
			return -1, ""
		}
	}
	return i, name[i+1:]
}

// CheckChain returns nil for a chain's name: a tenant id the edge accepts
// (CheckTenant), or such a tenant id followed by "~<k>" for a shard k from 1
// to MaxShards−1 (Chain's form), within the tenant id rule's 128
// characters; or one of the framework's own chains (Framework). Operator
// entry points that name a chain (reconcile's tenant parameter, fourlanes
// export and watermarks) accept each of them.
func CheckChain(chain string) error {
	if Framework(chain) {
		return nil
	}
	if !ValidTenant(chain) {
		return CheckTenant(chain)
	}
	t, shard := SplitChain(chain)
	if shard == 0 {
		return CheckTenant(chain)
	}
	if err := CheckTenant(t); err != nil {
		return &TenantError{Tenant: chain, Reason: fmt.Sprintf("names shard %d of %q, which is not a tenant id: %v", shard, t, err)}
	}
	return nil
}

// ShardOf returns the shard a shard key goes to among shards: FNV-1a (64
// bits) of the key's bytes, modulo shards. It is part of the log's layout:
// the same key goes to the same shard for a given number of shards, in
// every process and every release. shards below 2 give shard 0.
func ShardOf(key string, shards int) int {
	if shards < 2 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum64() % uint64(shards))
}

// CheckShards returns nil when tenant can be split into shards chains: a
// tenant id the edge accepts, shards from 2 to MaxShards, and every chain's
// name within 128 characters. The error names the tenant and what to change.
func CheckShards(tenant string, shards int) error {
	if err := CheckTenant(tenant); err != nil {
		return err
	}
	if shards < 2 || shards > MaxShards {
		return fmt.Errorf("tenant %q: %d chain shards: use 2 to %d (or leave the tenant out for one chain)", tenant, shards, MaxShards)
	}
	if last := Chain(tenant, shards-1); len(last) > MaxTenantLen {
		return fmt.Errorf("tenant %q: its last shard's chain %q is %d characters, more than %d (a FIFO message group id): "+
			"a tenant with %d shards has an id of at most %d characters",
			tenant, last, len(last), MaxTenantLen, shards, MaxTenantLen-(len(last)-len(tenant)))
	}
	return nil
}
