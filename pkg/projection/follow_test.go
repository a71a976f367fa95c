package projection_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/projection"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// TestFollowReadsTheActiveVersion: a reader made by Table.Follow reads the
// version named current until the pointer switches, then the new one (a
// reader made after the switch, past any cache), each table read with the
// keys of the Table it was made from; a reader deployed without the active
// version's table fails every read naming the version.
func TestFollowReadsTheActiveVersion(t *testing.T) {
	ctx := context.Background()
	db := localaws.DynamoDB(t)
	state := table(t, db, "state")
	base := &projection.Table{DB: db, StateTable: state, Entity: "LOAN", Name: "shelf"}
	tables := map[string]string{"v1": table(t, db, "shelf-v1"), "v2": table(t, db, "shelf-v2")}
	for version, tbl := range tables {
		st := *base
		st.Table = tbl
		if err := (&projection.Projector{Name: "shelf", Entity: "LOAN", Store: &st, Logger: quiet}).Apply(tenancy.MustWithTenant(ctx, "t0"), "t0",
			projection.Change{Entity: "LOAN", ID: "la", Version: 1, Item: map[string]any{"from": version}}); err != nil {
			t.Fatal(err)
		}
	}
	read := func(r *projection.Versions) any {
		t.Helper()
		row, ok, err := r.Get(ctx, "t0", "LOAN", "la")
		if err != nil || !ok {
			t.Fatalf("reader: %+v, %v, %v", row, ok, err)
		}
		return row.Item["from"]
	}
	if got := read(base.Follow("v1", tables)); got != "v1" {
		t.Fatalf("before any switch: read %v's row, want v1's", got)
	}
	if err := base.Follow("v1", tables).Active.Switch(ctx, "v1", "v2"); err != nil {
		t.Fatal(err)
	}
	if got := read(base.Follow("v1", tables)); got != "v2" {
		t.Fatalf("after the switch: read %v's row, want v2's", got)
	}
	if _, _, err := base.Follow("v1", map[string]string{"v1": tables["v1"]}).Get(ctx, "t0", "LOAN", "la"); err == nil || !strings.Contains(err.Error(), `"v2"`) {
		t.Errorf("a reader without the active version's table: %v; want an error naming v2", err)
	}
}
