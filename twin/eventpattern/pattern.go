package eventpattern

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// ErrInvalidPattern is wrapped by every error Compile returns.
var ErrInvalidPattern = errors.New("invalid event pattern")

// PatternError says where in a pattern the problem is (a dotted field path)
// and what it is.
type PatternError struct {
	Path   string
	Reason string
}

func (e *PatternError) Error() string {
	if e.Path == "" {
		return "event pattern: " + e.Reason
	}
	return "event pattern at " + e.Path + ": " + e.Reason
}

// Unwrap lets callers test errors.Is(err, ErrInvalidPattern).
func (e *PatternError) Unwrap() error { return ErrInvalidPattern }

// MaxPipesPatternBytes is the longest filter pattern Pipes accept
// (FilterCriteria.Filters[].Pattern, CloudFormation AWS::Pipes::Pipe Filter).
const MaxPipesPatternBytes = 4096

// Option changes how Compile reads a pattern.
type Option func(*config)

type config struct{ pipes bool }

// ForPipes makes Compile refuse what EventBridge Pipes' filters do not accept:
// anything-but with prefix, suffix, equals-ignore-case or wildcard, and
// patterns longer than MaxPipesPatternBytes.
func ForPipes() Option { return func(c *config) { c.pipes = true } }

// Pattern is a compiled event pattern. It is safe for concurrent use.
type Pattern struct {
	root *object
	src  string
}

// String returns the pattern's source text.
func (p *Pattern) String() string { return p.src }

// Compile parses an event pattern.
func Compile(pattern []byte, opts ...Option) (*Pattern, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.pipes && len(pattern) > MaxPipesPatternBytes {
		return nil, &PatternError{Reason: fmt.Sprintf("is %d bytes; Pipes accept at most %d", len(pattern), MaxPipesPatternBytes)}
	}
	v, err := decode(pattern)
	if err != nil {
		return nil, &PatternError{Reason: "not JSON: " + err.Error()}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &PatternError{Reason: "must be a JSON object"}
	}
	c := compiler{cfg: cfg}
	root, err := c.object("", m)
	if err != nil {
		return nil, err
	}
	return &Pattern{root: root, src: string(pattern)}, nil
}

// MustCompile is Compile that panics; for patterns that are constants.
func MustCompile(pattern string, opts ...Option) *Pattern {
	p, err := Compile([]byte(pattern), opts...)
	if err != nil {
		panic(err)
	}
	return p
}

// Match reports whether the JSON event matches the pattern.
func (p *Pattern) Match(event []byte) (bool, error) {
	v, err := decode(event)
	if err != nil {
		return false, fmt.Errorf("decode event: %w", err)
	}
	return p.MatchValue(v), nil
}

// MatchValue matches an already decoded JSON value (maps, slices, strings,
// bools, nil and numbers as json.Number, float64 or an integer type).
func (p *Pattern) MatchValue(event any) bool { return p.root.match(event) }

// decode reads one JSON value, keeping numbers as json.Number so their text
// survives for exact matching.
func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

// object is one level of a pattern: every field must match (AND), and each
// $or group must have one matching branch.
type object struct {
	fields []field
	ors    [][]*object
}

// field is either a nested object pattern or a list of leaf alternatives (OR).
type field struct {
	name string
	sub  *object
	leaf []matcher
}

func (o *object) match(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		return o.matchMap(t)
	case []any:
		if len(t) == 0 {
			return o.matchMap(nil)
		}
		// Any element may match, but all of this object's fields must match
		// within that one element (event-ruler's array consistency).
		for _, e := range t {
			if o.match(e) {
				return true
			}
		}
		return false
	default:
		// A scalar has no sub-fields: only absence conditions can hold.
		return o.matchMap(nil)
	}
}

