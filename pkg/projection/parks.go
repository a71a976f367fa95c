package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// SweepOptions configures SweepParks.
type SweepOptions struct {
	// Source, when set, is read for each live park's entity: a version newer
	// than the projection's is applied (Repair), closing the gap.
	Source Source
	// AgedAfter is how old a park may grow before it is reported as a gap
	// nothing closed (default 1 hour).
	AgedAfter time.Duration
	// ExpiringWithin reports a park whose TTL is that close (default 1 day):
	// once it expires, the change it holds is gone from the projection's view.
	ExpiringWithin time.Duration
	// PageSize is the parks read per request (default 100).
	PageSize int
}

// SweepReport is what one sweep found and did.
type SweepReport struct {
	Parks    int // parks listed
	Dropped  int // parks a newer row (or tombstone) made moot, removed
	Closed   int // gaps closed from the source
	Aged     int // parks older than AgedAfter, still open
	Expiring int // parks within ExpiringWithin of their TTL, still open
}

// SweepParks goes through every park of the projection. A park at or below
// the projected version is moot (its change was superseded) and is removed;
// for the others it first tries the Source; every park still open and older
// than AgedAfter is an ERROR line and a keys.MetricProjParkAged count, and
// one close to its TTL a keys.MetricProjParkExpiring count (the construct
// alarms on both). Run it on a schedule well inside the park TTL.
func (p *Projector) SweepParks(ctx context.Context, o SweepOptions) (SweepReport, error) {
	if o.AgedAfter <= 0 {
		o.AgedAfter = time.Hour
	}
	if o.ExpiringWithin <= 0 {
		o.ExpiringWithin = 24 * time.Hour
	}
	if o.PageSize <= 0 {
		o.PageSize = 100
	}
	var rep SweepReport
	var errs []error
	cursor := ""
	for {
		if nearDeadline(ctx) {
			// No cursor: the next run sweeps from the start. Parks are
			// few unless a feed is badly out of order.
			p.log().WarnContext(ctx, "park sweep stopped at the invocation's deadline; the next run starts over", slog.String(obs.KeyProjection, p.Name), slog.Int(obs.KeyParks, rep.Parks))
			break
		}
		ps, next, err := p.Store.Parks(ctx, cursor, o.PageSize)
		if err != nil {
			return rep, fmt.Errorf("%s: sweep parks: %w", p.Name, err)
		}
		for _, pk := range ps {
			rep.Parks++
			if err := p.sweepOne(ctx, o, pk, &rep); err != nil {
				errs = append(errs, err)
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if rep.Aged > 0 {
		p.Metrics.Count(keys.MetricProjParkAged, rep.Aged, "Projection", p.Name)
	}
	if rep.Expiring > 0 {
		p.Metrics.Count(keys.MetricProjParkExpiring, rep.Expiring, "Projection", p.Name)
	}
	p.log().InfoContext(ctx, "parks swept", slog.String(obs.KeyProjection, p.Name), slog.Int(obs.KeyParks, rep.Parks), slog.Int(obs.KeyDropped, rep.Dropped),
		slog.Int(obs.KeyClosed, rep.Closed), slog.Int(obs.KeyAged, rep.Aged), slog.Int(obs.KeyExpiring, rep.Expiring))
	return rep, errors.Join(errs...)
}

func (p *Projector) sweepOne(ctx context.Context, o SweepOptions, pk Park, rep *SweepReport) error {
	c := pk.Change
	moot := func() (bool, error) {
		cur, found, err := p.Store.Get(ctx, pk.Tenant, c.Entity, c.ID)
		if err != nil || !found || cur.Version < c.Version {
			return false, err
		}
		return true, p.Store.Unpark(ctx, pk.Tenant, c.Entity, c.ID, c.Version)
	}
	gone, err := moot()
	if err != nil {
		return err
	}
	if gone {
		rep.Dropped++
		return nil
	}
	if o.Source != nil {
		src, found, err := o.Source.Get(ctx, pk.Tenant, c.Entity, c.ID)
		if err != nil {
			return fmt.Errorf("%s: re-read %s %s: %w", p.Name, c.Entity, c.ID, err)
		}
		if !found {
			// Gone from its table: the delete's change was lost too.
			cur, _, err := p.Store.Get(ctx, pk.Tenant, c.Entity, c.ID)
			if err != nil {
				return err
			}
			src = Change{Entity: c.Entity, ID: c.ID, Version: max(cur.Version, c.Version), Deleted: true}
		}
		if _, err := p.repair(ctx, pk.Tenant, src); err != nil {
			return err
		}
		if gone, err = moot(); err != nil {
			return err
		}
		if gone {
			rep.Closed++
			p.log().InfoContext(ctx, "parked gap closed from the source", slog.String(obs.KeyProjection, p.Name), slog.String(obs.KeyTenant, pk.Tenant),
				slog.String(obs.KeyEntity, c.Entity), slog.String(obs.KeyID, c.ID), slog.Int64(obs.KeyVersion, c.Version), slog.Int64(obs.KeySourceVersion, src.Version))
			return nil
		}
	}
	now := p.now()
	attrs := []any{slog.String(obs.KeyProjection, p.Name), slog.String(obs.KeyTenant, pk.Tenant), slog.String(obs.KeyEntity, c.Entity),
		slog.String(obs.KeyID, c.ID), slog.Int64(obs.KeyVersion, c.Version), slog.Time(obs.KeyParkedAt, pk.ParkedAt), slog.Time(obs.KeyExpiresAt, pk.ExpiresAt),
		slog.Duration(obs.KeyAge, now.Sub(pk.ParkedAt))}
	if now.Sub(pk.ParkedAt) >= o.AgedAfter {
		rep.Aged++
		p.log().ErrorContext(ctx, "parked change outlived its threshold: its predecessor never arrived; repair the entity or rebuild the projection", attrs...)
	}
	if pk.ExpiresAt.Sub(now) <= o.ExpiringWithin {
		rep.Expiring++
		p.log().ErrorContext(ctx, "parked change about to expire unapplied", attrs...)
	}
	return nil
}
