package catalog

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// Upcaster builds a schema version's payload (To) from the previous
// version's. Declare it with the version it builds:
//
//	Versions: []catalog.Version{
//		catalog.V[PlacedV1](1),
//		catalog.V[PlacedV2](2, catalog.Upcast(PlacedV2FromV1)),
//	}
//
// so that a typed handler (Typed) that takes PlacedV2 and Reads 1 and 2
// receives every order.placed v1 upcast. Upcasters run in order, v1 → v2 →
// v3, when a handler reads a version several steps older than it takes.
type Upcaster[To any] struct{ u *upcaster }

type upcaster struct {
	from reflect.Type
	fn   func(any) (any, error)
}

// Upcast returns the upcaster fn: it takes the previous version's payload
// and returns this version's. An error is permanent (a DURABLE
// subscription is dead-lettered with it): the same payload upcasts the same
// way on every retry.
func Upcast[From, To any](fn func(From) (To, error)) Upcaster[To] {
	return Upcaster[To]{u: &upcaster{from: reflect.TypeFor[From](), fn: func(v any) (any, error) { return fn(v.(From)) }}}
}

// UpcastsFrom returns the payload type of the version v is upcast from, or
// nil when v declares no upcaster.
func (v Version) UpcastsFrom() reflect.Type {
	if len(v.up) == 0 {
		return nil
	}
	return v.up[0].from
}

// TypedHandler is a subscription's handler that takes the payload as a Go
// type, decoded (and upcast) by the framework: see Typed.
type TypedHandler[T any] struct {
	takes reflect.Type
	call  func(recv T, ctx context.Context, e envelope.Envelope, p any) error
}

// Typed returns a handler that receives the payload as P, one declared
// version's payload type, decoded once by the framework before fn runs:
//
//	{Name: "inventory.reserve", Types: orders.TypePlaced, Lane: catalog.Inline, Reads: []int{1, 2},
//		Typed: catalog.Typed((*Reserver).OnOrderPlaced)} // func(*Reserver, ctx, envelope.Envelope, orders.PlacedV2) error
//
// Every type the subscription matches must declare a version whose payload
// is P (a record.* subscription may take ChangeV1), and every version in
// Reads must be that one or an older one with upcasters up to it; catalog.New
// refuses anything else. The decoding is envelope.DecodePayload's: members P
// lacks are ignored, and a missing required field or a value of the wrong
// kind is an *envelope.DecodeError naming the field, which the handler never
// sees (DURABLE dead-letters it at once; INLINE returns it to the emitter;
// LOCAL and BEST_EFFORT log and count it).
func Typed[T, P any](fn func(T, context.Context, envelope.Envelope, P) error) *TypedHandler[T] {
	return &TypedHandler[T]{takes: reflect.TypeFor[P](), call: func(recv T, ctx context.Context, e envelope.Envelope, p any) error {
		return fn(recv, ctx, e, p.(P))
	}}
}

// UpcastError reports that an upcaster failed on an event's payload. It is
// permanent: the same payload fails the same way on every retry.
type UpcastError struct {
	Type     string // event type
	From, To int    // schema versions
	Err      error
}

func (e *UpcastError) Error() string {
	return fmt.Sprintf("upcast %s v%d to v%d: %v", e.Type, e.From, e.To, e.Err)
}

func (e *UpcastError) Unwrap() error { return e.Err }

// Permanent reports true.
func (e *UpcastError) Permanent() bool { return true }

// DecodeAs decodes e's payload as the Go type takes, one declared version's
// payload type: e's own version is decoded (Decode), then upcast version by
// version to the one whose payload is takes. It returns a value of type
// takes (not a pointer). The errors: ErrUndeclared, ErrUnknownVersion, an
// *envelope.DecodeError naming the field, an *UpcastError, or one saying
// that no chain of upcasters leads from e's version to takes.
func (c *Catalog) DecodeAs(e envelope.Envelope, takes reflect.Type) (any, error) {
	return c.DecodeAsContext(context.Background(), e, takes)
}

