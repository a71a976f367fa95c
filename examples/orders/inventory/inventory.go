// Package inventory reserves stock for placed orders (the example's INLINE
// subscriber).
package inventory

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// ErrOutOfStock: a line of the order cannot be reserved.
var ErrOutOfStock = errors.New("out of stock")

// Stock reserves order lines. Reserve must be idempotent per (tenant, order).
type Stock interface {
	Reserve(ctx context.Context, tenant, orderID string, items []orders.Item) error
}

// Reserver is inventory's handler receiver.
type Reserver struct{ Stock Stock }

// OnOrderPlaced reserves the order's lines. It is a typed handler
// (catalog.Typed): the framework decodes the payload once, as PlacedV2, and
// upcasts order.placed v1 to it (orders.PlacedV2FromV1); a payload missing a
// required field never reaches it.
func (r *Reserver) OnOrderPlaced(ctx context.Context, _ envelope.Envelope, p orders.PlacedV2) error {
	tenant, err := tenancy.Tenant(ctx)
	if err != nil {
		return err
	}
	return r.Stock.Reserve(ctx, tenant, p.OrderID, p.Items)
}

// MemoryStock is an in-memory Stock for the example and tests. Safe for
// concurrent use.
type MemoryStock struct {
	mu       sync.Mutex
	levels   map[string]int     // tenant/sku → available
	reserved map[[2]string]bool // (tenant, order) → reserved; a pair, since a tenant id may hold any punctuation
}

// NewMemoryStock returns stock with the given levels per SKU, for every tenant.
func NewMemoryStock(levels map[string]int) *MemoryStock {
	return &MemoryStock{levels: levels, reserved: map[[2]string]bool{}}
}

// Reserve takes every line or none.
func (m *MemoryStock) Reserve(_ context.Context, tenant, orderID string, items []orders.Item) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reserved[[2]string{tenant, orderID}] {
		return nil
	}
	for _, it := range items {
		if m.levels[it.SKU] < it.Qty {
			return fmt.Errorf("order %s: %s wants %d, %d left: %w", orderID, it.SKU, it.Qty, m.levels[it.SKU], ErrOutOfStock)
		}
	}
	for _, it := range items {
		m.levels[it.SKU] -= it.Qty
	}
	m.reserved[[2]string{tenant, orderID}] = true
	return nil
}

// Level returns the available quantity of sku.
func (m *MemoryStock) Level(sku string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.levels[sku]
}
