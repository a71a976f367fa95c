package tenancy_test

import (
	"context"
	"errors"
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
