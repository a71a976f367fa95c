package catalog

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/fourlanes/fourlanes/pkg/internal/ident"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// Problem is one thing wrong with a set of declarations.
type Problem struct {
	// Check is the gate check that failed: 3 (a glob matches nothing), 4 (a
	// change-feed subscriber off BEST_EFFORT, or BEST_EFFORT off the change
	// feed), or 0 for a malformed declaration. Checks 1 and 2 need the
	// emitting code and are the gate's own.
	Check int
	// Kind is "module", "type", "entity" or "subscription"; Name names it.
	Kind, Name string
	Msg        string
}

func (p Problem) String() string {
	if p.Check > 0 {
		return fmt.Sprintf("(%d) %s %s: %s", p.Check, p.Kind, p.Name, p.Msg)
	}
	return fmt.Sprintf("%s %s: %s", p.Kind, p.Name, p.Msg)
}

// validModule is a module's form: ^[a-z][a-z0-9_-]*$.
func validModule(name string) bool {
	return ident.Word(name, 0, ident.Lower, ident.LowerDigitUnderscoreHyphen)
}

// validSubscription is a subscription's form:
// ^[a-z][a-z0-9_-]*(\.[a-z0-9][a-z0-9_-]*)*$.
func validSubscription(name string) bool {
	first := ident.Lower
	for {
		seg, rest, more := strings.Cut(name, ".")
		if !ident.Word(seg, 0, first, ident.LowerDigitUnderscoreHyphen) {
			return false
		}
		if !more {
			return true
		}
		name, first = rest, ident.LowerDigit
	}
}

// ValidOwner reports whether name has the form of an owner's name
// (Module.Owner, Subscription.Owner): it names alarms, so 1 to 63
// lower-case letters, digits and '-', starting with a letter
// (^[a-z][a-z0-9-]{0,62}$).
func ValidOwner(name string) bool { return ident.Word(name, 63, ident.Lower, ident.LowerDigitHyphen) }

