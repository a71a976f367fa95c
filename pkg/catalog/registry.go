package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// ErrUnbound: a subscription declared on a lane this process dispatches has
// no handler bound here, so it would never run.
var ErrUnbound = errors.New("declared subscription not bound in this process")

// Bound is a subscription with its handler, as a dispatcher runs it.
type Bound struct {
	SubscriptionSpec
	Handler Handler
}

// Registry is a Catalog plus the handlers one process has bound. It is
// immutable and safe for concurrent use.
type Registry struct {
	cat    *Catalog
	bound  []Bound
	byName map[string]int
}

// NewRegistry binds modules' handlers for one process. Every binding must be
// of a module in cat, declared identically, with a handler for each of its
// subscriptions; a module may be bound once.
func NewRegistry(cat *Catalog, bindings ...Binding) (*Registry, error) {
	r := &Registry{cat: cat, byName: map[string]int{}}
	seen := map[string]bool{}
	for _, b := range bindings {
		decl, ok := cat.Module(b.spec.Name)
		if !ok {
			return nil, fmt.Errorf("bind module %q: not in the catalog; add its declaration to the application's catalog", b.spec.Name)
		}
		if !reflect.DeepEqual(decl, b.spec) {
			return nil, fmt.Errorf("bind module %q: its declaration differs from the catalog's; build both from the same Module value", b.spec.Name)
		}
		if seen[b.spec.Name] {
			return nil, fmt.Errorf("bind module %q: bound twice", b.spec.Name)
		}
		seen[b.spec.Name] = true
		if len(b.missing) > 0 {
			return nil, fmt.Errorf("bind module %q: subscriptions %s declare no Handler (or Typed)", b.spec.Name, strings.Join(b.missing, ", "))
		}
		if len(b.both) > 0 {
			return nil, fmt.Errorf("bind module %q: subscriptions %s declare both Handler and Typed; keep one", b.spec.Name, strings.Join(b.both, ", "))
		}
		for _, s := range b.spec.Subscribes {
			h := b.handlers[s.Name]
			if call, ok := b.typed[s.Name]; ok {
				h = cat.typedHandler(s.Takes, call)
			} else if cat.Personal() {
				h = cat.openingHandler(h)
			}
			r.byName[s.Name] = len(r.bound)
			r.bound = append(r.bound, Bound{SubscriptionSpec: s, Handler: h})
		}
	}
	return r, nil
}

// Catalog returns the application's catalog.
func (r *Registry) Catalog() *Catalog { return r.cat }

// Subscription returns the bound subscription named name.
func (r *Registry) Subscription(name string) (Bound, bool) {
	i, ok := r.byName[name]
	if !ok {
		return Bound{}, false
	}
	return r.bound[i], true
}

// Served returns the bound subscriptions on lane, in declaration order.
func (r *Registry) Served(lane Lane) []Bound {
	var out []Bound
	for _, b := range r.bound {
		if b.Lane == lane {
			out = append(out, b)
		}
	}
	return out
}

// Unbound returns the subscriptions declared on lane that this process has
// not bound. A process that dispatches lane and has any is missing a
// module's registration: those subscriptions would never run.
func (r *Registry) Unbound(lane Lane) []SubscriptionSpec {
	var out []SubscriptionSpec
	for _, s := range r.cat.Subscriptions() {
		if _, ok := r.byName[s.Name]; !ok && s.Lane == lane {
			out = append(out, s)
		}
	}
	return out
}

// Route is where an event goes, as seen by a dispatcher of some lanes.
type Route struct {
	// Bound are the matching subscriptions on the dispatcher's lanes that
	// this process serves, in declaration order.
	Bound []Bound
	// Unbound are matching subscriptions on the dispatcher's lanes that are
	// declared but not bound here: a forgotten registration.
	Unbound []SubscriptionSpec
	// Elsewhere are matching subscriptions on other lanes (other dispatchers
	// serve them).
	Elsewhere []SubscriptionSpec
}

// Unmatched reports whether nothing anywhere subscribes to the event, or a
// subscription on these lanes should have run here but is not bound.
func (rt Route) Unmatched() bool {
	return len(rt.Bound) == 0 && (len(rt.Unbound) > 0 || len(rt.Elsewhere) == 0)
}

// Route returns where an event of eventType goes for a dispatcher of lanes.
func (r *Registry) Route(eventType string, lanes ...Lane) Route {
	var rt Route
	on := func(l Lane) bool {
		for _, x := range lanes {
			if x == l {
				return true
			}
		}
		return false
	}
	for _, s := range r.cat.Matching(eventType) {
		switch i, ok := r.byName[s.Name]; {
		case !on(s.Lane):
			rt.Elsewhere = append(rt.Elsewhere, s)
		case ok:
			rt.Bound = append(rt.Bound, r.bound[i])
		default:
			rt.Unbound = append(rt.Unbound, s)
		}
	}
	return rt
}

// LogServed logs, at start-up, every subscription this process serves on
// lanes, and logs an error for each subscription declared on those lanes
// that is not bound here. It returns an error wrapping ErrUnbound in that
// case; a function should refuse to start on it, since those subscriptions
// would otherwise silently never run.
func (r *Registry) LogServed(ctx context.Context, log *slog.Logger, lanes ...Lane) error {
	if log == nil {
		log = slog.Default()
	}
	var missing []string
	for _, lane := range lanes {
		served := r.Served(lane)
		for _, b := range served {
			log.InfoContext(ctx, "serving subscription",
				slog.String(obs.KeyLane, string(lane)), slog.String(obs.KeySubscription, b.Name),
				slog.String(obs.KeyModule, b.Module), slog.String(obs.KeyTypes, b.Types), slog.Any(obs.KeyReads, b.Reads))
		}
		unbound := r.Unbound(lane)
		for _, s := range unbound {
			log.ErrorContext(ctx, "subscription declared but not registered in this process; it will never run",
				slog.String(obs.KeyLane, string(lane)), slog.String(obs.KeySubscription, s.Name),
				slog.String(obs.KeyModule, s.Module), slog.String(obs.KeyTypes, s.Types))
			missing = append(missing, s.Name)
		}
		log.InfoContext(ctx, "lane ready", slog.String(obs.KeyLane, string(lane)),
			slog.Int(obs.KeyServed, len(served)), slog.Int(obs.KeyUnbound, len(unbound)))
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s (bind their modules with catalog.NewRegistry)", ErrUnbound, strings.Join(missing, ", "))
	}
	return nil
}

// typedHandler is a typed subscription's Handler: it decodes the payload
// once (DecodeAs), then calls the handler with it. The decode errors are
// permanent (envelope.DecodeError, UpcastError) or say the declarations
// disagree with the event, which New refuses for declared versions.
func (c *Catalog) typedHandler(takes reflect.Type, call func(context.Context, envelope.Envelope, any) error) Handler {
	return func(ctx context.Context, e envelope.Envelope) error {
		p, err := c.DecodeAsContext(ctx, e, takes)
		if err != nil {
			return err
		}
		return call(ctx, e, p)
	}
}
