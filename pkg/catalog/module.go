package catalog

import (
	"cmp"
	"context"
	"reflect"
	"slices"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// Module is one module's declaration: everything it emits, tracks and
// subscribes to. T is the type whose methods handle its subscriptions
// (NoHandlers for a module that subscribes to nothing).
//
// Write it as a package-level composite literal with constant names, globs
// and lanes: the catalog gate reads declarations from source.
type Module[T any] struct {
	Name string // the module's name, e.g. "orders"
	Doc  string
	// Owner names who is paged for the module's failures (its dead
	// letters, LOCAL-handler failures and unmatched event types), e.g.
	// "team-orders": the deployment maps the name to an alarm destination
	// (infra/backbone Props.Owners). Empty: only the stack's alarm topic.
	Owner      string
	Emits      []EventType
	Tracks     []Entity
	Subscribes []Subscription[T]
}

// NoHandlers is the handler receiver of a module without subscriptions.
type NoHandlers struct{}

// EventType declares one event type a module emits.
type EventType struct {
	Name string // "<module>.<name>", e.g. "order.placed"
	Doc  string
	// Versions lists the schema versions in ascending order, each with its
	// payload Go type. Emit writes the last one; older ones stay declared so
	// that events already in the log can still be decoded.
	Versions []Version
	// Discriminator optionally names a payload field whose value an
	// unmatched-event warning logs, for types whose name says too little.
	Discriminator string
}

// Current returns the schema version Emit writes (the last declared).
func (t EventType) Current() Version {
	if len(t.Versions) == 0 {
		return Version{}
	}
	return t.Versions[len(t.Versions)-1]
}

// Version returns the declared schema version n.
func (t EventType) Version(n int) (Version, bool) {
	for _, v := range t.Versions {
		if v.Schema == n {
			return v, true
		}
	}
	return Version{}, false
}

// Event declares an event type with one schema version, 1, whose payload is
// T (a struct): the short form of
//
//	catalog.EventType{Name: name, Doc: doc, Versions: []catalog.Version{catalog.V[T](1)}}
//
// for a type that has not changed since it was published. Its first change
// is written in the long form, listing every version (docs/changing-events.md).
// Like every declaration, pass it constants: the catalog gate reads it from
// source.
func Event[T any](name, doc string) EventType {
	return EventType{Name: name, Doc: doc, Versions: []Version{V[T](1)}}
}

// Version is one schema version of an event type and its payload Go type.
type Version struct {
	Schema  int
	Payload reflect.Type // a struct type
	up      []*upcaster  // builds this version's payload from the previous one's (V's from)
}

// V declares schema version schema with payload type T (a struct), and
// optionally the upcaster that builds T from the previous version's payload
// (see Upcast).
func V[T any](schema int, from ...Upcaster[T]) Version {
	v := Version{Schema: schema, Payload: reflect.TypeFor[T]()}
	for _, u := range from {
		v.up = append(v.up, u.u)
	}
	return v
}

// Entity declares a tracked entity: a table whose stream the change feed
// turns into record.written.<Name> / record.deleted.<Name> change events.
type Entity struct {
	Name string // upper case, e.g. "ORDER"
	Doc  string
	// TableEnv is the environment variable that names the entity's table.
	TableEnv string
	// TenantAttr, IDAttr and VersionAttr name the item attributes holding
	// the tenant, the entity id and the item's version.
	TenantAttr, IDAttr, VersionAttr string
}

// Subscription declares one reaction of a module: events whose type matches
// Types are delivered on Lane to Handler.
type Subscription[T any] struct {
	Name  string // unique across the application, e.g. "notifications.order-email"
	Types string // type glob, e.g. "order.*"
	// Lane is INLINE, LOCAL or DURABLE for event types. A glob that can
	// match change events (record.*) runs on BEST_EFFORT, the one lane that
	// dispatches them, and may leave Lane out (LaneFor).
	Lane Lane
	// Reads lists the schema versions Handler can read. An event of any other
	// version is never handed to it: DURABLE dead-letters it with that
	// reason, INLINE fails, LOCAL and BEST_EFFORT log and count it.
	Reads   []int
	Doc     string
	Handler func(T, context.Context, envelope.Envelope) error
	// Typed is the other form of handler: one that takes the payload as its
	// Go type, decoded (and upcast) by the framework, e.g.
	// catalog.Typed((*Reserver).OnOrderPlaced). Set Handler or Typed.
	Typed *TypedHandler[T]
	// Start is where a DURABLE subscription's delivery begins (the zero
	// value: from when it first went live; see Start). Earlier history
	// reaches it only through `fourlanes backfill`.
	Start Start
	// Owner names who is paged for this subscription's dead letters and
	// LOCAL-handler failures, when not the module's Owner.
	Owner string
}

// Handler handles one event. The context carries the envelope's tenant,
// correlation and causation (the event's id), so writes and emits made by a
// handler land in the right tenant and record what caused them.
type Handler func(ctx context.Context, e envelope.Envelope) error

// Spec is the handler-free view of a module, as the catalog holds it.
type Spec struct {
	Name       string
	Doc        string
	Owner      string
	Emits      []EventType
	Tracks     []Entity
	Subscribes []SubscriptionSpec
}

// SubscriptionSpec is the handler-free view of a subscription.
type SubscriptionSpec struct {
	Module string
	Name   string
	Types  string
	Lane   Lane
	Reads  []int
	Doc    string
	// Takes is the payload type a Typed handler takes; nil for a Handler.
	Takes reflect.Type
	// Start is the declared start (DURABLE only).
	Start Start
	// Owner is who is paged for it: the subscription's Owner, or else its
	// module's ("" for neither).
	Owner string
}

// CanRead reports whether the subscription declares schema version v readable.
func (s SubscriptionSpec) CanRead(v int) bool { return slices.Contains(s.Reads, v) }

// Spec returns the module's handler-free declaration.
func (m Module[T]) Spec() Spec {
	s := Spec{Name: m.Name, Doc: m.Doc, Owner: m.Owner, Emits: slices.Clone(m.Emits), Tracks: slices.Clone(m.Tracks)}
	for _, sub := range m.Subscribes {
		ss := SubscriptionSpec{
			Module: m.Name, Name: sub.Name, Types: sub.Types, Lane: LaneFor(sub.Types, sub.Lane),
			Reads: slices.Clone(sub.Reads), Doc: sub.Doc, Start: sub.Start, Owner: cmp.Or(sub.Owner, m.Owner),
		}
		if sub.Typed != nil {
			ss.Takes = sub.Typed.takes
		}
		s.Subscribes = append(s.Subscribes, ss)
	}
	return s
}

// Binding is a module's declaration with its handlers bound to a receiver,
// ready for NewRegistry.
type Binding struct {
	spec     Spec
	handlers map[string]Handler
	typed    map[string]func(ctx context.Context, e envelope.Envelope, p any) error
	missing  []string // subscriptions declared without a Handler or Typed
	both     []string // subscriptions declared with both
}

// Bind binds every subscription's handler to recv.
func (m Module[T]) Bind(recv T) Binding {
	b := Binding{spec: m.Spec(), handlers: map[string]Handler{}, typed: map[string]func(context.Context, envelope.Envelope, any) error{}}
	for _, sub := range m.Subscribes {
		switch {
		case sub.Handler != nil && sub.Typed != nil:
			b.both = append(b.both, sub.Name)
		case sub.Typed != nil:
			call := sub.Typed.call
			b.typed[sub.Name] = func(ctx context.Context, e envelope.Envelope, p any) error { return call(recv, ctx, e, p) }
		case sub.Handler != nil:
			h := sub.Handler
			b.handlers[sub.Name] = func(ctx context.Context, e envelope.Envelope) error { return h(recv, ctx, e) }
		default:
			b.missing = append(b.missing, sub.Name)
		}
	}
	return b
}

// Spec returns the declaration the binding was made from.
func (b Binding) Spec() Spec { return b.spec }
