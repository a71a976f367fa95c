package tenancy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

func TestTenantBoundAtTheEdge(t *testing.T) {
	ctx := context.Background()
	if _, err := tenancy.Tenant(ctx); !errors.Is(err, tenancy.ErrNoTenant) {
		t.Fatalf("unbound: got %v, want ErrNoTenant", err)
	}
	if _, err := tenancy.WithTenant(ctx, ""); !errors.Is(err, tenancy.ErrNoTenant) {
		t.Fatalf("empty tenant: got %v, want ErrNoTenant", err)
	}
	ctx, err := tenancy.WithTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	ctx = tenancy.WithCausation(tenancy.WithCorrelation(tenancy.WithActor(ctx, "u1"), "c1"), "e1")
	got, err := tenancy.Tenant(ctx)
	if err != nil || got != "acme" {
		t.Fatalf("got %q, %v; want acme", got, err)
	}
	if tenancy.Actor(ctx) != "u1" || tenancy.Correlation(ctx) != "c1" || tenancy.Causation(ctx) != "e1" {
		t.Errorf("got actor %q correlation %q causation %q", tenancy.Actor(ctx), tenancy.Correlation(ctx), tenancy.Causation(ctx))
	}
	if tenancy.Actor(context.Background()) != "" {
		t.Error("unset actor is not empty")
	}
}

func TestTenantRule(t *testing.T) {
	const punct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
	if len(punct) != 32 {
		t.Fatalf("%d punctuation marks, want 32", len(punct))
	}
	// Every allowed punctuation mark, padded with letters and digits to the limit.
	limit := punct + strings.Repeat("aZ09", (tenancy.MaxTenantLen-len(punct))/4)
	if len(limit) != tenancy.MaxTenantLen {
		t.Fatalf("test tenant is %d characters", len(limit))
	}
	for _, ok := range []string{"acme", "a", limit, "tenant/eu-west-1#7:x"} {
		ctx, err := tenancy.WithTenant(context.Background(), ok)
		if err != nil {
			t.Errorf("WithTenant(%q): %v", ok, err)
			continue
		}
		if got, _ := tenancy.Tenant(ctx); got != ok {
			t.Errorf("Tenant: got %q, want %q", got, ok)
		}
	}
	for _, tc := range []struct{ tenant, reason string }{
		{"acme corp", `character ' ' at byte 4 is not allowed`},
		{"té", `character 'é' at byte 1 is not allowed`},
		{"shop😀", `character '😀' at byte 4 is not allowed`},
		{"ac\x00me", `character '\x00' at byte 2 is not allowed`},
		{"line\nbreak", `character '\n' at byte 4 is not allowed`},
		{"del\x7f", `character '\x7f' at byte 3 is not allowed`},
		{"bad\xffutf8", `byte 0xff (not UTF-8) at byte 3 is not allowed`},
		{limit + "x", "is 129 characters, more than 128"},
		{"", "is empty"},
	} {
		_, err := tenancy.WithTenant(context.Background(), tc.tenant)
		var te *tenancy.TenantError
		if !errors.As(err, &te) || !errors.Is(err, tenancy.ErrInvalidTenant) {
			t.Errorf("WithTenant(%q): got %v, want a *TenantError", tc.tenant, err)
			continue
		}
		want := fmt.Sprintf("bind tenant: tenant id %q: %s; %s", tc.tenant, tc.reason, tenancy.TenantRule)
		if err.Error() != want {
			t.Errorf("WithTenant(%q):\n got %s\nwant %s", tc.tenant, err, want)
		}
		if errors.Is(err, tenancy.ErrNoTenant) != (tc.tenant == "") {
			t.Errorf("WithTenant(%q): errors.Is(err, ErrNoTenant) = %v", tc.tenant, !(tc.tenant == ""))
		}
		if tenancy.ValidTenant(tc.tenant) || tenancy.ValidTenant([]byte(tc.tenant)) {
			t.Errorf("ValidTenant(%q) = true", tc.tenant)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("MustWithTenant(%q) did not panic", tc.tenant)
				}
			}()
			tenancy.MustWithTenant(context.Background(), tc.tenant)
		}()
	}
	// The rule is exactly the 94 characters SQS names: a-z, A-Z, 0-9 and the
	// 32 marks.
	for c := 0; c < 256; c++ {
		want := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.ContainsRune(punct, rune(c))
		if got := tenancy.ValidTenant(string([]byte{byte(c)})); got != want {
			t.Errorf("ValidTenant(%q) = %v, want %v", rune(c), got, want)
		}
	}
}

// The heartbeat's chain can never be a team's tenant: the edge refuses it
// and every id of its reserved prefix, while consumers and operators, which
// name chains, accept it.
func TestReservedFrameworkChains(t *testing.T) {
	for _, id := range []string{tenancy.HeartbeatTenant, tenancy.ReservedPrefix + "x", tenancy.ReservedPrefix} {
		_, err := tenancy.WithTenant(context.Background(), id)
		if !errors.Is(err, tenancy.ErrInvalidTenant) || !strings.Contains(err.Error(), "reserved for the framework") {
			t.Errorf("WithTenant(%q): got %v, want a *TenantError naming the reserved prefix", id, err)
		}
	}
	if err := tenancy.CheckChain(tenancy.HeartbeatTenant); err != nil {
		t.Errorf("CheckChain(%q) = %v, want nil", tenancy.HeartbeatTenant, err)
	}
	if err := tenancy.CheckChain(tenancy.ReservedPrefix + "x"); err == nil {
		t.Errorf("CheckChain(%q) = nil, want the reserved prefix refused", tenancy.ReservedPrefix+"x")
	}
	ctx, err := tenancy.WithChain(context.Background(), tenancy.HeartbeatTenant)
	if got, _ := tenancy.Tenant(ctx); err != nil || got != tenancy.HeartbeatTenant {
		t.Errorf("WithChain(heartbeat): tenant %q, err %v; want %q", got, err, tenancy.HeartbeatTenant)
	}
	if got, _ := tenancy.Tenant(tenancy.WithHeartbeat(context.Background())); got != tenancy.HeartbeatTenant {
		t.Errorf("WithHeartbeat: tenant %q, want %q", got, tenancy.HeartbeatTenant)
	}
	// Ids that merely contain the prefix's characters stay a team's.
	for _, id := range []string{"~fourlanes", "fourlanes.heartbeat", "~acme"} {
		if _, err := tenancy.WithTenant(context.Background(), id); err != nil {
			t.Errorf("WithTenant(%q): %v, want it accepted", id, err)
		}
	}
}
