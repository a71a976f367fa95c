package eventpattern

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalidPath is wrapped by every error ParsePath returns.
var ErrInvalidPath = errors.New("invalid JSON path")

// Path is a parsed Pipes dynamic path parameter, such as "$.tenant_id",
// "$.dynamodb.NewImage.tenant_id.S" or "$.items[0].id". Pipes accept an
// entire JSON path in dot notation: names of letters, digits, '-' and '_',
// array indexes, and '*' for every member.
type Path struct {
	raw   string
	steps []step
}

type step struct {
	name  string // member name, when index < 0 and !all
	index int    // array index, or -1
	all   bool   // '*' or '[*]'
}

// IsDynamic reports whether a Pipes parameter value is a JSON path (and so
// resolved per event) rather than a static string.
func IsDynamic(v string) bool { return strings.HasPrefix(v, "$.") || v == "$" }

// ParsePath parses a Pipes dynamic path.
func ParsePath(s string) (Path, error) {
	bad := func(format string, a ...any) (Path, error) {
		return Path{}, fmt.Errorf("%w %q: %s", ErrInvalidPath, s, fmt.Sprintf(format, a...))
	}
	if !strings.HasPrefix(s, "$") {
		return bad("must start with $")
	}
	p := Path{raw: s}
	rest := s[1:]
	for rest != "" {
		switch rest[0] {
		case '.':
			rest = rest[1:]
			n := 0
			for n < len(rest) && isNameByte(rest[n]) {
				n++
			}
			if n == 0 {
				return bad("empty member name")
			}
			name := rest[:n]
			rest = rest[n:]
			if name == "*" {
				p.steps = append(p.steps, step{index: -1, all: true})
				continue
			}
			if strings.Contains(name, "*") {
				return bad("'*' must stand alone")
			}
			p.steps = append(p.steps, step{name: name, index: -1})
		case '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return bad("unclosed [")
			}
			inner := rest[1:end]
			rest = rest[end+1:]
			if inner == "*" {
				p.steps = append(p.steps, step{index: -1, all: true})
				continue
			}
			i, err := strconv.Atoi(inner)
			if err != nil || i < 0 || strings.HasPrefix(inner, "+") {
				return bad("array index %q is not a non-negative integer", inner)
			}
			p.steps = append(p.steps, step{index: i})
		default:
			return bad("unexpected %q", rest[0])
		}
	}
	return p, nil
}

func isNameByte(c byte) bool {
	return c == '_' || c == '-' || c == '*' ||
		('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

// MustParsePath is ParsePath that panics; for paths that are constants.
func MustParsePath(s string) Path {
	p, err := ParsePath(s)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the path as written.
func (p Path) String() string { return p.raw }

// ResolveAll returns every value the path selects in doc, in document order
// for arrays (object members selected by '*' come in no fixed order).
func (p Path) ResolveAll(doc any) []any {
	cur := []any{doc}
	for _, st := range p.steps {
		var next []any
		for _, v := range cur {
			switch t := v.(type) {
			case map[string]any:
				if st.all {
					for _, k := range sortedKeys(t) {
						next = append(next, t[k])
					}
				} else if st.index < 0 {
					if x, ok := t[st.name]; ok {
						next = append(next, x)
					}
				}
			case []any:
				if st.all {
					next = append(next, t...)
				} else if st.index >= 0 && st.index < len(t) {
					next = append(next, t[st.index])
				}
			}
		}
		cur = next
	}
	return cur
}

// Resolve returns the one value the path selects in doc. ok is false when the
// path selects nothing, or more than one value (a target parameter such as
// MessageGroupId needs exactly one).
func (p Path) Resolve(doc any) (any, bool) {
	vals := p.ResolveAll(doc)
	if len(vals) != 1 {
		return nil, false
	}
	return vals[0], true
}

// Resolve parses path and resolves it on doc; a malformed path resolves to
// nothing.
func Resolve(doc any, path string) (any, bool) {
	p, err := ParsePath(path)
	if err != nil {
		return nil, false
	}
	return p.Resolve(doc)
}
