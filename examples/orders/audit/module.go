package audit

import "github.com/fourlanes/fourlanes/pkg/catalog"

// Module declares audit's one subscription: an audit line and a counter per
// order event. LOCAL, because losing one line to a crash is acceptable and a
// failure here must never fail the caller's write.
var Module = catalog.Module[*Auditor]{
	Name: "audit",
	Doc:  "Audit trail and business counters of order events.",
	Subscribes: []catalog.Subscription[*Auditor]{
		{Name: "audit.order-events", Types: "order.*", Lane: catalog.Local, Reads: []int{1, 2},
			Doc: "Log an audit line and count OrderEvents by type.", Handler: (*Auditor).OnOrderEvent},
	},
}
