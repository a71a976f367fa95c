package projection_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/projection"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// LoanChangedV1 is the payload of loan.changed: a loan at a version (a
// return deletes it from the shelf).
type LoanChangedV1 struct {
	ID       string `json:"loan_id"`
	Version  int64  `json:"version"`
	Status   string `json:"status"`
	Returned bool   `json:"returned,omitempty"`
}

const typeLoanChanged = "loan.changed"

// loanChanges is the shelf's FromEvent: a loan.changed event is one change
// of the LOAN entity.
func loanChanges(e envelope.Envelope) ([]projection.Change, error) {
	if e.Type != typeLoanChanged {
		return nil, nil
	}
	var p LoanChangedV1
	if err := e.DecodePayload(&p); err != nil {
		return nil, err
	}
	c := projection.Change{Entity: "LOAN", ID: p.ID, Version: p.Version, Deleted: p.Returned}
	if !p.Returned {
		c.Item = map[string]any{"status": p.Status}
	}
	return []projection.Change{c}, nil
}

// loanLog is an event log over our DynamoDB with loan.changed events of
// three tenants: 9 loans, each written at versions 1..4, some returned.
func loanLog(t *testing.T) *eventstore.Store {
	t.Helper()
	db := localaws.DynamoDB(t)
	cat, err := catalog.New(catalog.Module[catalog.NoHandlers]{Name: "loan",
		Emits: []catalog.EventType{{Name: typeLoanChanged, Versions: []catalog.Version{catalog.V[LoanChangedV1](1)}}}}.Spec())
	if err != nil {
		t.Fatal(err)
	}
	tbl := aws.ToString(localaws.CreateTable(t, db, eventstore.TableSchema(localaws.UniqueName(t, "events"))).TableName)
	log, err := eventstore.New(db, eventstore.Config{Table: tbl, Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 4; v++ {
		for i, tenant := range []string{"t0", "t1", "t2", "t0", "t1", "t2", "t0", "t1", "t2"} {
			p := LoanChangedV1{ID: "l" + string(rune('a'+i)), Version: v, Status: []string{"open", "renewed", "late", "open"}[v-1], Returned: v == 4 && i%3 == 0}
			if _, err := log.Emit(tenancy.MustWithTenant(context.Background(), tenant), typeLoanChanged, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	return log
}

// flakyLog fails the Events call numbered failAt (1-based), once.
type flakyLog struct {
	projection.Log
	calls, failAt atomic.Int32
}

func (f *flakyLog) Events(ctx context.Context, tenant string, after int64, limit int32) (eventstore.Page, error) {
	if n := f.calls.Add(1); n == f.failAt.Load() {
		return eventstore.Page{}, errors.New("injected: connection reset reading the log")
	}
	return f.Log.Events(ctx, tenant, after, limit)
}

// TestRebuildFromTheLog: a rebuild replays every tenant's events from the
// event log by seq into a shadow, one page per run, each run by a new
// Projector; a run that fails mid-replay is loud (an ERROR line, the
// ProjRunFailed metric, the error) and leaves the readers on the old
// version; resumed from its saved cursor it ends with the same rows as a
// rebuild that ran straight through. The readers follow the active-version
// pointer: they read the old version until the switch, and the new one
// within their cache period after it; the old table is left for a rollback,
// which is a switch back.
func TestRebuildFromTheLog(t *testing.T) {
	ctx := context.Background()
	log := loanLog(t)
	db := localaws.DynamoDB(t)
	state := table(t, db, "state")
	store := func(name string) *projection.Table {
		return &projection.Table{DB: db, Table: table(t, db, name), StateTable: state, Entity: "LOAN", Name: name}
	}
	v1, straight, v2 := store("shelf-v1"), store("shelf-straight"), store("shelf-v2")
	// v1 is what the readers read today: built by an older, wrong FromEvent.
	if err := (&projection.Projector{Name: "shelf", Entity: "LOAN", Store: v1, Logger: quiet}).Apply(tenancy.MustWithTenant(ctx, "t0"), "t0",
		projection.Change{Entity: "LOAN", ID: "la", Version: 1, Item: map[string]any{"status": "from v1"}}); err != nil {
		t.Fatal(err)
	}
	cursors := &projection.StateCursors{DB: db, Table: state}

	// Straight through, into its own table, switching nothing.
	if rep, err := (&projection.Projector{Name: "straight", Entity: "LOAN", Store: straight, Logger: quiet}).Rebuild(ctx,
		projection.RebuildOptions{Log: log, FromEvent: loanChanges, Shadow: straight, Cursors: cursors, PageSize: 5}); err != nil || !rep.Done || rep.Applied != 36 {
		t.Fatalf("straight rebuild: %+v, %v; want done with 36 changes applied", rep, err)
	}

	now := time.Now()
	clock := func() time.Time { return now }
	active := func() *projection.Active {
		return &projection.Active{DB: db, Table: state, Projection: "shelf", Default: "v1", CacheFor: time.Minute, Now: clock}
	}
	reader := &projection.Versions{Active: active(), Stores: map[string]projection.Store{"v1": v1, "v2": v2}}
	read := func(r *projection.Versions) string {
		t.Helper()
		row, ok, err := r.Get(ctx, "t0", "LOAN", "la")
		if err != nil || !ok {
			t.Fatalf("reader: %+v, %v, %v", row, ok, err)
		}
		if row.Deleted {
			return "returned"
		}
		return row.Item["status"].(string)
	}
	if got := read(reader); got != "from v1" {
		t.Fatalf("reader before the rebuild: %q; want v1's row", got)
	}

	logs, metrics := &bytes.Buffer{}, &bytes.Buffer{}
	flaky := &flakyLog{Log: log}
	flaky.failAt.Store(4)
	opts := projection.RebuildOptions{Log: flaky, FromEvent: loanChanges, Shadow: v2, Cursors: cursors, PageSize: 5, Pages: 1,
		Active: active(), From: "v1", To: "v2"}
	var rep projection.RebuildReport
	failed, runs := 0, 0
	for ; runs < 100 && !rep.Done; runs++ {
		p := &projection.Projector{Name: "shelf", Entity: "LOAN", Store: v1, Shadow: v2, Logger: obs.NewLogger(logs, "info"), Metrics: obs.NewMetrics(metrics)}
		var err error
		rep, err = p.Rebuild(ctx, opts)
		if err != nil {
			failed++
			if !strings.Contains(err.Error(), "injected") {
				t.Fatalf("run %d: %v; want the injected failure", runs, err)
			}
			if !strings.Contains(logs.String(), `"level":"ERROR","msg":"projection rebuild failed`) || !strings.Contains(metrics.String(), keys.MetricProjRunFailed) {
				t.Errorf("a failed run is not loud: want an ERROR line and %s", keys.MetricProjRunFailed)
			}
			fresh := &projection.Versions{Active: active(), Stores: reader.Stores}
			if got := read(fresh); got != "from v1" {
				t.Errorf("a reader after the failed run: %q; want v1's row", got)
			}
		}
		if !rep.Done {
			if got := read(reader); got != "from v1" {
				t.Fatalf("reader during the rebuild (run %d): %q; want v1's row", runs, got)
			}
		}
	}
	if !rep.Done || failed != 1 || runs < 10 {
		t.Fatalf("rebuild: %+v after %d runs (%d failed); want done after many one-page runs, one failed", rep, runs, failed)
	}
	if diff := cmp.Diff(allRows(t, straight), allRows(t, v2)); diff != "" {
		t.Errorf("interrupted and resumed rebuild differs from the straight one (-straight +resumed):\n%s", diff)
	}
	if got := read(reader); got != "from v1" {
		t.Errorf("a reader that read just before the switch: %q; want v1's row until its cache expires", got)
	}
	now = now.Add(time.Minute)
	if got := read(reader); got != "returned" {
		t.Errorf("reader after the switch: %q; want v2's row (la returned at version 4)", got)
	}
	if r, ok, err := v1.Get(ctx, "t0", "LOAN", "la"); err != nil || !ok || r.Item["status"] != "from v1" {
		t.Errorf("v1 after the switch: %+v, %v, %v; want it left as it was, for a rollback", r, ok, err)
	}
	if err := active().Switch(ctx, "v1", "v2"); err != nil {
		t.Errorf("switching to the active version again: %v; want a no-op", err)
	}
	if err := active().Switch(ctx, "v2", "v1"); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if got := read(&projection.Versions{Active: active(), Stores: reader.Stores}); got != "from v1" {
		t.Errorf("reader after the rollback: %q; want v1's row", got)
	}
	if err := active().Switch(ctx, "v2", "v3"); !errors.Is(err, projection.ErrSwitchRaced) {
		t.Errorf("a switch from a version that is not active: %v; want ErrSwitchRaced", err)
	}
}

// TestRebuildFromTheLogStopsAtAnEventItCannotProject: FromEvent refusing
// an event stops the replay there, loudly, naming the tenant and seq; the
// cursor keeps its place (the next run stops there again, nothing skipped)
// and the switch never happens.
func TestRebuildFromTheLogStopsAtAnEventItCannotProject(t *testing.T) {
	ctx := context.Background()
	log := loanLog(t)
	db := localaws.DynamoDB(t)
	state := table(t, db, "state")
	v1 := &projection.Table{DB: db, Table: table(t, db, "v1"), StateTable: state, Entity: "LOAN", Name: "v1"}
	v2 := &projection.Table{DB: db, Table: table(t, db, "v2"), StateTable: state, Entity: "LOAN", Name: "v2"}
	active := &projection.Active{DB: db, Table: state, Projection: "shelf", Default: "v1"}
	refuse := func(e envelope.Envelope) ([]projection.Change, error) {
		if e.TenantID == "t1" && e.Seq == 7 {
			return nil, errors.New("status \"lost\" is not a shelf status")
		}
		return loanChanges(e)
	}
	logs, metrics := &bytes.Buffer{}, &bytes.Buffer{}
	p := &projection.Projector{Name: "shelf", Entity: "LOAN", Store: v1, Shadow: v2, Logger: obs.NewLogger(logs, "info"), Metrics: obs.NewMetrics(metrics)}
	opts := projection.RebuildOptions{Log: log, FromEvent: refuse, Shadow: v2, Cursors: &projection.StateCursors{DB: db, Table: state}, PageSize: 5,
		Active: active, From: "v1", To: "v2"}
	for run := range 2 {
		rep, err := p.Rebuild(ctx, opts)
		if err == nil || rep.Done || !strings.Contains(err.Error(), "replay tenant t1 seq 7") || !strings.Contains(err.Error(), `"lost"`) {
			t.Fatalf("run %d: %+v, %v; want a failure naming tenant t1, seq 7 and why", run, rep, err)
		}
		if v, err := active.Read(ctx); err != nil || v != "v1" {
			t.Errorf("run %d: active version %q, %v; want v1", run, v, err)
		}
	}
	if n := strings.Count(logs.String(), `"msg":"projection rebuild failed`); n != 2 || !strings.Contains(metrics.String(), keys.MetricProjRunFailed) {
		t.Errorf("%d ERROR lines, metrics %s; want 2 lines and %s", n, metrics, keys.MetricProjRunFailed)
	}
}
