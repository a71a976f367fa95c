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
// App is the application value the functions and the construct take; Specs
// and Catalog are its declarations.
package example

import "github.com/fourlanes/fourlanes/pkg/catalog"

// Specs returns the declaration of every module of the application (App's).
// A module missing here is refused at registration and caught by the gate's
// tests.
func Specs() []catalog.Spec {
	specs := make([]catalog.Spec, len(App.Modules))
	for i, m := range App.Modules {
		specs[i] = m.Spec
	}
	return specs
}

// Catalog returns the application's catalog.
func Catalog() (*catalog.Catalog, error) { return App.Catalog() }
