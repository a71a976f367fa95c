package inventory

import (
	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/pkg/catalog"
)

// Module declares inventory's one subscription: reserve stock for a placed
// order before the caller returns. INLINE, because a caller that placed an
// order the warehouse cannot fill must learn it now (and cancel it).
var Module = catalog.Module[*Reserver]{
	Name: "inventory",
	Doc:  "Stock levels and reservations.",
	Subscribes: []catalog.Subscription[*Reserver]{
		{Name: "inventory.reserve", Types: orders.TypePlaced, Lane: catalog.Inline, Reads: []int{1, 2},
			Doc:   "Reserve every line of a placed order; out of stock fails the caller.",
			Typed: catalog.Typed((*Reserver).OnOrderPlaced)}, // takes PlacedV2; v1 arrives upcast
	},
}
