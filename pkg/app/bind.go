package app

import (
	"fmt"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
)

// Declare is a module of the application that runs no DURABLE or BEST_EFFORT
// subscription: it emits, tracks tables, or subscribes on INLINE or LOCAL
// only (its emitting service binds those itself, lanes.InProcess). It is
// Bind(m, nil).
func Declare[T any](m catalog.Module[T]) Module { return Module{Spec: m.Spec()} }

// Bind is a module with DURABLE or BEST_EFFORT subscriptions: build makes its
// handler receiver in each function that runs them, from the runtime's
// clients, the state table and the module's environment, which env names
// (the module's own tables, say; the construct sets each on those
// functions). A receiver that is also a Reapplier (a projection) is offered
// to dlq-repair for the change events the feed lost. A module with no such
// subscription (one that only emits or tracks tables) passes a nil build:
// Bind(m, nil), which is Declare(m).
//
//	app.Bind(shelf.Module, func(rt app.Runtime) (*projection.Projector, error) {
//		return shelf.New(rt.DynamoDB, rt.Env[shelf.EnvTable], rt.StateTable), nil
//	}, shelf.EnvTable)
func Bind[T any](m catalog.Module[T], build func(rt Runtime) (T, error), env ...string) Module {
	if build == nil {
		return Module{Spec: m.Spec(), Env: env}
	}
	return Module{Spec: m.Spec(), Env: env, Bind: func(rt Runtime) (Bound, error) {
		recv, err := build(rt)
		if err != nil {
			return Bound{}, fmt.Errorf("module %s: %w", m.Name, err)
		}
		b := Bound{Binding: m.Bind(recv)}
		if r, ok := any(recv).(Reapplier); ok {
			b.Reapplier = r
		}
		return b, nil
	}}
}

// EventStore opens the log for one of the application's services: table is
// the events table (the stack output EventsTableName, or $EVENTS_TABLE in
// its functions), the catalog and the chain shards come from a, so no two
// emitters of the application can disagree on either; opts adjust the rest
// of the configuration (a Dispatcher for the service's INLINE and LOCAL
// subscriptions, say).
func (a Application) EventStore(db eventstore.DynamoDB, table string, opts ...func(*eventstore.Config)) (*eventstore.Store, error) {
	cat, err := a.Check()
	if err != nil {
		return nil, err
	}
	cfg := eventstore.Config{Table: table, Catalog: cat, Shards: a.ChainShards}
	for _, o := range opts {
		o(&cfg)
	}
	if cat.Personal() && cat.Vault() == nil {
		return nil, fmt.Errorf("app %s: its catalog declares personal fields, which Emit seals: pass a vault, "+
			"a.EventStore(db, table, erasure.Use(v)) with v from erasure.FromEnv (docs/erasure.md)", a.Name)
	}
	return eventstore.New(db, cfg)
}