func (o *object) matchMap(m map[string]any) bool {
	for i := range o.fields {
		f := &o.fields[i]
		v, present := m[f.name]
		if f.sub != nil {
			if !present {
				if !f.sub.matchMap(nil) {
					return false
				}
				continue
			}
			if !f.sub.match(v) {
				return false
			}
			continue
		}
		if !f.matchLeaf(v, present) {
			return false
		}
	}
	for _, group := range o.ors {
		ok := false
		for _, branch := range group {
			if branch.matchMap(m) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func (f *field) matchLeaf(v any, present bool) bool {
	var vals []any
	if present {
		vals = leafValues(v, nil)
	}
	for _, m := range f.leaf {
		if e, ok := m.(existsMatcher); ok {
			if e.want == (len(vals) > 0) {
				return true
			}
			continue
		}
		for _, x := range vals {
			if m.match(x) {
				return true
			}
		}
	}
	return false
}

// leafValues flattens arrays; objects are not leaves and contribute nothing.
func leafValues(v any, acc []any) []any {
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			acc = leafValues(e, acc)
		}
	case map[string]any:
	default:
		acc = append(acc, v)
	}
	return acc
}

// numberOf reports the value of a JSON number and its text.
func numberOf(v any) (float64, string, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, n.String(), err == nil
	case float64:
		return n, strconv.FormatFloat(n, 'g', -1, 64), true
	case float32:
		return float64(n), strconv.FormatFloat(float64(n), 'g', -1, 32), true
	case int:
		return float64(n), strconv.Itoa(n), true
	case int64:
		return float64(n), strconv.FormatInt(n, 10), true
	case int32:
		return float64(n), strconv.FormatInt(int64(n), 10), true
	case uint64:
		return float64(n), strconv.FormatUint(n, 10), true
	}
	return 0, "", false
}

type compiler struct{ cfg config }

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func (c compiler) object(path string, m map[string]any) (*object, error) {
	if len(m) == 0 {
		return nil, &PatternError{Path: path, Reason: "empty objects are not allowed"}
	}
	o := &object{}
	for _, name := range sortedKeys(m) {
		v := m[name]
		if name == "$or" {
			if group, ok, err := c.orGroup(path, v); err != nil {
				return nil, err
			} else if ok {
				o.ors = append(o.ors, group)
				continue
			}
			// Like event-ruler: "$or" that is not an array of two or more
			// objects is an ordinary field name.
		}
		p := join(path, name)
		switch t := v.(type) {
		case map[string]any:
			sub, err := c.object(p, t)
			if err != nil {
				return nil, err
			}
			o.fields = append(o.fields, field{name: name, sub: sub})
		case []any:
			leaf, err := c.leaf(p, t)
			if err != nil {
				return nil, err
			}
			o.fields = append(o.fields, field{name: name, leaf: leaf})
		default:
			return nil, &PatternError{Path: p, Reason: "must be an object or an array of values"}
		}
	}
	return o, nil
}

func (c compiler) orGroup(path string, v any) ([]*object, bool, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) < 2 {
		return nil, false, nil
	}
	for _, e := range arr {
		if _, ok := e.(map[string]any); !ok {
			return nil, false, nil
		}
	}
	group := make([]*object, 0, len(arr))
	for i, e := range arr {
		m := e.(map[string]any)
		for k := range m {
			if isOperator(k) {
				return nil, false, &PatternError{Path: join(path, fmt.Sprintf("$or[%d]", i)), Reason: fmt.Sprintf("%q is an operator, not a field name", k)}
			}
		}
		b, err := c.object(path, m)
		if err != nil {
			return nil, false, err
		}
		group = append(group, b)
	}
	return group, true, nil
}

func isOperator(k string) bool {
	switch k {
	case "prefix", "suffix", "equals-ignore-case", "wildcard", "anything-but", "numeric", "exists", "cidr":
		return true
	}
	return false
}

