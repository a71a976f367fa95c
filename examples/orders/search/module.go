package search

import (
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/projection"
)

// Module declares search's one subscription: project the ORDER change feed
// into the search table. BEST_EFFORT, because change events are dispatched
// only by the change feed, and a lost one is repaired by re-reading the order.
var Module = catalog.Module[*projection.Projector]{
	Name: "search",
	Doc:  "Order search projection.",
	Subscribes: []catalog.Subscription[*projection.Projector]{
		{Name: "search.orders", Types: "record.*." + Entity, Lane: catalog.BestEffort, Reads: []int{catalog.ChangeSchemaVersion},
			Doc: "Apply order writes and deletes by version; park early ones.", Handler: (*projection.Projector).OnChange},
	},
}
