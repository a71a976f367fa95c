package shelf_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/examples/library/loans"
	"github.com/fourlanes/fourlanes/examples/library/shelf"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

func TestMain(m *testing.M) { localaws.Main(m) }

// shelfTable creates a shelf table keyed as the library's stack keys it.
func shelfTable(t *testing.T, db *dynamodb.Client) string {
	t.Helper()
	name := localaws.UniqueName(t, "shelf")
	localaws.CreateTable(t, db, &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(loans.AttrTenant), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(loans.AttrID), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(loans.AttrTenant), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(loans.AttrID), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	return name
}

// TestShelfFollowsLoans: a loan returned before its opening arrives ends
// on the shelf; its delete leaves a tombstone a late write cannot undo.
func TestShelfFollowsLoans(t *testing.T) {
	db := localaws.DynamoDB(t)
	tbl := shelfTable(t, db)
	state := aws.ToString(localaws.CreateTable(t, db, keys.PKSKTable(localaws.UniqueName(t, "state"))).TableName)
	p := shelf.New(db, tbl, state)
	ctx := context.Background()
	loan := func(status string) map[string]any {
		return map[string]any{loans.AttrID: "l1", loans.AttrBook: "Dune", loans.AttrStatus: status}
	}
	check := func(want shelf.Row) {
		t.Helper()
		if r, ok, err := shelf.Get(ctx, db, tbl, "t1", "l1"); err != nil || !ok || r != want {
			t.Fatalf("shelf row: %+v (found %v, %v), want %+v", r, ok, err, want)
		}
	}
	if err := p.Repair(ctx, "t1", loans.Entity, "l1", 2, loan(loans.StatusReturned)); err != nil {
		t.Fatal(err)
	}
	check(shelf.Row{Version: 2, Book: "Dune", OnShelf: true})
	if err := p.Repair(ctx, "t1", loans.Entity, "l1", 1, loan(loans.StatusOpen)); err != nil {
		t.Fatal(err)
	}
	check(shelf.Row{Version: 2, Book: "Dune", OnShelf: true})
	if err := p.Repair(ctx, "t1", loans.Entity, "l1", 2, nil); err != nil {
		t.Fatal(err)
	}
	check(shelf.Row{Version: 2, Deleted: true})
}

func TestShelfRefusesALoanWithoutABook(t *testing.T) {
	db := localaws.DynamoDB(t)
	tbl := shelfTable(t, db)
	p := shelf.New(db, tbl, "unused")
	err := p.Repair(context.Background(), "t1", loans.Entity, "l2", 1, map[string]any{loans.AttrStatus: loans.StatusOpen})
	if err == nil || !strings.Contains(err.Error(), "no book") {
		t.Fatalf("got %v, want a refusal naming the missing book", err)
	}
	if _, ok, err := shelf.Get(context.Background(), db, tbl, "t1", "l2"); ok || err != nil {
		t.Errorf("a row was written (%v, %v)", ok, err)
	}
}

// TestReaderFollowsTheActiveShelf: a Reader reads the shelf table active
// before any switch, and the rebuilt one once a rebuild (here the switch
// alone) moves the pointer; an unknown version is an error naming it.
func TestReaderFollowsTheActiveShelf(t *testing.T) {
	db := localaws.DynamoDB(t)
	v1, v2 := shelfTable(t, db), shelfTable(t, db)
	state := aws.ToString(localaws.CreateTable(t, db, keys.PKSKTable(localaws.UniqueName(t, "state"))).TableName)
	ctx := context.Background()
	for tbl, status := range map[string]string{v1: loans.StatusOpen, v2: loans.StatusReturned} {
		if err := shelf.New(db, tbl, state).Repair(ctx, "t1", loans.Entity, "l1", 1,
			map[string]any{loans.AttrID: "l1", loans.AttrBook: "Dune", loans.AttrStatus: status}); err != nil {
			t.Fatal(err)
		}
	}
	onShelf := func(r *shelf.Reader) bool {
		t.Helper()
		row, ok, err := r.Get(ctx, "t1", "l1")
		if err != nil || !ok {
			t.Fatalf("reader: %+v, %v, %v", row, ok, err)
		}
		return row.OnShelf
	}
	tables := map[string]string{"v1": v1, "v2": v2}
	if onShelf(shelf.NewReader(db, state, "v1", tables)) {
		t.Fatal("before the switch: read v2's row; want v1's (on loan)")
	}
	r := shelf.NewReader(db, state, "v1", tables)
	if err := r.Versions.Active.Switch(ctx, "v1", "v2"); err != nil {
		t.Fatal(err)
	}
	if !onShelf(shelf.NewReader(db, state, "v1", tables)) {
		t.Error("after the switch: read v1's row; want v2's (on the shelf)")
	}
	if _, _, err := shelf.NewReader(db, state, "v1", map[string]string{"v1": v1}).Get(ctx, "t1", "l1"); err == nil || !strings.Contains(err.Error(), `"v2"`) {
		t.Errorf("a reader without the active version's table: %v; want an error naming v2", err)
	}
}
