package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// Change is one versioned change of an entity, as a projection applies it.
type Change struct {
	Entity  string
	ID      string
	Version int64
	Deleted bool           // a delete: the version is the deleted item's
	Item    map[string]any // the source item (envelope payload form); nil on a delete
}

// Row is one projected entity.
type Row struct {
	Tenant  string
	Entity  string
	ID      string
	Version int64
	Deleted bool           // a tombstone
	Item    map[string]any // the projected document (Shape of the source item); nil on a tombstone
}

// Park is a change kept until its predecessor is applied.
type Park struct {
	Tenant    string
	Change    Change
	ParkedAt  time.Time
	ExpiresAt time.Time // the row's TTL: SweepParks reports it before then
}

// Store keeps a projection's rows and parks. Implementations must be safe
// for concurrent use.
type Store interface {
	// Get reads the projected row (Deleted for a tombstone).
	Get(ctx context.Context, tenant, entity, id string) (Row, bool, error)
	// Put writes r only if the stored row's version is still prev (found
	// false: only if there is no row). It reports whether it wrote.
	Put(ctx context.Context, r Row, prev int64, found bool) (bool, error)
	// Rows pages through every projected row; cursor "" starts, a returned
	// cursor "" means the end. A row that does not decode is left out of
	// the page and reported as a *BadRowError beside it.
	Rows(ctx context.Context, cursor string, limit int) ([]Row, string, error)

	// Park keeps p unless that version is parked already: a duplicate
	// delivery must not reset the age SweepParks measures.
	Park(ctx context.Context, p Park) error
	// Parked returns the parked change of version v, if any.
	Parked(ctx context.Context, tenant, entity, id string, v int64) (Park, bool, error)
	// Unpark removes a parked change.
	Unpark(ctx context.Context, tenant, entity, id string, v int64) error
	// Parks pages through every parked change, like Rows.
	Parks(ctx context.Context, cursor string, limit int) ([]Park, string, error)
}

// Projector applies change events to a Store by version. Its OnChange is a
// BEST_EFFORT handler; its Repair is what dlq-repair calls with an entity
// re-read from its table (repair.Reapplier).
type Projector struct {
	// Name names the projection in logs and metrics (dimension Projection).
	Name  string
	Store Store
	// Entity, when set, is the only entity the projection accepts.
	Entity string
	// Shape turns a source item into the projected document (nil: the item
	// as it is). It must be deterministic: Compare checks a row by shaping
	// the source again. An error refuses the change (nothing is written).
	Shape func(item map[string]any) (map[string]any, error)
	// ParkFor is the TTL of a park (default 7 days): a backstop that keeps
	// the state table from filling with gaps nobody closes. SweepParks
	// reports a park long before it expires.
	ParkFor time.Duration
	// Shadow, while a rebuild runs, receives every change too, so the
	// shadow catches up with what the rebuild's scan already passed.
	Shadow  Store
	Logger  *slog.Logger
	Metrics *obs.Metrics
	Now     func() time.Time
}

// maxRaces bounds the optimistic retries when concurrent deliveries of one
// entity race on its version.
const maxRaces = 8

// Errors.
var (
	// ErrContended: the entity's version kept moving under concurrent applies.
	ErrContended = errors.New("projection contended")
	// ErrBadChange: the change event cannot be applied (wrong entity, no
	// id, version below 1). It is permanent.
	ErrBadChange = errors.New("bad change")
)

func (p *Projector) log() *slog.Logger {
	if p.Logger == nil {
		return slog.Default()
	}
	return p.Logger
}

