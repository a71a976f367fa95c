// Package tenancy binds the tenant, actor and correlation id of a request to
// its context.Context at the edge (authentication, or the envelope being
// delivered). The write path reads them from the context; no function on it
// takes a tenant parameter, so no caller can pass the wrong one.
//
// It also owns the one rule for a tenant id (CheckTenant), which the edge
// (WithTenant) applies, and the rule for a chain's name (ValidTenant, which
// envelope validation applies: a tenant id, or a chain shard's name; see
// shard.go).
package tenancy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrNoTenant is returned when a tenant-scoped operation runs without a tenant
// bound to its context.
var ErrNoTenant = errors.New("no tenant bound to the context; bind one at the edge with tenancy.WithTenant")

// ErrInvalidTenant matches every *TenantError under errors.Is.
var ErrInvalidTenant = errors.New("invalid tenant id")

// MaxTenantLen is the longest tenant id: an SQS FIFO MessageGroupId holds at
// most 128 characters.
const MaxTenantLen = 128

// TenantRule states the tenant id rule as errors quote it. A tenant id
// travels as the SQS FIFO MessageGroupId (1 to 128 characters, alphanumeric
// and punctuation) and as the DynamoDB partition key (UTF-8, 1 to 2048
// bytes); the first is the stricter, so it is the rule.
const TenantRule = "a tenant id is 1 to 128 characters, each an ASCII letter, digit or punctuation " +
	"mark !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ (the SQS FIFO MessageGroupId rule: no space, " +
	"no control character, nothing outside ASCII), not ending in ~ and digits (reserved for chain shards), " +
	"not starting with " + ReservedPrefix + " (reserved for the framework's own chains)"

// TenantError names a tenant id that breaks the rule, and how.
type TenantError struct {
	Tenant string
	Reason string // e.g. `character ' ' at byte 4 is not allowed`
}

func (e *TenantError) Error() string {
	return fmt.Sprintf("tenant id %q: %s; %s", e.Tenant, e.Reason, TenantRule)
}

// Unwrap lets callers test errors.Is(err, ErrInvalidTenant).
func (e *TenantError) Unwrap() error { return ErrInvalidTenant }

// Is makes the error of an empty tenant id also ErrNoTenant.
func (e *TenantError) Is(target error) bool { return target == ErrNoTenant && e.Tenant == "" }

// ValidTenant reports whether tenant satisfies the rule of an envelope's
// tenant_id (the name of a chain): 1 to 128 bytes, each from '!' (0x21) to
// '~' (0x7E). Those 94 characters are exactly the ASCII letters, digits and
// 32 punctuation marks SQS allows. It accepts a chain shard's name
// ("<tenant>~<k>"), which CheckTenant refuses at the edge.
func ValidTenant[T string | []byte](tenant T) bool {
	if len(tenant) == 0 || len(tenant) > MaxTenantLen {
		return false
	}
	for i := 0; i < len(tenant); i++ {
		if c := tenant[i]; c < '!' || c > '~' {
			return false
		}
	}
	return true
}

// CheckTenant returns nil for a valid tenant id, else a *TenantError (an
// empty one also matches ErrNoTenant).
func CheckTenant(tenant string) error {
	if ValidTenant(tenant) {
		if strings.HasPrefix(tenant, ReservedPrefix) {
			return &TenantError{Tenant: tenant, Reason: fmt.Sprintf("starts with %q: that prefix is reserved for the framework's own chains "+
				"(the heartbeat's is %s); choose a tenant id that does not start so", ReservedPrefix, HeartbeatTenant)}
		}
		if i, _ := digitSuffix(tenant); i >= 0 {
			return &TenantError{Tenant: tenant, Reason: fmt.Sprintf("ends in %q, %q and digits: that form is reserved for a chain shard's name "+
				"(shard k of tenant T is T~k); choose a tenant id that does not end so",
				tenant[i:], string(ShardSep))}
		}
		return nil
	}
	if tenant == "" {
		return &TenantError{Tenant: tenant, Reason: "is empty"}
	}
	for i := 0; i < len(tenant); {
		r, size := utf8.DecodeRuneInString(tenant[i:])
		if r < '!' || r > '~' {
			what := fmt.Sprintf("character %q", r)
			if r == utf8.RuneError && size == 1 {
				what = fmt.Sprintf("byte 0x%02x (not UTF-8)", tenant[i])
			}
			return &TenantError{Tenant: tenant, Reason: fmt.Sprintf("%s at byte %d is not allowed", what, i)}
		}
		i += size
	}
	return &TenantError{Tenant: tenant, Reason: fmt.Sprintf("is %d characters, more than %d", len(tenant), MaxTenantLen)}
}

