package search

import "github.com/fourlanes/fourlanes/pkg/catalog"

// Module declares search's one subscription: project the ORDER change feed
// into the search table. BEST_EFFORT, because change events are dispatched
// only by the change feed, and a lost one is repaired by re-reading the order.
var Module = catalog.Module[*Projector]{
	Name: "search",
	Doc:  "Order search projection.",
	Subscribes: []catalog.Subscription[*Projector]{
		{Name: "search.orders", Types: "record.*.ORDER", Lane: catalog.BestEffort, Reads: []int{catalog.ChangeSchemaVersion},
			Doc: "Apply order writes and deletes by version; park early ones.", Handler: (*Projector).OnChange},
	},
}
