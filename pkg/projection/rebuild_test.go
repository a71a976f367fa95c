package projection_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/pkg/projection"
)

func allRows(t *testing.T, st projection.Store) []projection.Row {
	t.Helper()
	var rows []projection.Row
	for cursor := ""; ; {
		rs, next, err := st.Rows(context.Background(), cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, rs...)
		if next == "" {
			break
		}
		cursor = next
	}
	slices.SortFunc(rows, func(a, b projection.Row) int { return strings.Compare(a.Tenant+"/"+a.ID, b.Tenant+"/"+b.ID) })
	return rows
}

// TestRebuildInterruptedAndResumedProducesTheSameProjection: a rebuild run
// one page at a time, by a new Projector each run (a restarted function),
// with live changes during it, ends with the same rows as a rebuild that
// ran straight through afterwards; Switch runs once, at the end.
func TestRebuildInterruptedAndResumedProducesTheSameProjection(t *testing.T) {
	rg := newLoanRig(t)
	ctx := context.Background()
	for i := range 23 {
		putLoan(t, rg.db, rg.loans, fmt.Sprintf("t%d", i%3), fmt.Sprintf("l%02d", i), int64(1+i%4), []string{"open", "returned"}[i%2])
	}
	shadow := func(name string) *projection.Table {
		return &projection.Table{DB: rg.db, Table: table(t, rg.db, name), StateTable: rg.store.StateTable, Entity: "LOAN", Name: name}
	}
	cursors := &projection.StateCursors{DB: rg.db, Table: rg.store.StateTable}
	resumed := shadow("resumed")
	switches := 0
	opts := projection.RebuildOptions{Source: rg.src, Shadow: resumed, Cursors: cursors, PageSize: 4, Pages: 1,
		Switch: func(context.Context) error { switches++; return nil }}
	fresh := func() *projection.Projector {
		return &projection.Projector{Name: "shelf", Entity: "LOAN", Store: rg.store, Shadow: resumed, Shape: shelfShape, Logger: quiet}
	}
	var rep projection.RebuildReport
	runs := 0
	for ; runs < 50 && !rep.Done; runs++ {
		var err error
		if rep, err = fresh().Rebuild(ctx, opts); err != nil {
			t.Fatal(err)
		}
		switch runs {
		case 2:
			// A live change during the scan reaches the shadow through
			// Projector.Shadow.
			putLoan(t, rg.db, rg.loans, "t0", "l00", 2, "returned")
			if err := fresh().Apply(ctx, "t0", projection.Change{Entity: "LOAN", ID: "l00", Version: 2, Item: map[string]any{"status": "returned"}}); err != nil {
				t.Fatal(err)
			}
		case 3:
			// One whose change event was lost: the catch-up compare
			// repairs it.
			putLoan(t, rg.db, rg.loans, "t1", "l01", 5, "open")
		}
	}
	if !rep.Done || switches != 1 {
		t.Fatalf("after %d runs: %+v, %d switches; want done, one switch", runs, rep, switches)
	}
	if runs < 6 || rep.Applied < 23 {
		t.Errorf("rebuild took %d runs applying %d entities; want one page (4) a run over 23 entities", runs, rep.Applied)
	}
	if rep.CaughtUp[projection.FaultBehind] != 1 {
		t.Errorf("catch-up repaired %v, want l01 behind", rep.CaughtUp)
	}
	if _, ok, _ := cursors.Load(ctx, "shelf", "rebuild"); ok {
		t.Error("a finished rebuild left its cursor")
	}

	straight := shadow("straight")
	r2, err := fresh().Rebuild(ctx, projection.RebuildOptions{Source: rg.src, Shadow: straight, Cursors: cursors})
	if err != nil || !r2.Done {
		t.Fatalf("straight rebuild: %+v, %v", r2, err)
	}
	got, want := allRows(t, resumed), allRows(t, straight)
	if len(want) != 23 {
		t.Fatalf("straight rebuild holds %d rows, want 23", len(want))
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("resumed rebuild differs from a straight one (-straight +resumed):\n%s", d)
	}
}

func TestRebuildRefusesMissingOptions(t *testing.T) {
	p := &projection.Projector{Name: "shelf", Store: projection.NewMemory(), Logger: quiet}
	for _, tc := range []struct {
		o    projection.RebuildOptions
		want string
	}{
		{projection.RebuildOptions{Shadow: projection.NewMemory(), Cursors: &projection.MemoryCursors{}}, "Source is required"},
		{projection.RebuildOptions{Source: &source{}, Cursors: &projection.MemoryCursors{}}, "Shadow is required"},
		{projection.RebuildOptions{Source: &source{}, Shadow: projection.NewMemory()}, "Cursors is required"},
		{projection.RebuildOptions{Source: &source{}, Log: &flakyLog{}, Shadow: projection.NewMemory(), Cursors: &projection.MemoryCursors{}}, "Source and Log are both set"},
		{projection.RebuildOptions{Log: &flakyLog{}, Shadow: projection.NewMemory(), Cursors: &projection.MemoryCursors{}}, "FromEvent is required"},
		{projection.RebuildOptions{Source: &source{}, Shadow: projection.NewMemory(), Cursors: &projection.MemoryCursors{}, Active: &projection.Active{}, From: "v1"},
			"From and To are required with Active"},
	} {
		if _, err := p.Rebuild(context.Background(), tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error saying %q", err, tc.want)
		}
	}
}

// TestRebuildKeepsItsPlaceWhenASwitchFails: the switch is retried by the
// next run, not the scan.
func TestRebuildKeepsItsPlaceWhenASwitchFails(t *testing.T) {
	src := &source{}
	for i := range 5 {
		src.put("t1", projection.Change{Entity: "LOAN", ID: fmt.Sprintf("l%d", i), Version: 1, Item: map[string]any{"status": "open"}})
	}
	cursors := &projection.MemoryCursors{}
	p := &projection.Projector{Name: "shelf", Store: projection.NewMemory(), Logger: quiet}
	fail := true
	o := projection.RebuildOptions{Source: src, Shadow: projection.NewMemory(), Cursors: cursors, PageSize: 2,
		Switch: func(context.Context) error {
			if fail {
				return fmt.Errorf("readers not reachable")
			}
			return nil
		}}
	if _, err := p.Rebuild(context.Background(), o); err == nil || !strings.Contains(err.Error(), "switch: readers not reachable") {
		t.Fatalf("got %v, want the switch's error", err)
	}
	fail = false
	rep, err := p.Rebuild(context.Background(), o)
	if err != nil || !rep.Done || rep.Applied != 5 {
		t.Errorf("after the switch is fixed: %+v, %v; want done with the 5 entities applied once", rep, err)
	}
}

// TestRepairReachesTheShadow: dlq-repair's re-reads during a rebuild reach
// the shadow too.
func TestRepairReachesTheShadow(t *testing.T) {
	live, shadow := projection.NewMemory(), projection.NewMemory()
	p := &projection.Projector{Name: "shelf", Store: live, Shadow: shadow, Logger: quiet}
	if err := p.Repair(context.Background(), "t1", "LOAN", "l1", 3, map[string]any{"status": "open"}); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]projection.Store{"live": live, "shadow": shadow} {
		if r, ok, _ := st.Get(context.Background(), "t1", "LOAN", "l1"); !ok || r.Version != 3 {
			t.Errorf("%s after Repair: %+v (found %v), want v3", name, r, ok)
		}
	}
}
