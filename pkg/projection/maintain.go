package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// Maintenance is the scheduled upkeep of an application's projections: for
// each, a park sweep and a share of a compare against its entity's table.
// dlq-repair runs it after each of its runs (hourly), so a gap nothing
// closes is reported within the hour, and every projection is compared
// with its table pass after pass.
type Maintenance struct {
	Projections []*Projector
	// Sources are the tracked tables, by entity name.
	Sources map[string]Source
	Cursors Cursors
	// ComparePages caps the pages of compare one run reads per projection
	// (default 20); the cursor carries the rest to the next run.
	ComparePages int
	Sweep        SweepOptions
	Logger       *slog.Logger
	Metrics      *obs.Metrics
}

// NewMaintenance finds the projections among an application's bound
// receivers (app.Bound.Reapplier values) and reads each one's entity from
// its tracked table (tables: table name to entity, as the change feed's
// environment gives them).
func NewMaintenance(db interface {
	DynamoDB
	SourceDB
}, stateTable string, tables map[string]catalog.Entity, receivers []any, logger *slog.Logger, metrics *obs.Metrics) *Maintenance {
	m := &Maintenance{Sources: map[string]Source{}, Cursors: &StateCursors{DB: db, Table: stateTable}, Logger: logger, Metrics: metrics}
	for table, ent := range tables {
		m.Sources[ent.Name] = &TableSource{DB: db, Table: table, Entity: ent}
	}
	for _, r := range receivers {
		if p, ok := r.(*Projector); ok {
			m.Projections = append(m.Projections, p)
		}
	}
	return m
}

// Run sweeps and compares every projection. A projection that fails does
// not stop the others; each failure is an ERROR line and a
// keys.MetricProjRunFailed count, and Run returns them all.
func (m *Maintenance) Run(ctx context.Context) error {
	log := m.Logger
	if log == nil {
		log = slog.Default()
	}
	pages := m.ComparePages
	if pages <= 0 {
		pages = 20
	}
	var errs []error
	fail := func(p *Projector, step string, err error) {
		errs = append(errs, err)
		m.Metrics.Count(keys.MetricProjRunFailed, 1, "Projection", p.Name)
		log.ErrorContext(ctx, "projection "+step+" failed; the next run retries", slog.String(obs.KeyProjection, p.Name), obs.Err(err))
	}
	for _, p := range m.Projections {
		src := m.Sources[p.Entity]
		sweep := m.Sweep
		sweep.Source = src
		if _, err := p.SweepParks(ctx, sweep); err != nil {
			fail(p, "park sweep", err)
		}
		if src == nil {
			log.WarnContext(ctx, "projection not compared: it names no tracked entity (Projector.Entity)", slog.String(obs.KeyProjection, p.Name))
			continue
		}
		if _, err := p.Compare(ctx, CompareOptions{Source: src, Cursors: m.Cursors, Pages: pages}); err != nil {
			fail(p, "compare", err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("projection upkeep: %w", errors.Join(errs...))
	}
	return nil
}
