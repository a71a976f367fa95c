package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/fourlanes/fourlanes/pkg/obs"
)

// RebuildOptions configures Rebuild.
type RebuildOptions struct {
	Source Source
	// Shadow is where the new projection is built: a new, empty table
	// (a Table with its own Table and Name, so its parks stay apart).
	Shadow Store
	// Cursors saves where the rebuild stopped; required, since a rebuild
	// outlasts one run.
	Cursors Cursors
	// Switch is called once the shadow has caught up (say, to point the
	// readers and the Projector at it); the rebuild is done when it returns
	// nil. Nil: nothing to switch (the caller does it).
	Switch func(ctx context.Context) error
	// PageSize and Pages as for CompareOptions.
	PageSize int
	Pages    int
}

// RebuildReport is where a rebuild stands.
type RebuildReport struct {
	Phase    string         // "scan", "catchup", "switch" or "done"
	Applied  int            // source entities applied to the shadow so far
	CaughtUp map[string]int // rows the catch-up repaired, by fault
	Done     bool
}

const (
	kindRebuild        = "rebuild"
	phaseScan          = "scan"
	phaseCatchUp       = "catchup"
	phaseSwitch        = "switch"
	phaseDone          = "done"
	countApplied       = "applied"
	shadowSuffix       = "~shadow"
	defaultRebuildPage = 100
)

// Rebuild builds the projection again from its source into Shadow, in
// runs that each resume where the last stopped:
//
//  1. scan: every entity of the source is applied to the shadow at its
//     current version (the cursor is saved after each page);
//  2. catch up: while the scan runs, the Projector applies live changes to
//     the shadow as well (set Projector.Shadow before the first run);
//     a compare of the shadow against the source then repairs whatever
//     changed before that was in place;
//  3. switch: Switch is called; the rebuild is done.
//
// An interrupted rebuild resumed produces the same rows as one that ran
// straight through: each step applies by version and is idempotent.
func (p *Projector) Rebuild(ctx context.Context, o RebuildOptions) (RebuildReport, error) {
	switch {
	case o.Source == nil:
		return RebuildReport{}, fmt.Errorf("%s: rebuild: RebuildOptions.Source is required", p.Name)
	case o.Shadow == nil:
		return RebuildReport{}, fmt.Errorf("%s: rebuild: RebuildOptions.Shadow is required (an empty table to build into)", p.Name)
	case o.Cursors == nil:
		return RebuildReport{}, fmt.Errorf("%s: rebuild: RebuildOptions.Cursors is required (a rebuild resumes across runs)", p.Name)
	}
	if o.PageSize <= 0 {
		o.PageSize = defaultRebuildPage
	}
	prog, ok, err := o.Cursors.Load(ctx, p.Name, kindRebuild)
	if err != nil {
		return RebuildReport{}, fmt.Errorf("%s: rebuild: %w", p.Name, err)
	}
	if !ok {
		prog = Progress{Phase: phaseScan, Started: p.now(), Counts: map[string]int{}}
	}
	if prog.Counts == nil {
		prog.Counts = map[string]int{}
	}
	shadow := *p
	shadow.Name, shadow.Store, shadow.Shadow = p.Name+shadowSuffix, o.Shadow, nil
	rep := func() RebuildReport {
		r := RebuildReport{Phase: prog.Phase, Applied: prog.Counts[countApplied], Done: prog.Phase == phaseDone, CaughtUp: map[string]int{}}
		for _, f := range []string{FaultMissing, FaultBehind, FaultDivergent, FaultOrphaned} {
			if n := prog.Counts[f]; n > 0 {
				r.CaughtUp[f] = n
			}
		}
		return r
	}
	save := func() error {
		if err := o.Cursors.Save(ctx, p.Name, kindRebuild, prog); err != nil {
			return fmt.Errorf("%s: rebuild: %w", p.Name, err)
		}
		return nil
	}
	for pages := 0; prog.Phase != phaseDone; {
		if o.Pages > 0 && pages >= o.Pages || nearDeadline(ctx) {
			p.logRebuild(ctx, rep())
			return rep(), save()
		}
		switch prog.Phase {
		case phaseScan:
			pages++
			es, next, err := o.Source.Scan(ctx, prog.Cursor, o.PageSize)
			if err != nil {
				return rep(), errors.Join(fmt.Errorf("%s: rebuild: %w", p.Name, err), save())
			}
			for _, e := range es {
				if p.Entity != "" && e.Change.Entity != p.Entity {
					continue
				}
				if _, err := shadow.repair(ctx, e.Tenant, e.Change); err != nil {
					return rep(), errors.Join(fmt.Errorf("%s: rebuild: %w", p.Name, err), save())
				}
				prog.Counts[countApplied]++
			}
			prog.Cursor = next
			if next == "" {
				prog.Phase = phaseCatchUp
			}
			if err := save(); err != nil {
				return rep(), err
			}
		case phaseCatchUp:
			pages++
			c, err := shadow.Compare(ctx, CompareOptions{Source: o.Source, Cursors: o.Cursors, PageSize: o.PageSize, Pages: 1})
			if err != nil {
				return rep(), errors.Join(fmt.Errorf("%s: rebuild: catch up: %w", p.Name, err), save())
			}
			if c.Done {
				for f, n := range c.Repaired {
					prog.Counts[f] = n
				}
				prog.Phase = phaseSwitch
				if err := save(); err != nil {
					return rep(), err
				}
			}
		case phaseSwitch:
			if o.Switch != nil {
				if err := o.Switch(ctx); err != nil {
					return rep(), fmt.Errorf("%s: rebuild: switch: %w", p.Name, err)
				}
			}
			prog.Phase = phaseDone
			if err := o.Cursors.Clear(ctx, p.Name, kindRebuild); err != nil {
				return rep(), fmt.Errorf("%s: rebuild: %w", p.Name, err)
			}
		default:
			return rep(), fmt.Errorf("%s: rebuild: saved phase %q: %w", p.Name, prog.Phase, ErrBadCursor)
		}
	}
	p.logRebuild(ctx, rep())
	return rep(), nil
}

func (p *Projector) logRebuild(ctx context.Context, r RebuildReport) {
	p.log().InfoContext(ctx, "projection rebuild", slog.String(obs.KeyProjection, p.Name), slog.String(obs.KeyPhase, r.Phase),
		slog.Int(obs.KeyApplied, r.Applied), slog.Any(obs.KeyCaughtUp, r.CaughtUp), slog.Bool(obs.KeyDone, r.Done))
}
