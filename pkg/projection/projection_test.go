package projection_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/projection"
)

func TestMain(m *testing.M) { localaws.Main(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func table(t *testing.T, db *dynamodb.Client, prefix string) string {
	t.Helper()
	return aws.ToString(localaws.CreateTable(t, db, keys.PKSKTable(localaws.UniqueName(t, prefix))).TableName)
}

// newTable is a Table store over fresh tables in the local DynamoDB.
func newTable(t *testing.T, name string) *projection.Table {
	t.Helper()
	db := localaws.DynamoDB(t)
	return &projection.Table{DB: db, Table: table(t, db, "proj"), StateTable: table(t, db, "state"), Name: name}
}

// stores runs f against the in-memory store and the DynamoDB store.
func stores(t *testing.T, f func(t *testing.T, newStore func(t *testing.T) projection.Store)) {
	t.Run("memory", func(t *testing.T) { f(t, func(*testing.T) projection.Store { return projection.NewMemory() }) })
	t.Run("dynamodb", func(t *testing.T) {
		f(t, func(t *testing.T) projection.Store { return newTable(t, "orders") })
	})
}

func write(id string, v int64) projection.Change {
	return projection.Change{Entity: "ORDER", ID: id, Version: v, Item: map[string]any{"order_id": id, "status": fmt.Sprintf("v%d", v)}}
}

func del(id string, v int64) projection.Change {
	return projection.Change{Entity: "ORDER", ID: id, Version: v, Deleted: true}
}

func state(t *testing.T, st projection.Store, id string) string {
	t.Helper()
	r, ok, err := st.Get(context.Background(), "t1", "ORDER", id)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case !ok:
		return "absent"
	case r.Deleted:
		return fmt.Sprintf("tombstone@%d", r.Version)
	}
	return fmt.Sprintf("%v@%d", r.Item["status"], r.Version)
}

func projector(st projection.Store) *projection.Projector {
	return &projection.Projector{Name: "orders", Store: st, Logger: quiet, Metrics: obs.NewMetrics(io.Discard)}
}

func TestAppliesByVersion(t *testing.T) {
	type step struct {
		c    projection.Change
		want string
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"in order", []step{{write("o", 1), "v1@1"}, {write("o", 2), "v2@2"}, {write("o", 3), "v3@3"}}},
		{"duplicate and old skipped", []step{{write("o", 1), "v1@1"}, {write("o", 2), "v2@2"}, {write("o", 2), "v2@2"}, {write("o", 1), "v2@2"}}},
		{"early one parked until the gap closes", []step{{write("o", 1), "v1@1"}, {write("o", 3), "v1@1"}, {write("o", 4), "v1@1"}, {write("o", 2), "v4@4"}}},
		{"first write late", []step{{write("o", 2), "absent"}, {write("o", 1), "v2@2"}}},
		{"tombstone blocks a late write", []step{{write("o", 1), "v1@1"}, {del("o", 2), "tombstone@2"}, {write("o", 2), "tombstone@2"}, {write("o", 1), "tombstone@2"}}},
		{"delete before its writes", []step{{del("o", 3), "tombstone@3"}, {write("o", 1), "tombstone@3"}, {write("o", 3), "tombstone@3"}}},
		{"delete replaces a row of its own version", []step{{write("o", 1), "v1@1"}, {del("o", 1), "tombstone@1"}, {del("o", 1), "tombstone@1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stores(t, func(t *testing.T, newStore func(t *testing.T) projection.Store) {
				st := newStore(t)
				p := projector(st)
				for i, s := range tc.steps {
					if err := p.Apply(context.Background(), "t1", s.c); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if got := state(t, st, "o"); got != s.want {
						t.Fatalf("after step %d (%+v): got %s, want %s", i, s.c, got, s.want)
					}
				}
			})
		})
	}
}

