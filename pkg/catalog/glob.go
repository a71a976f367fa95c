package catalog

import (
	"strings"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// Match reports whether the type glob matches eventType: '*' matches any run
// of characters (dots included), '?' exactly one character; everything else
// matches itself.
func Match(glob, eventType string) bool {
	// Iterative wildcard matching with one backtrack point per '*'.
	g, s := 0, 0
	star, mark := -1, 0
	for s < len(eventType) {
		switch {
		case g < len(glob) && (glob[g] == '?' || glob[g] == eventType[s]):
			g++
			s++
		case g < len(glob) && glob[g] == '*':
			star, mark = g, s
			g++
		case star >= 0:
			mark++
			g, s = star+1, mark
		default:
			return false
		}
	}
	for g < len(glob) && glob[g] == '*' {
		g++
	}
	return g == len(glob)
}

// CouldMatchPrefix reports whether some type beginning with prefix matches
// glob. The gate uses it to tell whether a subscription can receive change
// events (prefix "record.") however its entity part is spelled.
func CouldMatchPrefix(glob, prefix string) bool {
	return prefixMatch(glob, prefix)
}

func prefixMatch(glob, p string) bool {
	if p == "" {
		return true // whatever is left of the glob can match some suffix
	}
	if glob == "" {
		return false
	}
	switch glob[0] {
	case '*':
		// '*' absorbs nothing, or one more character of p.
		return prefixMatch(glob[1:], p) || prefixMatch(glob, p[1:])
	case '?':
		return prefixMatch(glob[1:], p[1:])
	default:
		return glob[0] == p[0] && prefixMatch(glob[1:], p[1:])
	}
}

// ValidGlob reports whether glob is a well-formed type glob: a type name in
// which '*' and '?' may stand for characters, with a literal module part
// ("order.*", "record.*.ORDER"; not "*").
func ValidGlob(glob string) bool {
	if glob == "" || strings.HasPrefix(glob, "*") || strings.HasPrefix(glob, "?") {
		return false
	}
	r := strings.NewReplacer("*", "x", "?", "x").Replace(glob)
	return envelope.ValidType(r)
}

// HasWildcard reports whether glob contains '*' or '?'.
func HasWildcard(glob string) bool { return strings.ContainsAny(glob, "*?") }
