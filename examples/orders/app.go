package example

import (
	"github.com/fourlanes/fourlanes/examples/orders/audit"
	"github.com/fourlanes/fourlanes/examples/orders/inventory"
	"github.com/fourlanes/fourlanes/examples/orders/notifications"
	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/examples/orders/search"
	"github.com/fourlanes/fourlanes/pkg/app"
)

// App is the example application as fourlanes' functions and construct take
// it. orders emits and tracks ORDER; inventory (INLINE) and audit (LOCAL)
// run in the process that emits, which binds them itself; notifications
// (DURABLE) and search (BEST_EFFORT) are bound here, in the functions that
// run their lanes.
var App = app.Application{
	Name: "orders",
	Modules: []app.Module{
		{Spec: orders.Module.Spec()},
		{Spec: inventory.Module.Spec()},
		{Spec: audit.Module.Spec()},
		{Spec: notifications.Module.Spec(), Bind: bindNotifications},
		{Spec: search.Module.Spec(), Bind: bindSearch, Env: []string{search.EnvTable}},
	},
}

// bindNotifications sends emails through the log (a stand-in for a mail
// provider); the lane records each send as an effect.
func bindNotifications(rt app.Runtime) (app.Bound, error) {
	return app.Bound{Binding: notifications.Module.Bind(&notifications.Notifier{
		Mailer: notifications.LogMailer{Logger: rt.Logger},
	})}, nil
}

// bindSearch projects orders into the search table; dlq-repair re-applies
// an order to it when its change events were lost.
func bindSearch(rt app.Runtime) (app.Bound, error) {
	p := &search.Projector{
		Store:   &search.DynamoStore{DB: rt.DynamoDB, SearchTable: rt.Env[search.EnvTable], StateTable: rt.StateTable},
		Logger:  rt.Logger,
		Metrics: rt.Metrics,
	}
	return app.Bound{Binding: search.Module.Bind(p), Reapplier: p}, nil
}