func (c compiler) leaf(path string, vals []any) ([]matcher, error) {
	if len(vals) == 0 {
		return nil, &PatternError{Path: path, Reason: "empty arrays are not allowed"}
	}
	out := make([]matcher, 0, len(vals))
	for _, v := range vals {
		m, err := c.value(path, v)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func (c compiler) value(path string, v any) (matcher, error) {
	switch t := v.(type) {
	case string:
		return exactString(t), nil
	case json.Number:
		f, err := t.Float64()
		return exactNumber{f: f, ok: err == nil, text: t.String()}, nil
	case bool:
		return exactLiteral{v: t}, nil
	case nil:
		return exactLiteral{v: nil}, nil
	case map[string]any:
		return c.operator(path, t)
	}
	return nil, &PatternError{Path: path, Reason: "match values must be strings, numbers, true, false, null or an operator object"}
}

func (c compiler) operator(path string, m map[string]any) (matcher, error) {
	if len(m) != 1 {
		return nil, &PatternError{Path: path, Reason: "an operator object has exactly one key"}
	}
	var op string
	var arg any
	for k, v := range m {
		op, arg = k, v
	}
	bad := func(format string, a ...any) error {
		return &PatternError{Path: path, Reason: op + ": " + fmt.Sprintf(format, a...)}
	}
	switch op {
	case "prefix", "suffix":
		s, fold, err := stringOrFold(arg)
		if err != nil {
			return nil, bad("%v", err)
		}
		if op == "prefix" {
			return prefixMatcher{s: s, fold: fold}, nil
		}
		return suffixMatcher{s: s, fold: fold}, nil
	case "equals-ignore-case":
		s, ok := arg.(string)
		if !ok {
			return nil, bad("must be a string")
		}
		return foldMatcher(s), nil
	case "wildcard":
		s, ok := arg.(string)
		if !ok {
			return nil, bad("must be a string")
		}
		w, err := compileWildcard(s)
		if err != nil {
			return nil, bad("%v", err)
		}
		return w, nil
	case "numeric":
		arr, ok := arg.([]any)
		if !ok {
			return nil, bad("must be an array such as [\">\", 0, \"<=\", 5]")
		}
		r, err := compileRange(arr)
		if err != nil {
			return nil, bad("%v", err)
		}
		return r, nil
	case "exists":
		b, ok := arg.(bool)
		if !ok {
			return nil, bad("must be true or false")
		}
		return existsMatcher{want: b}, nil
	case "anything-but":
		return c.anythingBut(path, arg)
	case "cidr":
		return nil, bad("is not supported by this evaluator")
	}
	return nil, &PatternError{Path: path, Reason: fmt.Sprintf("unknown operator %q", op)}
}

func stringOrFold(arg any) (string, bool, error) {
	switch t := arg.(type) {
	case string:
		return t, false, nil
	case map[string]any:
		if s, ok := t["equals-ignore-case"].(string); ok && len(t) == 1 {
			return s, true, nil
		}
	}
	return "", false, errors.New(`must be a string or {"equals-ignore-case": string}`)
}

func (c compiler) anythingBut(path string, arg any) (matcher, error) {
	bad := func(format string, a ...any) error {
		return &PatternError{Path: path, Reason: "anything-but: " + fmt.Sprintf(format, a...)}
	}
	if m, ok := arg.(map[string]any); ok {
		if len(m) != 1 {
			return nil, bad("an operator object has exactly one key")
		}
		for op, v := range m {
			if c.cfg.pipes {
				return nil, bad("anything-but with %q is not supported by EventBridge Pipes filters", op)
			}
			switch op {
			case "prefix", "suffix":
				s, ok := v.(string)
				if !ok || s == "" {
					return nil, bad("%s must be a non-empty string", op)
				}
				if op == "prefix" {
					return notMatcher{prefixMatcher{s: s}}, nil
				}
				return notMatcher{suffixMatcher{s: s}}, nil
			case "equals-ignore-case":
				strs, err := stringList(v)
				if err != nil {
					return nil, bad("equals-ignore-case %v", err)
				}
				alts := make(anyOf, 0, len(strs))
				for _, s := range strs {
					alts = append(alts, foldMatcher(s))
				}
				return notMatcher{alts}, nil
			case "wildcard":
				strs, err := stringList(v)
				if err != nil {
					return nil, bad("wildcard %v", err)
				}
				alts := make(anyOf, 0, len(strs))
				for _, s := range strs {
					w, err := compileWildcard(s)
					if err != nil {
						return nil, bad("wildcard %v", err)
					}
					alts = append(alts, w)
				}
				return notMatcher{alts}, nil
			}
			return nil, bad("unsupported operator %q", op)
		}
	}
	list, isList := arg.([]any)
	if !isList {
		list = []any{arg}
	}
	if len(list) == 0 {
		return nil, bad("an empty list excludes nothing")
	}
	var strs, nums int
	alts := make(anyOf, 0, len(list))
	for _, v := range list {
		switch t := v.(type) {
		case string:
			strs++
			alts = append(alts, exactString(t))
		case json.Number:
			f, err := t.Float64()
			if err != nil {
				return nil, bad("%v is not a number", t)
			}
			nums++
			alts = append(alts, numericEq(f))
		default:
			return nil, bad("values must be strings or numbers")
		}
	}
	if strs > 0 && nums > 0 {
		return nil, bad("a list must be all strings or all numbers")
	}
	return notMatcher{alts}, nil
}

func stringList(v any) ([]string, error) {
	switch t := v.(type) {
	case string:
		return []string{t}, nil
	case []any:
		if len(t) == 0 {
			return nil, errors.New("must not be empty")
		}
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, errors.New("must be a string or a list of strings")
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, errors.New("must be a string or a list of strings")
}

func compileRange(arr []any) (matcher, error) {
	op := func(i int) (string, float64, error) {
		if i+1 >= len(arr) {
			return "", 0, errors.New("an operator needs a number after it")
		}
		s, ok := arr[i].(string)
		if !ok {
			return "", 0, fmt.Errorf("%v is not an operator", arr[i])
		}
		n, ok := arr[i+1].(json.Number)
		if !ok {
			return "", 0, fmt.Errorf("value of %s must be numeric", s)
		}
		f, err := n.Float64()
		if err != nil {
			return "", 0, fmt.Errorf("value of %s: %w", s, err)
		}
		return s, f, nil
	}
	if len(arr) != 2 && len(arr) != 4 {
		return nil, errors.New(`must be [op, n] or [lower-op, n, upper-op, m]`)
	}
	o1, v1, err := op(0)
	if err != nil {
		return nil, err
	}
	r := rangeMatcher{lo: math.Inf(-1), hi: math.Inf(1)}
	switch o1 {
	case "=":
		if len(arr) != 2 {
			return nil, errors.New(`"=" takes one value`)
		}
		return numericEq(v1), nil
	case ">", ">=":
		r.lo, r.loOpen = v1, o1 == ">"
	case "<", "<=":
		if len(arr) != 2 {
			return nil, errors.New("an upper bound must come last")
		}
		r.hi, r.hiOpen = v1, o1 == "<"
		return r, nil
	default:
		return nil, fmt.Errorf("unknown operator %q", o1)
	}
	if len(arr) == 2 {
		return r, nil
	}
	o2, v2, err := op(2)
	if err != nil {
		return nil, err
	}
	switch o2 {
	case "<", "<=":
		r.hi, r.hiOpen = v2, o2 == "<"
	default:
		return nil, fmt.Errorf("second bound must be < or <=, not %q", o2)
	}
	if r.lo > r.hi {
		return nil, fmt.Errorf("lower bound %v is above upper bound %v", r.lo, r.hi)
	}
	return r, nil
}

// matcher tests one leaf value (never an array or object).
type matcher interface{ match(v any) bool }

type exactString string

func (m exactString) match(v any) bool { s, ok := v.(string); return ok && s == string(m) }

// exactNumber matches numerically, or by its text when the number does not
// fit a float64 (event-ruler inserts both matchers).
type exactNumber struct {
	f    float64
	ok   bool
	text string
}

func (m exactNumber) match(v any) bool {
	f, text, ok := numberOf(v)
	if !ok {
		return false
	}
	return text == m.text || (m.ok && f == m.f)
}

type exactLiteral struct{ v any }

func (m exactLiteral) match(v any) bool {
	switch v.(type) {
	case bool, nil:
		return v == m.v
	}
	return false
}

type prefixMatcher struct {
	s    string
	fold bool
}

func (m prefixMatcher) match(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	if m.fold {
		return hasPrefixFold(s, m.s)
	}
	return strings.HasPrefix(s, m.s)
}

type suffixMatcher struct {
	s    string
	fold bool
}

func (m suffixMatcher) match(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	if m.fold {
		return hasSuffixFold(s, m.s)
	}
	return strings.HasSuffix(s, m.s)
}

type foldMatcher string

func (m foldMatcher) match(v any) bool {
	s, ok := v.(string)
	return ok && strings.EqualFold(s, string(m))
}

type numericEq float64

func (m numericEq) match(v any) bool {
	f, _, ok := numberOf(v)
	return ok && f == float64(m)
}

type rangeMatcher struct {
	lo, hi         float64
	loOpen, hiOpen bool
}

func (m rangeMatcher) match(v any) bool {
	f, _, ok := numberOf(v)
	if !ok {
		return false
	}
	if f < m.lo || (m.loOpen && f == m.lo) {
		return false
	}
	if f > m.hi || (m.hiOpen && f == m.hi) {
		return false
	}
	return true
}

// existsMatcher is handled by field.matchLeaf: it is about the field, not a value.
type existsMatcher struct{ want bool }

func (existsMatcher) match(any) bool { return false }

// anyOf matches if any of its matchers does.
type anyOf []matcher

func (a anyOf) match(v any) bool {
	for _, m := range a {
		if m.match(v) {
			return true
		}
	}
	return false
}

// notMatcher is anything-but: any present value the inner matcher does not
// exclude. A value of another type is never excluded (event-ruler: a string
// list does not exclude numbers and the other way round).
type notMatcher struct{ inner matcher }

func (m notMatcher) match(v any) bool { return !m.inner.match(v) }
