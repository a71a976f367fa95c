package projection_test

import (
	"context"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/projection"
)

// TestMaintenanceSweepsAndCompares: what dlq-repair runs after each of its
// runs closes a parked gap and repairs a missing row from the tracked table.
func TestMaintenanceSweepsAndCompares(t *testing.T) {
	rg := newLoanRig(t)
	ctx := context.Background()
	putLoan(t, rg.db, rg.loans, "t1", "l1", 2, "returned")
	putLoan(t, rg.db, rg.loans, "t1", "l2", 1, "open")
	// l1's v1 was lost: its v2 is parked. l2 never reached the projection.
	if err := rg.p.Apply(ctx, "t1", projection.Change{Entity: "LOAN", ID: "l1", Version: 2, Item: map[string]any{"status": "returned"}}); err != nil {
		t.Fatal(err)
	}
	m := projection.NewMaintenance(rg.db, rg.store.StateTable, map[string]catalog.Entity{rg.loans: loanEntity},
		[]any{rg.p, struct{}{}}, rg.p.Logger, rg.p.Metrics)
	if len(m.Projections) != 1 {
		t.Fatalf("found %d projections among the receivers, want 1", len(m.Projections))
	}
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"l1": "returned@2", "l2": "open@1"} {
		if got := rg.row(t, "t1", id); got != want {
			t.Errorf("%s after upkeep: %s, want %s", id, got, want)
		}
	}
	if ps, _, _ := rg.store.Parks(ctx, "", 100); len(ps) != 0 {
		t.Errorf("parks left: %+v", ps)
	}
}

func TestMaintenanceFailureIsLoud(t *testing.T) {
	rg := newLoanRig(t)
	m := projection.NewMaintenance(rg.db, rg.store.StateTable, map[string]catalog.Entity{"no-such-table": loanEntity},
		[]any{rg.p}, rg.p.Logger, rg.p.Metrics)
	err := m.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "shelf: compare") {
		t.Fatalf("got %v, want the compare's failure", err)
	}
	if !strings.Contains(rg.logs.String(), `"msg":"projection compare failed; the next run retries"`) {
		t.Errorf("no ERROR line:\n%s", rg.logs.String())
	}
	if !strings.Contains(rg.metrics.String(), keys.MetricProjRunFailed) {
		t.Errorf("no %s count", keys.MetricProjRunFailed)
	}
}
