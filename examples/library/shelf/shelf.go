// Package shelf is the library's BEST_EFFORT subscriber: it projects the LOAN
// change feed into the shelf table, one row per loan saying whether its book
// is out or back on the shelf. The projection is pkg/projection's: changes
// apply by version whatever their order, a delete leaves a tombstone, and a
// loan whose changes were lost is re-applied from the loans table.
package shelf

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

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
		{Name: "shelf.loans", Types: "record.*." + loans.Entity, Reads: []int{1}, // BEST_EFFORT: a change-feed glob
			Doc: "Apply loan writes and deletes by version.", Handler: (*projection.Projector).OnChange},
	},
}

// New returns the shelf projection over its table, keeping parks in the
// backbone's state table.
func New(db *dynamodb.Client, table, stateTable string) *projection.Projector {
	return &projection.Projector{Name: "shelf", Entity: loans.Entity, Store: store(db, table, stateTable), Shape: row}
}

// store is the shelf table: keyed like the loans table (tenant, loan id).
func store(db *dynamodb.Client, table, stateTable string) *projection.Table {
	return &projection.Table{DB: db, Table: table, StateTable: stateTable, PK: loans.AttrTenant, SK: loans.AttrID, Entity: loans.Entity, Name: "shelf"}
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
func Get(ctx context.Context, db *dynamodb.Client, table, tenant, id string) (Row, bool, error) {
	r, ok, err := store(db, table, "").Get(ctx, tenant, loans.Entity, id)
	if err != nil || !ok {
		return Row{}, ok, err
	}
	return decode(r.Item, r.Version, r.Deleted), true, nil
}

// decode is a projected loan's row, from its document.
func decode(item map[string]any, version int64, deleted bool) Row {
	book, _ := item[AttrBook].(string)
	onShelf, _ := item[AttrOnShelf].(bool)
	return Row{Version: version, Book: book, OnShelf: onShelf, Deleted: deleted}
}

// Reader reads the shelf through its active-version pointer (in the state
// table): after a rebuild switches it to a new shelf table, every Reader
// reads that table within the pointer's cache time.
type Reader struct{ Versions *projection.Versions }

// NewReader reads the shelf tables named by version; current is the one
// active before any switch.
func NewReader(db *dynamodb.Client, stateTable, current string, tables map[string]string) *Reader {
	return &Reader{Versions: store(db, "", stateTable).Follow(current, tables)}
}

// Get reads the projected row of loan id from the active shelf table.
func (r *Reader) Get(ctx context.Context, tenant, id string) (Row, bool, error) {
	row, ok, err := r.Versions.Get(ctx, tenant, loans.Entity, id)
	if err != nil || !ok {
		return Row{}, ok, err
	}
	return decode(row.Item, row.Version, row.Deleted), true, nil
}
