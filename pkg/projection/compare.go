package projection

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// What a compare finds wrong with a row (CompareReport, the Fault
// dimension of keys.MetricProjRepaired, the fault log key).
const (
	FaultMissing   = "missing"   // the source has the entity, the projection has no row
	FaultBehind    = "behind"    // the row is at an older version than the source
	FaultDivergent = "divergent" // same version, another document (a row written outside the projection)
	FaultOrphaned  = "orphaned"  // a live row whose entity is gone from the source: its delete was lost
	FaultAhead     = "ahead"     // the row is newer than the source, or a tombstone of a live entity: not repaired
)

// CompareOptions configures Compare.
type CompareOptions struct {
	Source Source
	// Cursors saves where a compare stopped (nil: each run starts over).
	Cursors Cursors
	// PageSize is the items read per request (default 100).
	PageSize int
	// Pages caps the pages one run reads (0: until done or ctx ends); the
	// next run resumes from the saved cursor.
	Pages int
}

// CompareReport is what a compare pass found and repaired, summed over the
// runs of one pass.
type CompareReport struct {
	Checked  int            // source entities and projected rows compared
	Repaired map[string]int // by fault
	Ahead    int            // rows ahead of their source, left alone
	Done     bool           // the pass finished (false: the next run resumes)
}

const (
	kindCompare   = "compare"
	phaseSource   = "source" // every entity of the source against its row
	phaseRows     = "rows"   // every row against the source (orphans)
	countChecked  = "checked"
	countAhead    = "ahead"
	compareWindow = 10 * time.Second // kept back from ctx's deadline to save the cursor
)

// Compare checks the projection against its source and repairs what
// differs: missing and behind rows are applied from the source (parked
// successors follow), divergent ones rewritten, orphans tombstoned. A row
// ahead of its source is an ERROR line and a keys.MetricProjAhead count,
// never rewritten. Each repair is a WARN line; the pass ends with one line
// and a keys.MetricProjRepaired count per fault. A row a live change moves
// while the compare looks at it is left to that change.
func (p *Projector) Compare(ctx context.Context, o CompareOptions) (CompareReport, error) {
	if o.Source == nil {
		return CompareReport{}, fmt.Errorf("%s: compare: CompareOptions.Source is required", p.Name)
	}
	if o.PageSize <= 0 {
		o.PageSize = 100
	}
	prog := Progress{Phase: phaseSource, Started: p.now(), Counts: map[string]int{}}
	if o.Cursors != nil {
		saved, ok, err := o.Cursors.Load(ctx, p.Name, kindCompare)
		if err != nil {
			return CompareReport{}, fmt.Errorf("%s: compare: %w", p.Name, err)
		}
		if ok {
			prog = saved
			if prog.Counts == nil {
				prog.Counts = map[string]int{}
			}
		}
	}
	save := func() error {
		if o.Cursors == nil {
			return nil
		}
		if err := o.Cursors.Save(ctx, p.Name, kindCompare, prog); err != nil {
			return fmt.Errorf("%s: compare: %w", p.Name, err)
		}
		return nil
	}
	// An entity that cannot be compared (a row that does not decode, say)
	// is reported and passed over, so one bad row cannot stop every pass.
	var failed []error
	for pages := 0; ; pages++ {
		if o.Pages > 0 && pages >= o.Pages || nearDeadline(ctx) {
			return p.compareReport(ctx, prog, false), errors.Join(errors.Join(failed...), save())
		}
		var next string
		var errs []error
		var err error
		switch prog.Phase {
		case phaseSource:
			next, errs, err = p.compareSourcePage(ctx, o, &prog)
		case phaseRows:
			next, errs, err = p.compareRowsPage(ctx, o, &prog)
		default:
			return CompareReport{}, fmt.Errorf("%s: compare: saved phase %q: %w", p.Name, prog.Phase, ErrBadCursor)
		}
		if err != nil {
			// Keep the progress made: the next run starts from the page
			// that failed.
			return p.compareReport(ctx, prog, false), errors.Join(err, errors.Join(failed...), save())
		}
		failed = append(failed, errs...)
		prog.Cursor = next
		if next != "" {
			continue
		}
		if prog.Phase == phaseSource {
			prog.Phase = phaseRows
			continue
		}
		rep := p.compareReport(ctx, prog, true)
		if o.Cursors != nil {
			if err := o.Cursors.Clear(ctx, p.Name, kindCompare); err != nil {
				return rep, fmt.Errorf("%s: compare: %w", p.Name, err)
			}
		}
		return rep, errors.Join(failed...)
	}
}

func nearDeadline(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && time.Until(d) < compareWindow
}

func (p *Projector) compareReport(ctx context.Context, prog Progress, done bool) CompareReport {
	rep := CompareReport{Checked: prog.Counts[countChecked], Ahead: prog.Counts[countAhead], Done: done, Repaired: map[string]int{}}
	attrs := []any{slog.String(obs.KeyProjection, p.Name), slog.Bool(obs.KeyDone, done), slog.Int(obs.KeyChecked, rep.Checked), slog.Int(obs.KeyAhead, rep.Ahead)}
	for _, f := range []string{FaultMissing, FaultBehind, FaultDivergent, FaultOrphaned} {
		if n := prog.Counts[f]; n > 0 {
			rep.Repaired[f] = n
		}
	}
	// One key per fault, named as the fault is.
	attrs = append(attrs, slog.Int(obs.KeyMissing, prog.Counts[FaultMissing]), slog.Int(obs.KeyBehind, prog.Counts[FaultBehind]),
		slog.Int(obs.KeyDivergent, prog.Counts[FaultDivergent]), slog.Int(obs.KeyOrphaned, prog.Counts[FaultOrphaned]))
	p.log().InfoContext(ctx, "projection compared with its source", attrs...)
	return rep
}

