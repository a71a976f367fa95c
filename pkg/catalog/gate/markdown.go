package gate

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/fourlanes/fourlanes/pkg/catalog"
)

// Markdown renders the catalog: every module, every event type with its
// schema versions, producers and subscribers by lane, the change feed of
// each tracked entity, and every subscription by lane. The output depends on
// declarations and producers only (not line numbers), so unrelated edits do
// not make it stale.
func (r *Report) Markdown() []byte {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Event catalog\n\n")
	w("Generated from the module declarations (`catalog.Module` values) and the `Emit` calls in the source; do not edit.\n")
	w("Regenerate it with `fourlanes gate -catalog CATALOG.md` in the application's module; `fourlanes gate -check-catalog CATALOG.md` fails while it is stale.\n\n")

	mods := append([]Module(nil), r.Modules...)
	sort.Slice(mods, func(i, j int) bool { return mods[i].Spec.Name < mods[j].Spec.Name })
	var subs []catalog.SubscriptionSpec
	handler := map[string]string{}
	entities := map[string]Module{}
	owner := map[string]Module{}
	for _, m := range mods {
		subs = append(subs, m.Spec.Subscribes...)
		for k, v := range m.Handlers {
			handler[k] = v
		}
		for _, e := range m.Spec.Tracks {
			entities[e.Name] = m
		}
		for _, t := range m.Spec.Emits {
			owner[t.Name] = m
		}
	}
	producers := map[string][]string{}
	for _, e := range r.Emits {
		if e.Main {
			continue // tools and benchmarks are not producers (see check 2)
		}
		if !containsStr(producers[e.Type], e.Func) {
			producers[e.Type] = append(producers[e.Type], e.Func)
		}
	}
	subscribers := func(t string) string {
		var out []string
		for _, lane := range catalog.Lanes {
			for _, s := range subs {
				if s.Lane == lane && catalog.Match(s.Types, t) {
					out = append(out, fmt.Sprintf("%s `%s` (reads %s)", lane, s.Name, ints(s.Reads)))
				}
			}
		}
		if len(out) == 0 {
			return "none"
		}
		return strings.Join(out, "; ")
	}

	w("## Modules\n\n| module | package | emits | tracks | subscriptions |\n|---|---|---|---|---|\n")
	for _, m := range mods {
		var emits, tracks, ss []string
		for _, t := range m.Spec.Emits {
			emits = append(emits, "`"+t.Name+"`")
		}
		for _, e := range m.Spec.Tracks {
			tracks = append(tracks, "`"+e.Name+"`")
		}
		for _, s := range m.Spec.Subscribes {
			ss = append(ss, fmt.Sprintf("`%s` %s", s.Name, s.Lane))
		}
		w("| %s | `%s` | %s | %s | %s |\n", m.Spec.Name, m.Pkg, dash(emits), dash(tracks), dash(ss))
	}

	// Owners, only when one is declared (a catalog without owners stays as it was).
	owned := map[string][]string{}
	for _, m := range mods {
		if m.Spec.Owner != "" {
			owned[m.Spec.Owner] = append(owned[m.Spec.Owner], "module "+m.Spec.Name)
		}
		for _, s := range m.Spec.Subscribes {
			if s.Owner != "" && s.Owner != m.Spec.Owner {
				owned[s.Owner] = append(owned[s.Owner], fmt.Sprintf("`%s` %s", s.Name, s.Lane))
			}
		}
	}
	if len(owned) > 0 {
		w("\n## Owners\n\nWho is paged for a module's dead letters, LOCAL-handler failures and unmatched event types (`Owner`; the deployment maps each to an alarm destination).\n\n| owner | paged for |\n|---|---|\n")
		for _, o := range slices.Sorted(maps.Keys(owned)) {
			w("| %s | %s |\n", o, strings.Join(owned[o], ", "))
		}
	}

	w("\n## Event types\n")
	var types []string
	for t := range owner {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		m := owner[t]
		var et catalog.EventType
		for _, x := range m.Spec.Emits {
			if x.Name == t {
				et = x
			}
		}
		w("\n### `%s`\n\n", t)
		if et.Doc != "" {
			w("%s\n\n", et.Doc)
		}
		w("- owner: %s\n", m.Spec.Name)
		var vs []string
		for i, v := range et.Versions {
			name := "?"
			if ps := m.Payloads[t]; i < len(ps) {
				name = ps[i]
			}
			cur := ""
			if i == len(et.Versions)-1 {
				cur = ", current"
			}
			up := ""
			if slices.Contains(m.Upcasts[t], v.Schema) && i > 0 {
				up = fmt.Sprintf(" (upcast from v%d)", et.Versions[i-1].Schema)
			}
			vs = append(vs, fmt.Sprintf("v%d `%s`%s%s", v.Schema, name, up, cur))
		}
		w("- schema versions: %s\n", dash(vs))
		if et.Discriminator != "" {
			w("- discriminator: `%s`\n", et.Discriminator)
		}
		ps := append([]string(nil), producers[t]...)
		sort.Strings(ps)
		for i := range ps {
			ps[i] = "`" + ps[i] + "`"
		}
		w("- producers: %s\n", dash(ps))
		w("- subscribers: %s\n", subscribers(t))
	}

	w("\n## Change feed (tracked entities)\n")
	var ents []string
	for e := range entities {
		ents = append(ents, e)
	}
	sort.Strings(ents)
	if len(ents) == 0 {
		w("\nNo entity is tracked.\n")
	}
	for _, name := range ents {
		m := entities[name]
		var e catalog.Entity
		for _, x := range m.Spec.Tracks {
			if x.Name == name {
				e = x
			}
		}
		w("\n### `%s`\n\n", name)
		if e.Doc != "" {
			w("%s\n\n", e.Doc)
		}
		w("- tracked by: %s; table from `$%s`; tenant `%s`, id `%s`, version `%s`\n", m.Spec.Name, e.TableEnv, e.TenantAttr, e.IDAttr, e.VersionAttr)
		for _, del := range []bool{false, true} {
			t := catalog.ChangeType(name, del)
			w("- `%s` (v%d, payload `catalog.ChangeV1`): %s\n", t, catalog.ChangeSchemaVersion, subscribers(t))
		}
	}

	w("\n## Subscriptions by lane\n")
	for _, lane := range catalog.Lanes {
		w("\n### %s\n\nDispatched by %s.\n\n", lane, lane.Dispatcher())
		var rows []catalog.SubscriptionSpec
		for _, s := range subs {
			if s.Lane == lane {
				rows = append(rows, s)
			}
		}
		if len(rows) == 0 {
			w("None.\n")
			continue
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
		if lane == catalog.Durable {
			// The start is recorded so that a change of it is seen
			// (StartChanges), not only a stale file.
			w("| subscription | module | types | reads | handler | start | matches |\n|---|---|---|---|---|---|---|\n")
		} else {
			w("| subscription | module | types | reads | handler | matches |\n|---|---|---|---|---|---|\n")
		}
		for _, s := range rows {
			var matches []string
			for _, t := range types {
				if catalog.Match(s.Types, t) {
					matches = append(matches, "`"+t+"`")
				}
			}
			for _, e := range ents {
				for _, del := range []bool{false, true} {
					if t := catalog.ChangeType(e, del); catalog.Match(s.Types, t) {
						matches = append(matches, "`"+t+"`")
					}
				}
			}
			if lane == catalog.Durable {
				w("| `%s` | %s | `%s` | %s | `%s` | `%s` | %s |\n", s.Name, s.Module, s.Types, ints(s.Reads), handler[s.Name], s.Start, dash(matches))
				continue
			}
			w("| `%s` | %s | `%s` | %s | `%s` | %s |\n", s.Name, s.Module, s.Types, ints(s.Reads), handler[s.Name], dash(matches))
		}
	}
	return []byte(b.String())
}

func dash(xs []string) string {
	if len(xs) == 0 {
		return "—"
	}
	return strings.Join(xs, ", ")
}

func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

func containsStr(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// StartChanges compares the start of each DURABLE subscription with the one
// old records (a catalog Markdown wrote, checked in): a subscription in both
// whose start differs is a violation (check 6) at its declaration. A
// subscription's start is recorded when it first goes live, so a changed
// Start does nothing on a stack where it is live, and on one where it is not
// yet live it silently changes what history it is given; history is
// delivered with a backfill instead. A file written before starts were
// recorded has none to compare.
func (r *Report) StartChanges(old []byte, file string) []Violation {
	recorded := recordedStarts(old)
	var out []Violation
	for _, m := range r.Modules {
		for _, s := range m.Spec.Subscribes {
			was, ok := recorded[s.Name]
			if !ok || s.Lane != catalog.Durable || was == s.Start.String() {
				continue
			}
			out = append(out, Violation{Pos: m.subPos[s.Name], Check: 6,
				Msg: startChanged(s.Name, was, s.Start.String(), file, "regenerate "+file+" with `fourlanes gate -catalog "+file+"`")})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// recordedStarts reads the start column of the DURABLE table of a catalog
// Markdown wrote: subscription → start.
func recordedStarts(md []byte) map[string]string {
	out := map[string]string{}
	_, rest, ok := strings.Cut(string(md), "\n### "+string(catalog.Durable)+"\n")
	if !ok {
		return out
	}
	if end := strings.Index(rest, "\n### "); end >= 0 {
		rest = rest[:end]
	}
	startCol := -1
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if startCol < 0 {
			startCol = slices.Index(cells, "start")
			if startCol < 0 {
				return out // written before starts were recorded
			}
			continue
		}
		if len(cells) <= startCol {
			continue
		}
		out[strings.Trim(cells[0], "`")] = strings.Trim(cells[startCol], "`")
	}
	return out
}
