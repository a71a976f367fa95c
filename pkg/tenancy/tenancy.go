// Package tenancy binds the tenant, actor and correlation id of a request to
// its context.Context at the edge (authentication, or the envelope being
// delivered). The write path reads them from the context; no function on it
// takes a tenant parameter, so no caller can pass the wrong one.
package tenancy

import (
	"context"
	"errors"
	"fmt"
)

// ErrNoTenant is returned when a tenant-scoped operation runs without a tenant
// bound to its context.
var ErrNoTenant = errors.New("no tenant bound to the context; bind one at the edge with tenancy.WithTenant")

type ctxKey int

const (
	tenantKey ctxKey = iota
	actorKey
	correlationKey
	causationKey
)

// WithTenant binds tenant to ctx. An empty tenant is refused.
func WithTenant(ctx context.Context, tenant string) (context.Context, error) {
	if tenant == "" {
		return ctx, fmt.Errorf("bind tenant: empty tenant id: %w", ErrNoTenant)
	}
	return context.WithValue(ctx, tenantKey, tenant), nil
}

// MustWithTenant is WithTenant for tenants known to be non-empty (tests,
// envelopes that already validated). It panics on an empty tenant.
func MustWithTenant(ctx context.Context, tenant string) context.Context {
	c, err := WithTenant(ctx, tenant)
	if err != nil {
		panic(err)
	}
	return c
}

// WithActor binds the acting principal (a user or service id).
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey, actor)
}

// WithCorrelation binds the correlation id that ties a request's events together.
func WithCorrelation(ctx context.Context, correlation string) context.Context {
	return context.WithValue(ctx, correlationKey, correlation)
}

// WithCausation binds the id of the event being handled, so events emitted by
// a handler record what caused them.
func WithCausation(ctx context.Context, causation string) context.Context {
	return context.WithValue(ctx, causationKey, causation)
}

// Tenant returns the bound tenant or ErrNoTenant.
func Tenant(ctx context.Context) (string, error) {
	t, _ := ctx.Value(tenantKey).(string)
	if t == "" {
		return "", ErrNoTenant
	}
	return t, nil
}

// Actor returns the bound actor, or "" when unset.
func Actor(ctx context.Context) string { s, _ := ctx.Value(actorKey).(string); return s }

// Correlation returns the bound correlation id, or "" when unset.
func Correlation(ctx context.Context) string { s, _ := ctx.Value(correlationKey).(string); return s }

// Causation returns the bound causation id, or "" when unset.
func Causation(ctx context.Context) string { s, _ := ctx.Value(causationKey).(string); return s }