// DecodeAsContext is DecodeAs with ctx for the vault's reads (Decode).
func (c *Catalog) DecodeAsContext(ctx context.Context, e envelope.Envelope, takes reflect.Type) (any, error) {
	if e.SchemaVersion == ChangeSchemaVersion && takes == changeType && IsChangeType(e.Type) {
		var p ChangeV1
		if err := e.DecodePayload(&p); err != nil {
			return nil, fmt.Errorf("decode %s v%d: %w", e.Type, e.SchemaVersion, err)
		}
		return p, nil
	}
	t, ok := c.types[e.Type]
	if !ok {
		return nil, fmt.Errorf("decode %s: %w", e.Type, ErrUndeclared)
	}
	from := slices.IndexFunc(t.Versions, func(v Version) bool { return v.Schema == e.SchemaVersion })
	to := slices.IndexFunc(t.Versions, func(v Version) bool { return v.Payload == takes })
	switch {
	case from < 0:
		return nil, fmt.Errorf("decode %s: schema version %d (declared: %v): %w", e.Type, e.SchemaVersion, schemas(t), ErrUnknownVersion)
	case to < 0:
		return nil, fmt.Errorf("decode %s v%d as %v: no version of %s has that payload type", e.Type, e.SchemaVersion, takes, e.Type)
	case to < from:
		return nil, fmt.Errorf("decode %s v%d as %v (v%d): upcasters only go up", e.Type, e.SchemaVersion, takes, t.Versions[to].Schema)
	}
	p, err := c.DecodeContext(ctx, e)
	if err != nil {
		return nil, err
	}
	v := reflect.ValueOf(p).Elem().Interface()
	for i := from + 1; i <= to; i++ {
		next := t.Versions[i]
		if len(next.up) == 0 {
			return nil, fmt.Errorf("decode %s v%d as %v: v%d declares no upcaster from v%d", e.Type, e.SchemaVersion, takes, next.Schema, t.Versions[i-1].Schema)
		}
		if v, err = next.up[0].fn(v); err != nil {
			return nil, &UpcastError{Type: e.Type, From: t.Versions[i-1].Schema, To: next.Schema, Err: err}
		}
	}
	return v, nil
}

var changeType = reflect.TypeFor[ChangeV1]()

// typedProblems checks a typed subscription against the types it matches:
// each declares a version whose payload is the one its handler takes, and
// each version it reads is that one or an older one with upcasters up to
// it.
func typedProblems(s SubscriptionSpec, types map[string]EventType, changeTypes []string) []Problem {
	var ps []Problem
	add := func(format string, args ...any) {
		ps = append(ps, Problem{Kind: "subscription", Name: s.Name, Msg: fmt.Sprintf(format, args...)})
	}
	if s.Takes.Kind() != reflect.Struct {
		add("its Typed handler takes %v, which is not a struct; take the payload type of a declared version", s.Takes)
		return ps
	}
	names := make([]string, 0, len(types))
	for n := range types {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		if !Match(s.Types, name) {
			continue
		}
		t := types[name]
		to := slices.IndexFunc(t.Versions, func(v Version) bool { return v.Payload == s.Takes })
		if to < 0 {
			add("its Typed handler takes %v, but %s declares it in no version (its versions: %s); narrow the glob, or use Handler", s.Takes, name, payloadList(t))
			continue
		}
		for _, r := range s.Reads {
			from := slices.IndexFunc(t.Versions, func(v Version) bool { return v.Schema == r })
			switch {
			case from < 0:
				continue // another matched type's version (Validate checks one is readable)
			case from > to:
				add("reads %s v%d, newer than v%d, whose %v its Typed handler takes; upcasters only go up: take v%d's payload type", name, r, t.Versions[to].Schema, s.Takes, r)
			default:
				for i := from + 1; i <= to; i++ {
					if len(t.Versions[i].up) == 0 {
						add("reads %s v%d, but v%d declares no upcaster from v%d, so its Typed handler (taking v%d's %v) cannot receive it: declare catalog.V[...](%d, catalog.Upcast(...)), or drop %d from Reads",
							name, r, t.Versions[i].Schema, t.Versions[i-1].Schema, t.Versions[to].Schema, s.Takes, t.Versions[i].Schema, r)
						break
					}
				}
			}
		}
	}
	for _, ct := range changeTypes {
		if Match(s.Types, ct) && s.Takes != changeType {
			add("its Typed handler takes %v, but change events (%s) carry catalog.ChangeV1", s.Takes, ct)
		}
	}
	return ps
}

// upcastProblems checks an event type's upcasters: each takes the previous
// version's payload, and a version has at most one.
func upcastProblems(t EventType) []Problem {
	var ps []Problem
	for i, v := range t.Versions {
		switch {
		case len(v.up) > 1:
			ps = append(ps, Problem{Kind: "type", Name: t.Name, Msg: fmt.Sprintf("schema version %d declares %d upcasters; it is built from the previous version by one", v.Schema, len(v.up))})
		case len(v.up) == 1 && i == 0:
			ps = append(ps, Problem{Kind: "type", Name: t.Name, Msg: fmt.Sprintf("schema version %d declares an upcaster, but no version comes before it", v.Schema)})
		case len(v.up) == 1 && v.up[0].from != t.Versions[i-1].Payload:
			ps = append(ps, Problem{Kind: "type", Name: t.Name, Msg: fmt.Sprintf("schema version %d's upcaster takes %v, but the version before it (v%d) has payload %v; an upcaster builds a version from the one before",
				v.Schema, v.up[0].from, t.Versions[i-1].Schema, t.Versions[i-1].Payload)})
		}
	}
	return ps
}

func payloadList(t EventType) string {
	var out string
	for i, v := range t.Versions {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("v%d %v", v.Schema, v.Payload)
	}
	return out
}