func (p *Projector) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// OnChange applies one change event (a record.written or record.deleted
// event of catalog.ChangeV1).
func (p *Projector) OnChange(ctx context.Context, e envelope.Envelope) error {
	entity, deleted, ok := catalog.ParseChangeType(e.Type)
	if !ok {
		return fmt.Errorf("%s: %s is not a change event: %w", p.Name, e.Type, ErrBadChange)
	}
	var c catalog.ChangeV1
	if err := e.DecodePayload(&c); err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	if c.Entity != entity {
		return fmt.Errorf("%s: %s carries entity %q: %w", p.Name, e.Type, c.Entity, ErrBadChange)
	}
	ch := Change{Entity: entity, ID: c.ID, Version: c.Version, Deleted: deleted, Item: c.Item}
	if deleted {
		ch.Item = nil
	}
	return p.Apply(ctx, e.TenantID, ch)
}

// Repair applies an entity as re-read from its table (item nil: it is gone,
// at version) when that is newer than the projection, closing a gap a lost
// change left, then applies any parked successors.
func (p *Projector) Repair(ctx context.Context, tenant, entity, id string, version int64, item map[string]any) error {
	c := Change{Entity: entity, ID: id, Version: version, Deleted: item == nil, Item: item}
	if _, err := p.repair(ctx, tenant, c); err != nil {
		return err
	}
	if p.Shadow != nil {
		shadow := *p
		shadow.Store, shadow.Shadow = p.Shadow, nil
		if _, err := shadow.repair(ctx, tenant, c); err != nil {
			return fmt.Errorf("%s shadow: %w", p.Name, err)
		}
	}
	return nil
}

// Apply applies one change to the projection (and to Shadow, when set).
func (p *Projector) Apply(ctx context.Context, tenant string, c Change) error {
	if err := p.check(c); err != nil {
		return err
	}
	if err := apply(ctx, p, p.Store, tenant, c); err != nil {
		return err
	}
	if p.Shadow != nil {
		if err := apply(ctx, p, p.Shadow, tenant, c); err != nil {
			return fmt.Errorf("%s shadow: %w", p.Name, err)
		}
	}
	return nil
}

func (p *Projector) check(c Change) error {
	switch {
	case p.Entity != "" && c.Entity != p.Entity:
		return fmt.Errorf("%s: change of %s, want %s: %w", p.Name, c.Entity, p.Entity, ErrBadChange)
	case c.ID == "":
		return fmt.Errorf("%s: change of %s has no id: %w", p.Name, c.Entity, ErrBadChange)
	case c.Version < 1:
		return fmt.Errorf("%s: change of %s %s has version %d, want 1 or more: %w", p.Name, c.Entity, c.ID, c.Version, ErrBadChange)
	}
	return nil
}

func apply(ctx context.Context, p *Projector, st Store, tenant string, c Change) error {
	if c.Deleted {
		return applyDelete(ctx, p, st, tenant, c)
	}
	for range maxRaces {
		cur, found, err := st.Get(ctx, tenant, c.Entity, c.ID)
		if err != nil {
			return err
		}
		switch {
		case c.Version <= cur.Version:
			return nil // a duplicate or a late write; a tombstone at this version or later wins
		case c.Version == cur.Version+1:
			r, err := p.row(tenant, c)
			if err != nil {
				return err
			}
			ok, err := st.Put(ctx, r, cur.Version, found)
			if err != nil {
				return err
			}
			if !ok {
				continue // another apply moved the version; look again
			}
			return drain(ctx, p, st, tenant, c.Entity, c.ID, c.Version)
		default:
			now := p.now()
			keep := p.ParkFor
			if keep <= 0 {
				keep = 7 * 24 * time.Hour
			}
			if err := st.Park(ctx, Park{Tenant: tenant, Change: c, ParkedAt: now, ExpiresAt: now.Add(keep)}); err != nil {
				return err
			}
			p.log().InfoContext(ctx, "change arrived early; parked", slog.String(obs.KeyProjection, p.Name), slog.String(obs.KeyTenant, tenant),
				slog.String(obs.KeyEntity, c.Entity), slog.String(obs.KeyID, c.ID), slog.Int64(obs.KeyVersion, c.Version), slog.Int64(obs.KeyProjected, cur.Version))
			p.Metrics.Count(keys.MetricProjParked, 1, "Projection", p.Name, "Entity", c.Entity)
			// The predecessor may have been applied while we parked, and
			// looked for parked successors before ours was there: look again.
			now2, _, err := st.Get(ctx, tenant, c.Entity, c.ID)
			if err != nil {
				return err
			}
			return drain(ctx, p, st, tenant, c.Entity, c.ID, now2.Version)
		}
	}
	return fmt.Errorf("%s: write %s %s v%d: %w", p.Name, c.Entity, c.ID, c.Version, ErrContended)
}

