// Package library is a second, small application of fourlanes: a lending
// library. loans lends books (it writes the loans table, the tracked entity
// LOAN, and emits in the same transaction); reminders (DURABLE) sends a
// member one reminder per loan event; shelf (BEST_EFFORT) projects loans into
// the shelf table. It imports only fourlanes' framework packages.
package library

import (
	"github.com/fourlanes/fourlanes/examples/library/loans"
	"github.com/fourlanes/fourlanes/examples/library/reminders"
	"github.com/fourlanes/fourlanes/examples/library/shelf"
	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/projection"
)

// App is the library as fourlanes' functions and construct take it.
var App = app.Application{
	Name: "library",
	Modules: []app.Module{
		app.Bind(loans.Module, nil),
		app.Bind(reminders.Module, func(rt app.Runtime) (*reminders.Reminder, error) {
			return &reminders.Reminder{Logger: rt.Logger}, nil
		}),
		app.Bind(shelf.Module, func(rt app.Runtime) (*projection.Projector, error) {
			p := shelf.New(rt.DynamoDB, rt.Env[shelf.EnvTable], rt.StateTable)
			p.Logger, p.Metrics = rt.Logger, rt.Metrics
			return p, nil
		}, shelf.EnvTable),
	},
}