// TestConvergesUnderShuffledConcurrentDelivery: versions 1..N and a delete,
// each delivered twice, in random order, from several goroutines.
func TestConvergesUnderShuffledConcurrentDelivery(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) projection.Store) {
		st := newStore(t)
		p := projector(st)
		const n = 12
		var cs []projection.Change
		for v := int64(1); v <= n; v++ {
			cs = append(cs, write("a", v), write("a", v), write("b", v), write("b", v))
		}
		cs = append(cs, del("b", n), del("b", n))
		rand.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
		var wg sync.WaitGroup
		ch := make(chan projection.Change)
		for range 4 {
			wg.Go(func() {
				for c := range ch {
					if err := p.Apply(context.Background(), "t1", c); err != nil {
						t.Error(err)
					}
				}
			})
		}
		for _, c := range cs {
			ch <- c
		}
		close(ch)
		wg.Wait()
		if got, want := state(t, st, "a"), fmt.Sprintf("v%d@%d", n, n); got != want {
			t.Errorf("a after shuffled delivery: got %s, want %s", got, want)
		}
		if got, want := state(t, st, "b"), fmt.Sprintf("tombstone@%d", n); got != want {
			t.Errorf("b after shuffled delivery: got %s, want %s", got, want)
		}
	})
}

func TestOnChangeReadsChangeEvents(t *testing.T) {
	st := projection.NewMemory()
	p := projector(st)
	ev := func(c catalog.ChangeV1, deleted bool) envelope.Envelope {
		pl, err := envelope.NormalizePayload(c)
		if err != nil {
			t.Fatal(err)
		}
		return envelope.Envelope{ID: "e", Type: catalog.ChangeType("ORDER", deleted), TenantID: "t1", SchemaVersion: 1, Payload: pl}
	}
	if err := p.OnChange(context.Background(), ev(catalog.ChangeV1{Entity: "ORDER", ID: "o", Version: 1, Item: map[string]any{"status": "v1"}}, false)); err != nil {
		t.Fatal(err)
	}
	if err := p.OnChange(context.Background(), ev(catalog.ChangeV1{Entity: "ORDER", ID: "o", Version: 1, Item: map[string]any{"status": "v1"}}, true)); err != nil {
		t.Fatal(err)
	}
	if got := state(t, st, "o"); got != "tombstone@1" {
		t.Errorf("after write and delete events: got %s, want tombstone@1", got)
	}
}

// TestBadChangeIsRefusedAndNothingWritten: each refusal names what is wrong.
func TestBadChangeIsRefusedAndNothingWritten(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    projection.Change
		want string
	}{
		{"no id", projection.Change{Entity: "LOAN", Version: 1}, "has no id"},
		{"version 0", projection.Change{Entity: "LOAN", ID: "x", Version: 0}, "version 0, want 1 or more"},
		{"other entity", projection.Change{Entity: "BOOK", ID: "x", Version: 1}, "change of BOOK, want LOAN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := projection.NewMemory()
			p := &projection.Projector{Name: "shelf", Store: st, Entity: "LOAN", Logger: quiet}
			err := p.Apply(context.Background(), "t1", tc.c)
			if !errors.Is(err, projection.ErrBadChange) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrBadChange saying %q", err, tc.want)
			}
			if rows, _, _ := st.Rows(context.Background(), "", 10); len(rows) != 0 {
				t.Errorf("rows written: %+v", rows)
			}
		})
	}
}

func TestShapeBuildsTheRow(t *testing.T) {
	st := newTable(t, "shelf")
	st.PK, st.SK, st.Entity = keys.AttrPK, keys.AttrSK, "LOAN"
	p := &projection.Projector{Name: "shelf", Store: st, Entity: "LOAN", Logger: quiet, Shape: func(item map[string]any) (map[string]any, error) {
		return map[string]any{"on_shelf": item["status"] == "returned"}, nil
	}}
	if err := p.Apply(context.Background(), "t1", projection.Change{Entity: "LOAN", ID: "l1", Version: 1, Item: map[string]any{"status": "returned", "member": "m"}}); err != nil {
		t.Fatal(err)
	}
	r, ok, err := st.Get(context.Background(), "t1", "LOAN", "l1")
	if err != nil || !ok || r.Item["on_shelf"] != true || len(r.Item) != 1 || r.Entity != "LOAN" || r.ID != "l1" {
		t.Errorf("row: %+v (found %v, %v), want the shaped document only", r, ok, err)
	}
	p.Shape = func(map[string]any) (map[string]any, error) { return nil, errors.New("no book") }
	if err := p.Apply(context.Background(), "t1", projection.Change{Entity: "LOAN", ID: "l1", Version: 2, Item: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "shape LOAN l1 v2: no book") {
		t.Errorf("a failing Shape: got %v, want its error", err)
	}
	if r, _, _ := st.Get(context.Background(), "t1", "LOAN", "l1"); r.Version != 1 {
		t.Errorf("after a failing Shape the row is at v%d, want v1", r.Version)
	}
}

func TestRepairClosesAPermanentGap(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) projection.Store) {
		st := newStore(t)
		p := projector(st)
		ctx := context.Background()
		for _, v := range []int64{1, 3, 4} { // version 2 was lost by the feed
			if err := p.Apply(ctx, "t1", write("o", v)); err != nil {
				t.Fatal(err)
			}
		}
		if got := state(t, st, "o"); got != "v1@1" {
			t.Fatalf("before repair: got %s, want v1@1", got)
		}
		if err := p.Repair(ctx, "t1", "ORDER", "o", 2, write("o", 2).Item); err != nil {
			t.Fatal(err)
		}
		if got := state(t, st, "o"); got != "v4@4" {
			t.Errorf("after repair: got %s, want v4@4 (parked 3 and 4 applied)", got)
		}
		if ps, _, _ := st.Parks(ctx, "", 100); len(ps) != 0 {
			t.Errorf("parks left after the gap closed: %+v", ps)
		}
	})
}