// applyDelete writes a tombstone at once: it supersedes every earlier write,
// and it replaces a live row of its own version (the version a delete
// carries is the deleted item's).
func applyDelete(ctx context.Context, p *Projector, st Store, tenant string, c Change) error {
	for range maxRaces {
		cur, found, err := st.Get(ctx, tenant, c.Entity, c.ID)
		if err != nil {
			return err
		}
		if found && (c.Version < cur.Version || c.Version == cur.Version && cur.Deleted) {
			return nil // an older delete, or a duplicate
		}
		ok, err := st.Put(ctx, Row{Tenant: tenant, Entity: c.Entity, ID: c.ID, Version: c.Version, Deleted: true}, cur.Version, found)
		if err != nil {
			return err
		}
		if ok {
			return nil // parks it made moot are dropped by SweepParks
		}
	}
	return fmt.Errorf("%s: delete %s %s v%d: %w", p.Name, c.Entity, c.ID, c.Version, ErrContended)
}

// drain applies parked successors of version from, in order, until a gap.
// When another apply moves the version first, that apply drains on from
// there (every successful apply drains), so this one stops.
func drain(ctx context.Context, p *Projector, st Store, tenant, entity, id string, from int64) error {
	for {
		next, ok, err := st.Parked(ctx, tenant, entity, id, from+1)
		if err != nil || !ok {
			return err
		}
		r, err := p.row(tenant, next.Change)
		if err != nil {
			return err
		}
		wrote, err := st.Put(ctx, r, from, true)
		if err != nil || !wrote {
			return err
		}
		if err := st.Unpark(ctx, tenant, entity, id, next.Change.Version); err != nil {
			return err
		}
		from = next.Change.Version
	}
}

// repair applies c if it is newer than the projection, and drains parks
// either way. It reports whether it wrote.
func (p *Projector) repair(ctx context.Context, tenant string, c Change) (bool, error) {
	if err := p.check(c); err != nil {
		return false, err
	}
	for range maxRaces {
		cur, found, err := p.Store.Get(ctx, tenant, c.Entity, c.ID)
		if err != nil {
			return false, err
		}
		if found && (c.Version < cur.Version || c.Version == cur.Version && (cur.Deleted || !c.Deleted)) {
			return false, drain(ctx, p, p.Store, tenant, c.Entity, c.ID, cur.Version)
		}
		r := Row{Tenant: tenant, Entity: c.Entity, ID: c.ID, Version: c.Version, Deleted: true}
		if !c.Deleted {
			if r, err = p.row(tenant, c); err != nil {
				return false, err
			}
		}
		ok, err := p.Store.Put(ctx, r, cur.Version, found)
		if err != nil {
			return false, err
		}
		if ok {
			if c.Deleted {
				return true, nil
			}
			return true, drain(ctx, p, p.Store, tenant, c.Entity, c.ID, c.Version)
		}
	}
	return false, fmt.Errorf("%s: repair %s %s: %w", p.Name, c.Entity, c.ID, ErrContended)
}

// row shapes a written change into its projected row.
func (p *Projector) row(tenant string, c Change) (Row, error) {
	doc := c.Item
	if p.Shape != nil {
		var err error
		if doc, err = p.Shape(c.Item); err != nil {
			return Row{}, fmt.Errorf("%s: shape %s %s v%d: %w", p.Name, c.Entity, c.ID, c.Version, err)
		}
	}
	return Row{Tenant: tenant, Entity: c.Entity, ID: c.ID, Version: c.Version, Item: doc}, nil
}
