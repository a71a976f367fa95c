// Package search projects the orders change feed into a search table (the
// example's BEST_EFFORT subscriber), one document per order: the order item
// as its table holds it. The projection is pkg/projection's: changes apply by
// version, early ones park until the gap closes, deletes leave versioned
// tombstones, and dlq-repair or a compare re-applies an order whose change
// events were lost.
package search

import (
	"log/slog"

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/projection"
)

const (
	// Name names the projection (its parks, logs and metrics).
	Name = "search"
	// Entity is the one entity searched: the orders module's.
	Entity = "ORDER"
	// EnvTable names the search table in the functions' environment; its
	// keys are keys.AttrPK (the tenant) and keys.AttrSK (ORDER#<id>).
	EnvTable = "SEARCH_TABLE"
	// SKSep joins the entity and the id in the sort key.
	SKSep = "#"
	// AttrDoc holds a document, as JSON.
	AttrDoc = projection.AttrDoc
)

// New returns the search projection over its table, keeping parks in the
// backbone's state table.
func New(db projection.DynamoDB, table, stateTable string, logger *slog.Logger, metrics *obs.Metrics) *projection.Projector {
	return &projection.Projector{Name: Name, Entity: Entity, Store: Store(db, table, stateTable), Logger: logger, Metrics: metrics}
}

// Store is the search table (and the parks in stateTable).
func Store(db projection.DynamoDB, table, stateTable string) *projection.Table {
	return &projection.Table{DB: db, Table: table, StateTable: stateTable, Name: Name}
}
