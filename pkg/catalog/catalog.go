package catalog

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// Sentinel errors.
var (
	// ErrUndeclared: the event type is declared by no module.
	ErrUndeclared = errors.New("event type not declared")
	// ErrInvalidCatalog wraps every error New returns.
	ErrInvalidCatalog = errors.New("invalid catalog")
	// ErrUnknownVersion: an envelope's schema version is not declared for its type.
	ErrUnknownVersion = errors.New("schema version not declared")
)

// Catalog is every module of an application. It is immutable and safe for
// concurrent use. It implements eventstore.Catalog.
type Catalog struct {
	modules  []Spec
	types    map[string]EventType
	owner    map[string]string // type → module
	entities []Entity
	subs     []SubscriptionSpec
	vault    Vault                           // seals and opens personal fields (UseVault)
	personal map[reflect.Type]personalFields // the payload types with personal fields (indexPersonal)
}

// New validates the declarations (see Validate; every payload type must be a
// struct) and returns the catalog. The error lists every problem.
func New(modules ...Spec) (*Catalog, error) {
	ps := Validate(modules)
	types := map[string]EventType{}
	var changeTypes []string
	for _, m := range modules {
		for _, t := range m.Emits {
			types[t.Name] = t
			for _, v := range t.Versions {
				if v.Payload == nil || v.Payload.Kind() != reflect.Struct {
					ps = append(ps, Problem{Kind: "type", Name: t.Name, Msg: fmt.Sprintf("schema version %d: payload type %v is not a struct; declare it with catalog.V[T](%d)", v.Schema, v.Payload, v.Schema)})
				}
			}
			ps = append(ps, upcastProblems(t)...)
			ps = append(ps, personalProblems(t)...)
		}
		for _, e := range m.Tracks {
			changeTypes = append(changeTypes, ChangeType(e.Name, false), ChangeType(e.Name, true))
		}
	}
	for _, m := range modules {
		for _, s := range m.Subscribes {
			if s.Takes != nil {
				ps = append(ps, typedProblems(s, types, changeTypes)...)
			}
		}
	}
	if len(ps) > 0 {
		msgs := make([]string, len(ps))
		for i, p := range ps {
			msgs[i] = p.String()
		}
		return nil, fmt.Errorf("%w:\n  %s", ErrInvalidCatalog, strings.Join(msgs, "\n  "))
	}
	c := &Catalog{types: map[string]EventType{}, owner: map[string]string{}}
	for _, m := range modules {
		c.modules = append(c.modules, m)
		for _, t := range m.Emits {
			c.types[t.Name] = t
			c.owner[t.Name] = m.Name
		}
		c.entities = append(c.entities, m.Tracks...)
		c.subs = append(c.subs, m.Subscribes...)
	}
	c.indexPersonal()
	sort.Slice(c.entities, func(i, j int) bool { return c.entities[i].Name < c.entities[j].Name })
	return c, nil
}

// Modules returns every module's declaration, in the order given to New.
func (c *Catalog) Modules() []Spec { return c.modules }

// Module returns the declaration of the named module.
func (c *Catalog) Module(name string) (Spec, bool) {
	for _, m := range c.modules {
		if m.Name == name {
			return m, true
		}
	}
	return Spec{}, false
}

// Type returns the declaration of an event type and the module that owns it.
func (c *Catalog) Type(name string) (t EventType, module string, ok bool) {
	t, ok = c.types[name]
	return t, c.owner[name], ok
}

// TypeNames returns every declared event type, sorted.
func (c *Catalog) TypeNames() []string {
	out := make([]string, 0, len(c.types))
	for n := range c.types {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Entities returns the tracked entities, sorted by name. The change feed
// builds record.written.<Name> / record.deleted.<Name> from their streams.
func (c *Catalog) Entities() []Entity { return c.entities }

// Entity returns the tracked entity named name.
func (c *Catalog) Entity(name string) (Entity, bool) {
	for _, e := range c.entities {
		if e.Name == name {
			return e, true
		}
	}
	return Entity{}, false
}

// ChangeTypes returns the change-event types of every tracked entity, sorted.
func (c *Catalog) ChangeTypes() []string {
	var out []string
	for _, e := range c.entities {
		out = append(out, ChangeType(e.Name, false), ChangeType(e.Name, true))
	}
	sort.Strings(out)
	return out
}

// Subscriptions returns every declared subscription, in declaration order.
func (c *Catalog) Subscriptions() []SubscriptionSpec { return c.subs }

// Matching returns the declared subscriptions, on any lane, whose glob
// matches eventType.
func (c *Catalog) Matching(eventType string) []SubscriptionSpec {
	var out []SubscriptionSpec
	for _, s := range c.subs {
		if Match(s.Types, eventType) {
			out = append(out, s)
		}
	}
	return out
}

// Known reports whether eventType is declared or is a change-event type of a
// tracked entity.
func (c *Catalog) Known(eventType string) bool {
	if _, ok := c.types[eventType]; ok {
		return true
	}
	if e, _, ok := ParseChangeType(eventType); ok {
		_, tracked := c.Entity(e)
		return tracked
	}
	return false
}

// Prepare implements eventstore.Catalog: it refuses an undeclared type (and
// change-event types, which never enter the log) and a payload that does not
// fit the declared Go type of the type's current schema version, naming the
// field. It returns that version and the payload in envelope form.
func (c *Catalog) Prepare(eventType string, payload any) (int, map[string]any, error) {
	t, ok := c.types[eventType]
	if !ok {
		if IsChangeType(eventType) {
			return 0, nil, fmt.Errorf("%w: %s is a change-feed type; change events come from tracked tables' streams and are never emitted into the log", ErrUndeclared, eventType)
		}
		return 0, nil, fmt.Errorf("%w: %s is declared by no module; add it to the Emits of the module that produces it", ErrUndeclared, eventType)
	}
	v := t.Current()
	norm, err := fitPayload(eventType, v, payload)
	if err != nil {
		return 0, nil, err
	}
	return v.Schema, norm, nil
}

// Decode decodes e's payload into a new value of the Go type declared for
// e's type and schema version and returns a pointer to it (e.g.
// *orders.PlacedV2), as a tolerant reader (envelope.DecodePayload):
// members the type does not have are ignored; a missing or null required
// field, or a value of the wrong kind, is an *envelope.DecodeError naming it.
// Personal fields are opened with the catalog's vault (Erased once their
// subject is erased); DecodeContext bounds the vault's reads by a context.
func (c *Catalog) Decode(e envelope.Envelope) (any, error) {
	return c.DecodeContext(context.Background(), e)
}

// DecodeContext is Decode with ctx for the vault's reads.
func (c *Catalog) DecodeContext(ctx context.Context, e envelope.Envelope) (any, error) {
	t, ok := c.types[e.Type]
	if !ok {
		return nil, fmt.Errorf("decode %s: %w", e.Type, ErrUndeclared)
	}
	v, ok := t.Version(e.SchemaVersion)
	if !ok {
		return nil, fmt.Errorf("decode %s: schema version %d (declared: %v): %w", e.Type, e.SchemaVersion, schemas(t), ErrUnknownVersion)
	}
	e, err := c.open(ctx, e, v)
	if err != nil {
		return nil, err
	}
	p := reflect.New(v.Payload)
	if err := e.DecodePayload(p.Interface()); err != nil {
		return nil, fmt.Errorf("decode %s v%d: %w", e.Type, e.SchemaVersion, err)
	}
	return p.Interface(), nil
}

func schemas(t EventType) []int {
	out := make([]int, len(t.Versions))
	for i, v := range t.Versions {
		out[i] = v.Schema
	}
	return out
}
