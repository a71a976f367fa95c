package example

import (
	"github.com/fourlanes/fourlanes/examples/orders/audit"
	"github.com/fourlanes/fourlanes/examples/orders/inventory"
	"github.com/fourlanes/fourlanes/examples/orders/notifications"
	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/examples/orders/search"
	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/projection"
)

// App is the example application as fourlanes' functions and construct take
// it. orders emits and tracks ORDER; inventory (INLINE) and audit (LOCAL)
// run in the process that emits, which binds them itself; notifications
// (DURABLE) and search (BEST_EFFORT) are bound here, in the functions that
// run their lanes.
var App = app.Application{
	Name: "orders",
	Modules: []app.Module{
		app.Declare(orders.Module),
		app.Declare(inventory.Module),
		app.Declare(audit.Module),
		// Emails go out through the log (a stand-in for a mail provider); the
		// lane records each send as an effect.
		app.Bind(notifications.Module, func(rt app.Runtime) (*notifications.Notifier, error) {
			return &notifications.Notifier{Mailer: notifications.LogMailer{Logger: rt.Logger}}, nil
		}),
		// The search projection; dlq-repair re-applies an order to it when its
		// change events were lost (the Projector is a Reapplier).
		app.Bind(search.Module, func(rt app.Runtime) (*projection.Projector, error) {
			return search.New(rt.DynamoDB, rt.Env[search.EnvTable], rt.StateTable, rt.Logger, rt.Metrics), nil
		}, search.EnvTable),
	},
}
