package tenancy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

func TestChainNames(t *testing.T) {
	for _, tc := range []struct {
		tenant string
		shard  int
		chain  string
	}{
		{"acme", 0, "acme"},
		{"acme", 1, "acme~1"},
		{"acme", 31, "acme~31"},
		{"a~b", 3, "a~b~3"},
		{"x~", 2, "x~~2"},
	} {
		if got := tenancy.Chain(tc.tenant, tc.shard); got != tc.chain {
			t.Errorf("Chain(%q, %d) = %q, want %q", tc.tenant, tc.shard, got, tc.chain)
		}
		tenant, shard := tenancy.SplitChain(tc.chain)
		if tenant != tc.tenant || shard != tc.shard {
			t.Errorf("SplitChain(%q) = %q, %d; want %q, %d", tc.chain, tenant, shard, tc.tenant, tc.shard)
		}
		if got := tenancy.TenantOf(tc.chain); got != tc.tenant {
			t.Errorf("TenantOf(%q) = %q, want %q", tc.chain, got, tc.tenant)
		}
		if err := tenancy.CheckChain(tc.chain); err != nil {
			t.Errorf("CheckChain(%q): %v", tc.chain, err)
		}
	}
	// Not a shard's name: the whole string is the tenant (shard 0).
	for _, name := range []string{"acme", "~1", "acme~", "acme~01", "acme~32", "acme~100", "acme~1a", "acme~-1"} {
		if tenant, shard := tenancy.SplitChain(name); tenant != name || shard != 0 {
			t.Errorf("SplitChain(%q) = %q, %d; want the name itself, shard 0", name, tenant, shard)
		}
	}
}

// The edge refuses every tenant id of a shard's form, so no caller can bind
// a shard's chain as a tenant of its own (and write to it with Emit).
func TestReservedShardSuffix(t *testing.T) {
	for _, name := range []string{"acme~1", "acme~31", "acme~32", "acme~007", "x~~2"} {
		_, err := tenancy.WithTenant(context.Background(), name)
		var te *tenancy.TenantError
		if !errors.As(err, &te) || !errors.Is(err, tenancy.ErrInvalidTenant) || !strings.Contains(err.Error(), "reserved for a chain shard") {
			t.Errorf("WithTenant(%q): got %v, want a *TenantError naming the reserved suffix", name, err)
		}
	}
	for _, name := range []string{"acme~", "acme~x1", "~acme", "a~b", "t-1"} {
		if _, err := tenancy.WithTenant(context.Background(), name); err != nil {
			t.Errorf("WithTenant(%q): %v, want it accepted", name, err)
		}
	}
	// A shard's name whose tenant part is itself reserved or invalid is no chain.
	for _, name := range []string{"acme~32", "acme~1~2", "acme ~1", ""} {
		if err := tenancy.CheckChain(name); err == nil {
			t.Errorf("CheckChain(%q) = nil, want an error", name)
		}
	}
	err := tenancy.CheckChain("acme~1~2")
	if err == nil || !strings.Contains(err.Error(), `names shard 2 of "acme~1"`) {
		t.Errorf("CheckChain(acme~1~2): got %v, want it to name shard 2 of acme~1", err)
	}
}

func TestShardOfIsStableAndSpreads(t *testing.T) {
	// Known answers: FNV-1a 64 of the key's bytes, modulo the shard count
	// (hash/fnv; the same in any language that implements FNV-1a).
	for _, tc := range []struct {
		key    string
		shards int
		want   int
	}{
		{"", 16, int(0xcbf29ce484222325 % 16)}, // the FNV-1a 64 offset basis: the hash of nothing
		{"a", 16, int(0xaf63dc4c8601ec8c % 16)},
		{"order-1", 1, 0},
		{"order-1", 0, 0},
	} {
		if got := tenancy.ShardOf(tc.key, tc.shards); got != tc.want {
			t.Errorf("ShardOf(%q, %d) = %d, want %d", tc.key, tc.shards, got, tc.want)
		}
	}
	const per = 1000
	counts := make([]int, tenancy.MaxShards)
	for i := range per * tenancy.MaxShards {
		counts[tenancy.ShardOf(fmt.Sprintf("order-%d", i), tenancy.MaxShards)]++
	}
	for k, n := range counts {
		if n < per*8/10 || n > per*12/10 {
			t.Errorf("shard %d got %d of %d keys; want about %d", k, n, per*tenancy.MaxShards, per)
		}
	}
}

func TestCheckShards(t *testing.T) {
	if err := tenancy.CheckShards("acme", 32); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a", tenancy.MaxTenantLen-2)
	for _, tc := range []struct {
		tenant string
		shards int
		want   string
	}{
		{"acme", 1, "use 2 to 32"},
		{"acme", 33, "use 2 to 32"},
		{"acme~1", 4, "reserved for a chain shard"},
		{long, 16, "at most 125 characters"},
	} {
		err := tenancy.CheckShards(tc.tenant, tc.shards)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckShards(%q, %d): got %v, want an error containing %q", tc.tenant, tc.shards, err, tc.want)
		}
	}
	if err := tenancy.CheckShards(long, 10); err != nil { // "~9": 128 characters
		t.Errorf("CheckShards(126 characters, 10): %v", err)
	}
}
