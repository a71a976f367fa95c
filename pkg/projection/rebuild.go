package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// RebuildOptions configures Rebuild.
type RebuildOptions struct {
	// Source is a table scan to build from; or Log and FromEvent, the
	// event log (exactly one of them).
	Source Source
	// Log is the event log (an *eventstore.Store): each tenant's events in
	// seq order, through the read path export uses. FromEvent turns an
	// event into the changes it makes to the projection (none for an event
	// it does not project); it must be deterministic.
	Log       Log
	FromEvent func(e envelope.Envelope) ([]Change, error)
	// Active, when set, is the pointer readers follow (Versions): the switch
	// moves it from From (the version readers read now) to To (the
	// shadow's), once the shadow has caught up. From's table is left for a
	// rollback.
	Active   *Active
	From, To string
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

// Log is the part of the event store a rebuild from the log reads
// (*eventstore.Store).
type Log interface {
	Tenants(ctx context.Context, cursor string, limit int32) ([]string, string, error)
	Events(ctx context.Context, tenant string, after int64, limit int32) (eventstore.Page, error)
}

var _ Log = (*eventstore.Store)(nil)

// logCursor is where a replay of the log stands, saved as Progress.Cursor.
type logCursor struct {
	Tenants string   `json:"tenants,omitempty"` // the cursor of the next page of tenants
	Fetched bool     `json:"fetched,omitempty"` // a page of tenants was read
	Pending []string `json:"pending,omitempty"` // tenants of that page still to replay, the first under way
	After   int64    `json:"after,omitempty"`   // the first pending tenant's last seq replayed
}

// RebuildReport is where a rebuild stands.
type RebuildReport struct {
	Phase    string         // "scan" (or "replay", from the log), "catchup", "switch" or "done"
	Applied  int            // source entities applied to the shadow so far
	CaughtUp map[string]int // rows the catch-up repaired, by fault
	Done     bool
}

const (
	kindRebuild        = "rebuild"
	phaseScan          = "scan"
	phaseReplay        = "replay"
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
//
// From the log (Log and FromEvent), step 1 is a replay of every tenant's
// events in seq order instead (the cursor names the tenant and seq), and
// the catch up is the Projector's live changes alone (set Projector.Shadow
// before the first run): nothing committed after the replay passed a
// tenant's head is missed, and applying by version makes the overlap
// harmless. With Active, the switch moves the readers' pointer from From to
// To.
//
// A failure is returned, logged at ERROR and counted
// (keys.MetricProjRunFailed); the saved cursor stays where the last page
// succeeded and the readers stay on From.
func (p *Projector) Rebuild(ctx context.Context, o RebuildOptions) (RebuildReport, error) {
	rep, err := p.rebuild(ctx, o)
	if err != nil {
		p.log().ErrorContext(ctx, "projection rebuild failed: readers stay on the version they read; the next run resumes from the saved cursor",
			slog.String(obs.KeyProjection, p.Name), slog.String(obs.KeyPhase, rep.Phase), slog.Int(obs.KeyApplied, rep.Applied), obs.Err(err))
		if p.Metrics != nil {
			p.Metrics.Count(keys.MetricProjRunFailed, 1, "Projection", p.Name)
		}
	}
	return rep, err
}

func (p *Projector) rebuild(ctx context.Context, o RebuildOptions) (RebuildReport, error) {
	switch {
	case o.Source == nil && o.Log == nil:
		return RebuildReport{}, fmt.Errorf("%s: rebuild: RebuildOptions.Source is required (a table scan), or Log (the event log)", p.Name)
	case o.Source != nil && o.Log != nil:
		return RebuildReport{}, fmt.Errorf("%s: rebuild: RebuildOptions.Source and Log are both set; a rebuild reads one of them", p.Name)
	case o.Log != nil && o.FromEvent == nil:
		return RebuildReport{}, fmt.Errorf("%s: rebuild: RebuildOptions.FromEvent is required with Log (what each event changes)", p.Name)
	case o.Active != nil && (o.From == "" || o.To == "" || o.From == o.To):
		return RebuildReport{}, fmt.Errorf("%s: rebuild: RebuildOptions.From and To are required with Active, and differ (the version readers read now, and the shadow's)", p.Name)
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
		if o.Log != nil {
			prog.Phase = phaseReplay
		}
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
		case phaseReplay:
			pages++
			done, err := shadow.replay(ctx, o, &prog)
			if err != nil {
				return rep(), errors.Join(fmt.Errorf("%s: rebuild: %w", p.Name, err), save())
			}
			if done {
				prog.Phase, prog.Cursor = phaseSwitch, ""
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
			if o.Active != nil {
				if err := o.Active.Switch(ctx, o.From, o.To); err != nil {
					return rep(), fmt.Errorf("%s: rebuild: switch: %w", p.Name, err)
				}
				p.log().InfoContext(ctx, "projection switched: readers move to the rebuilt version", slog.String(obs.KeyProjection, p.Name),
					slog.String(obs.KeyFrom, o.From), slog.String(obs.KeyTo, o.To))
			}
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

// replay replays one page of the log into the shadow (p): the next page of
// tenants, or the next page of the first pending tenant's events. It
// reports whether every tenant is done. An event that does not decode
// stops it, naming the tenant and seq: a projection rebuilt past it would
// silently lack its changes.
func (p *Projector) replay(ctx context.Context, o RebuildOptions, prog *Progress) (bool, error) {
	var c logCursor
	if prog.Cursor != "" {
		if err := decodeJSON(prog.Cursor, &c); err != nil {
			return false, fmt.Errorf("saved replay cursor: %w", ErrBadCursor)
		}
	}
	if len(c.Pending) == 0 {
		if c.Fetched && c.Tenants == "" {
			return true, nil
		}
		ts, next, err := o.Log.Tenants(ctx, c.Tenants, 100)
		if err != nil {
			return false, err
		}
		c = logCursor{Tenants: next, Fetched: true, Pending: ts}
	} else {
		tenant := c.Pending[0]
		page, err := o.Log.Events(ctx, tenant, c.After, int32(max(o.PageSize, 1)))
		if err != nil {
			return false, fmt.Errorf("replay tenant %s after seq %d: %w", tenant, c.After, err)
		}
		for i, e := range page.Events {
			if page.Errs[i] != nil {
				return false, fmt.Errorf("replay tenant %s: the event after seq %d does not decode: %w (run reconcile on the tenant)", tenant, c.After, page.Errs[i])
			}
			changes, err := o.FromEvent(e)
			if err != nil {
				return false, fmt.Errorf("replay tenant %s seq %d (%s): %w", tenant, e.Seq, e.Type, err)
			}
			for _, ch := range changes {
				if p.Entity != "" && ch.Entity != p.Entity {
					continue
				}
				if err := p.check(ch); err != nil {
					return false, fmt.Errorf("replay tenant %s seq %d (%s): %w", tenant, e.Seq, e.Type, err)
				}
				if err := apply(ctx, p, p.Store, tenant, ch); err != nil {
					return false, fmt.Errorf("replay tenant %s seq %d (%s): %w", tenant, e.Seq, e.Type, err)
				}
				prog.Counts[countApplied]++
			}
			c.After = e.Seq
		}
		if page.Next == 0 || len(page.Events) == 0 {
			c.Pending, c.After = c.Pending[1:], 0
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return false, err
	}
	prog.Cursor = string(b)
	return len(c.Pending) == 0 && c.Tenants == "", nil
}