// The framework's own chains. A tenant id starting with ReservedPrefix is
// refused at the edge (CheckTenant, WithTenant), so no team's tenant can
// ever share a chain, a FIFO message group, watermarks or checkpoints with
// one of them. CheckChain and WithChain accept the ones named here, so
// consumers deliver their events and operators reconcile them like any
// other chain.
const (
	// ReservedPrefix begins every framework chain's name.
	ReservedPrefix = "~fourlanes."
	// HeartbeatTenant is the chain of the stack's heartbeat (pkg/heartbeat):
	// one synthetic event on a schedule, through the same path as every
	// event, so a stopped Pipe, mapping or consumer alarms on an idle stack.
	HeartbeatTenant = ReservedPrefix + "heartbeat"
)

// Framework reports whether chain is one of the framework's own chains.
func Framework(chain string) bool { return chain == HeartbeatTenant }

// WithHeartbeat binds the heartbeat's chain (HeartbeatTenant), which
// WithTenant refuses: only the heartbeat writer emits there.
func WithHeartbeat(ctx context.Context) context.Context {
	return context.WithValue(ctx, tenantKey, HeartbeatTenant)
}

type ctxKey int

const (
	tenantKey ctxKey = iota
	actorKey
	correlationKey
	causationKey
	chainKey
)

// WithTenant binds tenant to ctx. A tenant id that breaks the rule
// (CheckTenant) is refused with a *TenantError; an empty one also matches
// ErrNoTenant.
func WithTenant(ctx context.Context, tenant string) (context.Context, error) {
	if err := CheckTenant(tenant); err != nil {
		return ctx, fmt.Errorf("bind tenant: %w", err)
	}
	return context.WithValue(ctx, tenantKey, tenant), nil
}

// MustWithTenant is WithTenant for tenants known to be valid (tests,
// envelopes that already validated). It panics on an invalid tenant.
func MustWithTenant(ctx context.Context, tenant string) context.Context {
	c, err := WithTenant(ctx, tenant)
	if err != nil {
		panic(err)
	}
	return c
}

// WithChain binds the tenant a chain belongs to (TenantOf), as a consumer
// does for a delivered event: handlers see the tenant whichever of its
// chains carried the event. A chain shard's name is also kept (Chain) for
// log records. A name that is no chain's (CheckChain) is refused.
func WithChain(ctx context.Context, chain string) (context.Context, error) {
	if err := CheckChain(chain); err != nil {
		return ctx, fmt.Errorf("bind tenant of chain: %w", err)
	}
	ctx = context.WithValue(ctx, tenantKey, TenantOf(chain))
	if TenantOf(chain) != chain {
		ctx = context.WithValue(ctx, chainKey, chain)
	}
	return ctx, nil
}

// MustWithChain is WithChain for names known to be valid (an envelope that
// validated). It panics on an invalid one.
func MustWithChain(ctx context.Context, chain string) context.Context {
	c, err := WithChain(ctx, chain)
	if err != nil {
		panic(err)
	}
	return c
}

// ChainOf returns the chain shard's name WithChain bound, or "" when the
// context's tenant came with its own chain (shard 0) or from WithTenant.
func ChainOf(ctx context.Context) string { s, _ := ctx.Value(chainKey).(string); return s }

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