func (p *Projector) compareSourcePage(ctx context.Context, o CompareOptions, prog *Progress) (string, []error, error) {
	es, next, err := o.Source.Scan(ctx, prog.Cursor, o.PageSize)
	if err != nil {
		return "", nil, fmt.Errorf("%s: compare: %w", p.Name, err)
	}
	var errs []error
	for _, e := range es {
		if p.Entity != "" && e.Change.Entity != p.Entity {
			continue
		}
		prog.Counts[countChecked]++
		if err := p.compareEntity(ctx, prog, e.Tenant, e.Change); err != nil {
			errs = append(errs, fmt.Errorf("%s: compare %s %s of %s: %w", p.Name, e.Change.Entity, e.Change.ID, e.Tenant, err))
		}
	}
	return next, errs, nil
}

func (p *Projector) compareEntity(ctx context.Context, prog *Progress, tenant string, src Change) error {
	cur, found, err := p.Store.Get(ctx, tenant, src.Entity, src.ID)
	if err != nil {
		return err
	}
	var fault string
	switch {
	case !found:
		fault = FaultMissing
	case cur.Version < src.Version:
		fault = FaultBehind
	case cur.Version > src.Version || cur.Deleted:
		p.ahead(ctx, prog, tenant, cur, src.Version)
		return nil
	default:
		want, err := p.row(tenant, src)
		if err != nil {
			return err
		}
		same, err := sameDoc(want.Item, cur.Item)
		if err != nil || same {
			return err
		}
		ok, err := p.Store.Put(ctx, want, cur.Version, true)
		if ok {
			p.repaired(ctx, prog, FaultDivergent, tenant, src, cur)
		}
		return err
	}
	wrote, err := p.repair(ctx, tenant, src)
	if wrote {
		p.repaired(ctx, prog, fault, tenant, src, cur)
	}
	return err
}

func (p *Projector) compareRowsPage(ctx context.Context, o CompareOptions, prog *Progress) (string, []error, error) {
	rows, next, err := p.Store.Rows(ctx, prog.Cursor, o.PageSize)
	var bad *BadRowError
	if err != nil && !errors.As(err, &bad) {
		return "", nil, fmt.Errorf("%s: compare: %w", p.Name, err)
	}
	var errs []error
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: compare: %w", p.Name, err))
	}
	for _, r := range rows {
		prog.Counts[countChecked]++
		if r.Deleted {
			continue
		}
		if err := p.compareRow(ctx, prog, o.Source, r); err != nil {
			errs = append(errs, fmt.Errorf("%s: compare %s %s of %s: %w", p.Name, r.Entity, r.ID, r.Tenant, err))
		}
	}
	return next, errs, nil
}

func (p *Projector) compareRow(ctx context.Context, prog *Progress, src Source, r Row) error {
	_, found, err := src.Get(ctx, r.Tenant, r.Entity, r.ID)
	if err != nil || found {
		return err // found: the source pass compared it
	}
	// Gone from the source: its delete was lost. A tombstone at the row's
	// version supersedes it (an id is never reused).
	ok, err := p.Store.Put(ctx, Row{Tenant: r.Tenant, Entity: r.Entity, ID: r.ID, Version: r.Version, Deleted: true}, r.Version, true)
	if ok {
		p.repaired(ctx, prog, FaultOrphaned, r.Tenant, Change{Entity: r.Entity, ID: r.ID, Version: r.Version, Deleted: true}, r)
	}
	return err
}

func (p *Projector) repaired(ctx context.Context, prog *Progress, fault, tenant string, src Change, cur Row) {
	prog.Counts[fault]++
	p.Metrics.Count(keys.MetricProjRepaired, 1, "Projection", p.Name, "Fault", fault)
	p.log().WarnContext(ctx, "projection row repaired from its source", slog.String(obs.KeyProjection, p.Name), slog.String(obs.KeyFault, fault),
		slog.String(obs.KeyTenant, tenant), slog.String(obs.KeyEntity, src.Entity), slog.String(obs.KeyID, src.ID),
		slog.Int64(obs.KeyVersion, src.Version), slog.Int64(obs.KeyProjected, cur.Version))
}

func (p *Projector) ahead(ctx context.Context, prog *Progress, tenant string, cur Row, srcVersion int64) {
	prog.Counts[countAhead]++
	p.Metrics.Count(keys.MetricProjAhead, 1, "Projection", p.Name)
	p.log().ErrorContext(ctx, "projection row is ahead of its source; left alone: check who writes the source or the projection table",
		slog.String(obs.KeyProjection, p.Name), slog.String(obs.KeyFault, FaultAhead), slog.String(obs.KeyTenant, tenant), slog.String(obs.KeyEntity, cur.Entity),
		slog.String(obs.KeyID, cur.ID), slog.Int64(obs.KeyProjected, cur.Version), slog.Bool(obs.KeyTombstone, cur.Deleted), slog.Int64(obs.KeySourceVersion, srcVersion))
}

// sameDoc compares two documents as JSON, numbers by their text.
func sameDoc(a, b map[string]any) (bool, error) {
	ja, err := canonical(a)
	if err != nil {
		return false, err
	}
	jb, err := canonical(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ja, jb), nil
}

func canonical(m map[string]any) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var v any
	if err := decodeJSON(string(b), &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
