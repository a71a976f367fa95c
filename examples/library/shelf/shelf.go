// Package shelf is the library's BEST_EFFORT subscriber: it projects the LOAN
// change feed into the shelf table, one row per loan saying whether its book
// is out or back on the shelf. The projection is pkg/projection's: changes
// apply by version whatever their order, a delete leaves a tombstone, and a
// loan whose changes were lost is re-applied from the loans table.
package shelf

import (
	"context"
	"fmt"

	"github.com/fourlanes/fourlanes/examples/library/loans"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/projection"
)

// EnvTable names the shelf table in a function's environment.
const EnvTable = "LIBRARY_SHELF_TABLE"

// Fields of a shelf row's document.
const (
	AttrBook    = "book"
	AttrOnShelf = "on_shelf"
)

// Module declares shelf's one subscription.
var Module = catalog.Module[*projection.Projector]{
	Name: "shelf",
	Doc:  "Shelf availability projection.",
	Subscribes: []catalog.Subscription[*projection.Projector]{
		{Name: "shelf.loans", Types: "record.*." + loans.Entity, Lane: catalog.BestEffort, Reads: []int{1},
			Doc: "Apply loan writes and deletes by version.", Handler: (*projection.Projector).OnChange},
	},
}

// New returns the shelf projection over its table, keeping parks in the
// backbone's state table.
func New(db projection.DynamoDB, table, stateTable string) *projection.Projector {
	st := store(db, table)
	st.StateTable = stateTable
	return &projection.Projector{Name: "shelf", Entity: loans.Entity, Store: st, Shape: row}
}

// store is the shelf table: keyed like the loans table (tenant, loan id).
func store(db projection.DynamoDB, table string) *projection.Table {
	return &projection.Table{DB: db, Table: table, PK: loans.AttrTenant, SK: loans.AttrID, Entity: loans.Entity, Name: "shelf"}
}

// row is a loan's shelf document.
func row(loan map[string]any) (map[string]any, error) {
	book, _ := loan[loans.AttrBook].(string)
	if book == "" {
		return nil, fmt.Errorf("no %s", loans.AttrBook)
	}
	return map[string]any{AttrBook: book, AttrOnShelf: loan[loans.AttrStatus] == loans.StatusReturned}, nil
}

// Row is one projected loan.
type Row struct {
	Version int64
	Book    string
	OnShelf bool
	Deleted bool
}

// Get reads the projected row of loan id.
func Get(ctx context.Context, db projection.DynamoDB, table, tenant, id string) (Row, bool, error) {
	return decode(store(db, table).Get(ctx, tenant, loans.Entity, id))
}

func decode(r projection.Row, ok bool, err error) (Row, bool, error) {
	if err != nil || !ok {
		return Row{}, ok, err
	}
	book, _ := r.Item[AttrBook].(string)
	onShelf, _ := r.Item[AttrOnShelf].(bool)
	return Row{Version: r.Version, Book: book, OnShelf: onShelf, Deleted: r.Deleted}, true, nil
}

// Reader reads the shelf through its active-version pointer
// (projection.Active, in the state table): after a rebuild switches it to
// a new shelf table, every Reader reads that table within CacheFor.
type Reader struct{ Versions *projection.Versions }

// NewReader reads the shelf tables named by version; current is the one
// active before any switch.
func NewReader(db projection.DynamoDB, stateTable, current string, tables map[string]string) *Reader {
	stores := map[string]projection.Store{}
	for v, tbl := range tables {
		stores[v] = store(db, tbl)
	}
	return &Reader{Versions: &projection.Versions{Active: &projection.Active{DB: db, Table: stateTable, Projection: "shelf", Default: current}, Stores: stores}}
}

// Get reads the projected row of loan id from the active shelf table.
func (r *Reader) Get(ctx context.Context, tenant, id string) (Row, bool, error) {
	return decode(r.Versions.Get(ctx, tenant, loans.Entity, id))
}