// TestADuplicateParkKeepsItsAge: a change delivered again while parked must
// not reset the age the park alarm measures.
func TestADuplicateParkKeepsItsAge(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) projection.Store) {
		st := newStore(t)
		now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		p := projector(st)
		p.Now = func() time.Time { return now }
		ctx := context.Background()
		if err := p.Apply(ctx, "t1", write("o", 3)); err != nil {
			t.Fatal(err)
		}
		now = now.Add(2 * time.Hour)
		if err := p.Apply(ctx, "t1", write("o", 3)); err != nil {
			t.Fatal(err)
		}
		pk, ok, err := st.Parked(ctx, "t1", "ORDER", "o", 3)
		if err != nil || !ok {
			t.Fatalf("parked v3: %v, %v", ok, err)
		}
		if want := now.Add(-2 * time.Hour); !pk.ParkedAt.Equal(want) || !pk.ExpiresAt.Equal(want.Add(7*24*time.Hour)) {
			t.Errorf("park: parked %v expires %v, want parked %v, expiring 7 days later", pk.ParkedAt, pk.ExpiresAt, want)
		}
		if pk.Change.Item["status"] != "v3" || pk.Tenant != "t1" {
			t.Errorf("parked change: %+v", pk)
		}
	})
}

// source is a Source over a map, for the sweep and compare tests.
type source struct {
	mu sync.Mutex
	m  map[string]projection.Entity
}

func (s *source) put(tenant string, c projection.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]projection.Entity{}
	}
	s.m[tenant+"/"+c.Entity+"/"+c.ID] = projection.Entity{Tenant: tenant, Change: c}
}

func (s *source) Get(_ context.Context, tenant, entity, id string) (projection.Change, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[tenant+"/"+entity+"/"+id]
	return e.Change, ok, nil
}

func (s *source) Scan(_ context.Context, cursor string, limit int) ([]projection.Entity, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := projection.NewMemory() // reuse Memory's paging order via rows
	for _, e := range s.m {
		m.Put(context.Background(), projection.Row{Tenant: e.Tenant, Entity: e.Change.Entity, ID: e.Change.ID, Version: e.Change.Version, Item: e.Change.Item}, 0, false)
	}
	rows, next, err := m.Rows(context.Background(), cursor, limit)
	es := make([]projection.Entity, len(rows))
	for i, r := range rows {
		es[i] = projection.Entity{Tenant: r.Tenant, Change: projection.Change{Entity: r.Entity, ID: r.ID, Version: r.Version, Item: r.Item}}
	}
	return es, next, err
}

var _ projection.Source = (*source)(nil)

