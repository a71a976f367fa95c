// Package search projects the orders change feed into a search table (the
// example's BEST_EFFORT subscriber). Change events arrive unordered and may
// repeat or go missing, so it applies them by version:
//
//   - a write older than or equal to what is projected is skipped (a
//     duplicate, or a late write after a newer one);
//   - the exact next version is applied, then any parked successors;
//   - a write that arrives early (a gap) is parked in the state table and
//     applied when the gap closes;
//   - a delete is applied as a versioned tombstone at once (it supersedes
//     every earlier write); a late write of that version or older cannot
//     resurrect the item.
//
// A gap that never closes (a change event the feed lost) is repaired by
// Repair, which applies the item as re-read from the orders table.
package search

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// Doc is one projected item.
type Doc struct {
	Tenant  string
	Entity  string
	ID      string
	Version int64
	Deleted bool           // a tombstone
	Item    map[string]any // absent on a tombstone
}

// Store keeps projected docs and parked changes. Implementations must be safe
// for concurrent use.
type Store interface {
	// Get reads the projected doc (Deleted for a tombstone).
	Get(ctx context.Context, tenant, entity, id string) (Doc, bool, error)
	// Put writes d only if the stored doc's version is still prev (found
	// false: only if absent). It reports whether it wrote.
	Put(ctx context.Context, d Doc, prev int64, found bool) (bool, error)
	// Park keeps a change that arrived before its predecessor.
	Park(ctx context.Context, tenant string, c catalog.ChangeV1) error
	// Parked returns the parked change of version v, if any.
	Parked(ctx context.Context, tenant, entity, id string, v int64) (catalog.ChangeV1, bool, error)
	// Unpark removes a parked change.
	Unpark(ctx context.Context, tenant, entity, id string, v int64) error
}

// Projector is search's handler receiver.
type Projector struct {
	Store   Store
	Logger  *slog.Logger
	Metrics *obs.Metrics
}

// maxRaces bounds the optimistic retries when concurrent deliveries of one
// item race on its version.
const maxRaces = 8

// ErrContended: the item's version kept moving under concurrent applies.
var ErrContended = errors.New("projection contended")

// OnChange applies one change event.
func (p *Projector) OnChange(ctx context.Context, e envelope.Envelope) error {
	entity, deleted, ok := catalog.ParseChangeType(e.Type)
	if !ok {
		return fmt.Errorf("search: %s is not a change event", e.Type)
	}
	var c catalog.ChangeV1
	if err := e.DecodePayload(&c); err != nil {
		return fmt.Errorf("search: %w", err)
	}
	if c.Entity != entity || c.ID == "" {
		return fmt.Errorf("search: %s carries entity %q id %q", e.Type, c.Entity, c.ID)
	}
	if deleted {
		return p.applyDelete(ctx, e.TenantID, c)
	}
	return p.applyWrite(ctx, e.TenantID, c)
}

func (p *Projector) log() *slog.Logger {
	if p.Logger == nil {
		return slog.Default()
	}
	return p.Logger
}

func (p *Projector) applyDelete(ctx context.Context, tenant string, c catalog.ChangeV1) error {
	for range maxRaces {
		cur, found, err := p.Store.Get(ctx, tenant, c.Entity, c.ID)
		if err != nil {
			return err
		}
		if found && (c.Version < cur.Version || c.Version == cur.Version && cur.Deleted) {
			return nil // an older delete, or a duplicate
		}
		ok, err := p.Store.Put(ctx, Doc{Tenant: tenant, Entity: c.Entity, ID: c.ID, Version: c.Version, Deleted: true}, cur.Version, found)
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("delete %s %s v%d: %w", c.Entity, c.ID, c.Version, ErrContended)
}

func (p *Projector) applyWrite(ctx context.Context, tenant string, c catalog.ChangeV1) error {
	for range maxRaces {
		cur, found, err := p.Store.Get(ctx, tenant, c.Entity, c.ID)
		if err != nil {
			return err
		}
		switch {
		case c.Version <= cur.Version:
			return nil // a duplicate or a late write; a tombstone at this version or later wins
		case c.Version == cur.Version+1:
			ok, err := p.Store.Put(ctx, doc(tenant, c), cur.Version, found)
			if err != nil {
				return err
			}
			if !ok {
				continue // another apply moved the version; look again
			}
			return p.drain(ctx, tenant, c.Entity, c.ID, c.Version)
		default:
			if err := p.Store.Park(ctx, tenant, c); err != nil {
				return err
			}
			p.log().InfoContext(ctx, "change arrived early; parked", slog.String("entity", c.Entity), slog.String("id", c.ID),
				slog.Int64("version", c.Version), slog.Int64("projected", cur.Version))
			p.Metrics.Count(keys.MetricProjParked, 1, "Entity", c.Entity)
			// The predecessor may have been applied while we parked, and
			// looked for parked successors before ours was there: look again.
			now, _, err := p.Store.Get(ctx, tenant, c.Entity, c.ID)
			if err != nil {
				return err
			}
			return p.drain(ctx, tenant, c.Entity, c.ID, now.Version)
		}
	}
	return fmt.Errorf("write %s %s v%d: %w", c.Entity, c.ID, c.Version, ErrContended)
}

// drain applies parked successors of version from, in order, until a gap.
// When another apply moves the version first, that apply drains on from
// there (every successful apply drains), so this one stops.
func (p *Projector) drain(ctx context.Context, tenant, entity, id string, from int64) error {
	for {
		next, ok, err := p.Store.Parked(ctx, tenant, entity, id, from+1)
		if err != nil || !ok {
			return err
		}
		wrote, err := p.Store.Put(ctx, doc(tenant, next), from, true)
		if err != nil || !wrote {
			return err
		}
		if err := p.Store.Unpark(ctx, tenant, entity, id, next.Version); err != nil {
			return err
		}
		from = next.Version
	}
}

// Repair applies an item as re-read from its table (item nil: it is gone,
// at version) when that is newer than the projection: it closes a gap left
// by a lost change event, then applies any parked successors.
func (p *Projector) Repair(ctx context.Context, tenant, entity, id string, version int64, item map[string]any) error {
	c := catalog.ChangeV1{Entity: entity, ID: id, Version: version, Item: item}
	if item == nil {
		return p.applyDelete(ctx, tenant, c)
	}
	for range maxRaces {
		cur, found, err := p.Store.Get(ctx, tenant, entity, id)
		if err != nil {
			return err
		}
		if version <= cur.Version {
			return p.drain(ctx, tenant, entity, id, cur.Version)
		}
		ok, err := p.Store.Put(ctx, doc(tenant, c), cur.Version, found)
		if err != nil {
			return err
		}
		if ok {
			return p.drain(ctx, tenant, entity, id, version)
		}
	}
	return fmt.Errorf("repair %s %s: %w", entity, id, ErrContended)
}

func doc(tenant string, c catalog.ChangeV1) Doc {
	return Doc{Tenant: tenant, Entity: c.Entity, ID: c.ID, Version: c.Version, Item: c.Item}
}