// Validate checks a set of module declarations: well-formed names, no
// duplicates, and gate checks 3 and 4. It does not need handlers or payload
// types, so the gate runs it on declarations read from source.
func Validate(mods []Spec) []Problem {
	var ps []Problem
	add := func(check int, kind, name, format string, args ...any) {
		ps = append(ps, Problem{Check: check, Kind: kind, Name: name, Msg: fmt.Sprintf(format, args...)})
	}
	modules := map[string]bool{}
	typeOwner := map[string]string{}
	entityOwner := map[string]string{}
	subOwner := map[string]string{}
	var declared []string
	versions := map[string][]int{}
	for _, m := range mods {
		if !validModule(m.Name) {
			add(0, "module", m.Name, "name must be lower case letters, digits, '-' or '_' (e.g. orders)")
		}
		if modules[m.Name] {
			add(0, "module", m.Name, "is declared twice; a module has exactly one declaration")
		}
		modules[m.Name] = true
		if m.Owner != "" && !ValidOwner(m.Owner) {
			add(0, "module", m.Name, "owner %q must be lower case letters, digits or '-', at most 63 (e.g. team-orders)", m.Owner)
		}
		for _, t := range m.Emits {
			switch {
			case !envelope.ValidType(t.Name):
				add(0, "type", t.Name, "is not <module>.<name> (lower case, e.g. order.placed)")
			case IsChangeType(t.Name):
				add(0, "type", t.Name, "is in the change-feed namespace %q; change events come from tracked entities (Module.Tracks), not from Emits", ChangePrefix+"*")
			}
			if o, dup := typeOwner[t.Name]; dup {
				add(0, "type", t.Name, "is declared by module %s and again by %s; a type has exactly one owner", o, m.Name)
				continue
			}
			typeOwner[t.Name] = m.Name
			declared = append(declared, t.Name)
			if len(t.Versions) == 0 {
				add(0, "type", t.Name, "declares no schema version; add Versions: []catalog.Version{catalog.V[Payload](1)}")
			}
			last := 0
			for _, v := range t.Versions {
				if v.Schema <= last {
					add(0, "type", t.Name, "schema versions must start at 1 and ascend; got %d after %d", v.Schema, last)
				}
				last = v.Schema
				versions[t.Name] = append(versions[t.Name], v.Schema)
			}
		}
		for _, e := range m.Tracks {
			if !ValidEntity(e.Name) {
				add(0, "entity", e.Name, "entity names are upper case letters, digits and '_' (e.g. ORDER)")
			}
			if e.TableEnv == "" || e.TenantAttr == "" || e.IDAttr == "" || e.VersionAttr == "" {
				add(0, "entity", e.Name, "needs TableEnv, TenantAttr, IDAttr and VersionAttr so the change feed can read its stream")
			}
			if o, dup := entityOwner[e.Name]; dup {
				add(0, "entity", e.Name, "is tracked by module %s and again by %s", o, m.Name)
			}
			entityOwner[e.Name] = m.Name
		}
	}
	var changeTypes []string
	for e := range entityOwner {
		changeTypes = append(changeTypes, ChangeType(e, false), ChangeType(e, true))
		versions[ChangeType(e, false)] = []int{ChangeSchemaVersion}
		versions[ChangeType(e, true)] = []int{ChangeSchemaVersion}
	}
	sort.Strings(declared)
	sort.Strings(changeTypes)
	known := append(slices.Clone(declared), changeTypes...)

	for _, m := range mods {
		for _, s := range m.Subscribes {
			if !validSubscription(s.Name) {
				add(0, "subscription", s.Name, "name must be lower case, dot-separated (e.g. notifications.order-email)")
			}
			if o, dup := subOwner[s.Name]; dup {
				add(0, "subscription", s.Name, "is declared by module %s and again by %s; subscription names are unique (they key claims)", o, m.Name)
			}
			subOwner[s.Name] = m.Name
			if s.Owner != "" && s.Owner != m.Owner && !ValidOwner(s.Owner) {
				add(0, "subscription", s.Name, "owner %q must be lower case letters, digits or '-', at most 63 (e.g. team-orders)", s.Owner)
			}
			switch {
			case s.Lane == "":
				add(0, "subscription", s.Name, "has no lane; set Lane: catalog.Durable (at least once, dead-lettered), catalog.Local or catalog.Inline (in the emitting service)")
			case !s.Lane.Valid():
				add(0, "subscription", s.Name, "lane %q is not one of INLINE, LOCAL, DURABLE, BEST_EFFORT", s.Lane)
			default:
				if msg := s.Start.check(s.Lane); msg != "" {
					add(0, "subscription", s.Name, "%s", msg)
				}
			}
			if len(s.Reads) == 0 {
				add(0, "subscription", s.Name, "reads no schema version; list the versions its handler can decode in Reads")
			}
			if !ValidGlob(s.Types) {
				add(0, "subscription", s.Name, "type glob %q is not a type with '*' or '?' wildcards and a literal module part (e.g. order.*)", s.Types)
				continue
			}
			var matched []string
			for _, t := range known {
				if Match(s.Types, t) {
					matched = append(matched, t)
				}
			}
			if len(matched) == 0 {
				hint := "nothing declares such a type"
				if near := nearest(s.Types, known); near != "" {
					hint = fmt.Sprintf("did you mean %s?", near)
				}
				add(3, "subscription", s.Name, "type glob %q matches no declared type and no change-feed type of a tracked entity (%s); it would never run; %s",
					s.Types, tracked(entityOwner), hint)
			} else if len(s.Reads) > 0 {
				readable := false
				for _, t := range matched {
					for _, v := range s.Reads {
						readable = readable || slices.Contains(versions[t], v)
					}
				}
				if !readable {
					add(0, "subscription", s.Name, "reads schema versions %v, which none of the types it matches (%s) declares", s.Reads, strings.Join(matched, ", "))
				}
			}
			change := CouldMatchPrefix(s.Types, ChangePrefix)
			switch {
			case change && s.Lane != BestEffort && s.Lane.Valid():
				add(4, "subscription", s.Name, "type glob %q can match change events, which only the change feed dispatches (BEST_EFFORT); on %s it would never receive them; set Lane: catalog.BestEffort, or narrow the glob to declared types",
					s.Types, s.Lane)
			case !change && s.Lane == BestEffort:
				add(4, "subscription", s.Name, "is on BEST_EFFORT, which only the change feed dispatches, but type glob %q matches no change event (%s<ENTITY>); it would never run; use DURABLE, LOCAL or INLINE",
					s.Types, ChangePrefix+"*.")
			}
		}
	}
	return ps
}

func tracked(entities map[string]string) string {
	if len(entities) == 0 {
		return "no entity is tracked"
	}
	var es []string
	for e := range entities {
		es = append(es, e)
	}
	sort.Strings(es)
	return "tracked: " + strings.Join(es, ", ")
}

// nearest returns the known type closest to glob by edit distance, if close
// enough to be a plausible typo.
func nearest(glob string, known []string) string {
	best, bestD := "", 1<<30
	for _, k := range known {
		if d := distance(glob, k); d < bestD {
			best, bestD = k, d
		}
	}
	if bestD > max(3, len(glob)/2) {
		return ""
	}
	return best
}

// distance is the Levenshtein distance where a '*' in a costs nothing to
// stretch over any run of b's characters.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] || a[i-1] == '?' {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if a[i-1] == '*' {
				cur[j] = min(cur[j], prev[j], cur[j-1]) // '*' matches empty, or absorbs b[j-1]
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