// TestSweepReportsParksThatOutliveTheThreshold: the failure path of
// parking. A gap nothing closes is an ERROR line and a ProjParkAged count;
// one close to its TTL a ProjParkExpiring count; a superseded park is
// dropped; with a source the gap is closed instead.
func TestSweepReportsParksThatOutliveTheThreshold(t *testing.T) {
	stores(t, func(t *testing.T, newStore func(t *testing.T) projection.Store) {
		st := newStore(t)
		var logs, metrics bytes.Buffer
		t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		now := t0
		p := &projection.Projector{Name: "orders", Store: st, Logger: obs.NewLogger(&logs, "info"), Metrics: obs.NewMetrics(&metrics),
			Now: func() time.Time { return now }, ParkFor: 48 * time.Hour}
		ctx := context.Background()
		for _, c := range []projection.Change{write("old", 1), write("old", 3), write("gone", 2), write("moot", 2), write("fixable", 1), write("fixable", 4)} {
			if err := p.Apply(ctx, "t1", c); err != nil {
				t.Fatal(err)
			}
		}
		// moot's v2 is superseded by a tombstone at v5.
		if err := p.Apply(ctx, "t1", del("moot", 5)); err != nil {
			t.Fatal(err)
		}

		now = t0.Add(30 * time.Minute)
		rep, err := p.SweepParks(ctx, projection.SweepOptions{AgedAfter: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if want := (projection.SweepReport{Parks: 4, Dropped: 1}); rep != want {
			t.Errorf("sweep at 30 min: %+v, want %+v", rep, want)
		}
		if strings.Contains(metrics.String(), keys.MetricProjParkAged) {
			t.Errorf("ProjParkAged counted before any park outlived the threshold:\n%s", metrics.String())
		}

		now = t0.Add(30 * time.Hour) // past AgedAfter, within a day of the 48 h TTL
		rep, err = p.SweepParks(ctx, projection.SweepOptions{AgedAfter: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if want := (projection.SweepReport{Parks: 3, Aged: 3, Expiring: 3}); rep != want {
			t.Errorf("sweep at 30 h: %+v, want %+v", rep, want)
		}
		for _, s := range []string{`"level":"ERROR"`, "parked change outlived its threshold", "parked change about to expire unapplied", `"id":"old"`, `"version":3`} {
			if !strings.Contains(logs.String(), s) {
				t.Errorf("logs lack %s:\n%s", s, logs.String())
			}
		}
		for _, s := range []string{keys.MetricProjParkAged, keys.MetricProjParkExpiring, `"Projection":"orders"`} {
			if !strings.Contains(metrics.String(), s) {
				t.Errorf("metrics lack %s:\n%s", s, metrics.String())
			}
		}

		// With the source, every gap closes: "fixable" and "old" are read
		// at their current versions; "gone" is not in its table any more,
		// so its delete was lost too and a tombstone closes it.
		src := &source{}
		src.put("t1", write("fixable", 4))
		src.put("t1", write("old", 3))
		rep, err = p.SweepParks(ctx, projection.SweepOptions{AgedAfter: time.Hour, Source: src})
		if err != nil {
			t.Fatal(err)
		}
		if want := (projection.SweepReport{Parks: 3, Closed: 3}); rep != want {
			t.Errorf("sweep with the source: %+v, want %+v", rep, want)
		}
		for id, want := range map[string]string{"fixable": "v4@4", "old": "v3@3", "gone": "tombstone@2", "moot": "tombstone@5"} {
			if got := state(t, st, id); got != want {
				t.Errorf("%s after the sweep: %s, want %s", id, got, want)
			}
		}
		if ps, _, _ := st.Parks(ctx, "", 100); len(ps) != 0 {
			t.Errorf("parks left: %+v", ps)
		}
	})
}

func TestSweepFailsLoudlyWhenTheStateTableIsUnreachable(t *testing.T) {
	st := newTable(t, "orders")
	st.StateTable = "no-such-table"
	_, err := projector(st).SweepParks(context.Background(), projection.SweepOptions{})
	if err == nil || !strings.Contains(err.Error(), "orders: sweep parks") {
		t.Errorf("got %v, want the sweep to fail naming the projection", err)
	}
}

// TestSweepStopsAtTheDeadline: with less than the reserve left, the sweep
// stops and says so rather than run the function out of time.
func TestSweepStopsAtTheDeadline(t *testing.T) {
	var logs bytes.Buffer
	st := projection.NewMemory()
	p := &projection.Projector{Name: "orders", Store: st, Logger: obs.NewLogger(&logs, "info"), Metrics: obs.NewMetrics(io.Discard)}
	if err := p.Apply(context.Background(), "t1", write("o", 2)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rep, err := p.SweepParks(ctx, projection.SweepOptions{})
	if err != nil || rep.Parks != 0 || !strings.Contains(logs.String(), "park sweep stopped at the invocation's deadline") {
		t.Errorf("sweep near its deadline: %+v, %v; want it stopped, saying so:\n%s", rep, err, logs.String())
	}
}
