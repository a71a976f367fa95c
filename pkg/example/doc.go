// Package example is a small orders domain built on fourlanes, for reading
// as a template: each module declares its event surface in one file
// (module.go) and keeps its logic beside it.
//
//	orders         emits order.placed/paid/shipped/cancelled with its own writes
//	               to the orders table (versioned); tracks the ORDER entity
//	inventory      INLINE: reserves stock when an order is placed (fail-closed)
//	audit          LOCAL: an audit log line and a counter per order event
//	notifications  DURABLE: one email per order event, never sent twice
//	search         BEST_EFFORT: a projection of the ORDER change feed, by version
//
// Specs lists every module; Catalog builds the application's catalog from it.
package example

import (
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/example/audit"
	"github.com/fourlanes/fourlanes/pkg/example/inventory"
	"github.com/fourlanes/fourlanes/pkg/example/notifications"
	"github.com/fourlanes/fourlanes/pkg/example/orders"
	"github.com/fourlanes/fourlanes/pkg/example/search"
)

// Specs returns the declaration of every module of the application. A module
// missing here is refused at registration and caught by the gate's tests.
func Specs() []catalog.Spec {
	return []catalog.Spec{
		orders.Module.Spec(),
		inventory.Module.Spec(),
		audit.Module.Spec(),
		notifications.Module.Spec(),
		search.Module.Spec(),
	}
}

// Catalog returns the application's catalog.
func Catalog() (*catalog.Catalog, error) { return catalog.New(Specs()...) }
