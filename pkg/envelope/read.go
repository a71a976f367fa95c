package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"unicode/utf8"
)

// This file reads a JSON line strictly (pkg/chain/SPEC.md §1, §6): as
// RFC 8259 syntax, keeping every way it breaks I-JSON (RFC 7493) — a byte
// order mark, a repeated member name at any depth, invalid UTF-8, a lone
// surrogate, escaped or not — instead of repairing it as encoding/json does
// (which merges repeated members and turns bad text into U+FFFD). A string
// that breaks UTF-8 keeps its invalid bytes (a lone surrogate as its WTF-8
// bytes), so utf8.ValidString tells it from a good one.

// MaxReadDepth bounds nesting in a line ReadObject reads (the line's object is
// level 1); a deeper line is not read at all. A well-formed envelope nests at
// most MaxPayloadDepth+1 levels.
const MaxReadDepth = 64

// ErrNotJSON wraps every reason ReadObject cannot read a line.
var ErrNotJSON = errors.New("not a JSON object")

// Object is a JSON object read by ReadObject.
type Object struct {
	members  map[string]any // values in payload form (json.Number for numbers); the last of a repeated name
	repeated map[string]bool
	// Violation is the first way the text breaks I-JSON, nil if none.
	Violation error
	// ViolationField is where Violation sits, as a path below the object
	// (".items[2].sku"; "" for the object itself, e.g. a byte order mark or
	// a member name that is not valid UTF-8).
	ViolationField string
	// ViolationReason is Violation without its byte offset ("invalid UTF-8").
	ViolationReason string
}

// Member returns the value of the member name when it occurs exactly once.
func (o *Object) Member(name string) (any, bool) {
	v, ok := o.members[name]
	return v, ok && !o.repeated[name]
}

// Has reports whether the member name occurs at all.
func (o *Object) Has(name string) bool { _, ok := o.members[name]; return ok }

// Names returns the distinct member names, sorted.
func (o *Object) Names() []string {
	out := make([]string, 0, len(o.members))
	for k := range o.members {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ReadObject reads b (without its line end) as one JSON text whose value is an
// object. An error (wrapping ErrNotJSON) means b is not RFC 8259 JSON, its
// value is not an object, or it nests deeper than MaxReadDepth; what is JSON
// but breaks I-JSON is read, with the first break in Violation.
func ReadObject(b []byte) (*Object, error) {
	r := reader{b: b}
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		r.violate("starts with a byte order mark (U+FEFF)")
		r.i = 3
	}
	r.space()
	if r.i >= len(b) || b[r.i] != '{' {
		return nil, r.syntax("the line is not a JSON object")
	}
	obj := &Object{repeated: map[string]bool{}}
	v, err := r.object(1, obj.repeated)
	if err != nil {
		return nil, err
	}
	r.space()
	if r.i != len(b) {
		return nil, r.syntax("data after the JSON object")
	}
	obj.members = v
	obj.Violation = r.violation
	obj.ViolationReason = r.reason
	for i := len(r.vpath) - 1; i >= 0; i-- {
		obj.ViolationField += r.vpath[i]
	}
	return obj, nil
}

type reader struct {
	b         []byte
	i         int
	violation error
	reason    string
	// vpath is the violation's path, innermost segment first: each object
	// and array that sees its first violation appear inside one of its
	// values adds that value's segment on the way out.
	vpath []string
}

func (r *reader) violate(format string, args ...any) {
	r.violateAt(r.i, format, args...)
}

func (r *reader) violateAt(at int, format string, args ...any) {
	if r.violation == nil {
		r.reason = fmt.Sprintf(format, args...)
		r.violation = fmt.Errorf("byte %d: %s", at, r.reason)
	}
}

func (r *reader) syntax(what string) error {
	return fmt.Errorf("%w: byte %d: %s", ErrNotJSON, r.i, what)
}

func (r *reader) space() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

func (r *reader) value(depth int) (any, error) {
	r.space()
	if r.i >= len(r.b) {
		return nil, r.syntax("unexpected EOF")
	}
	switch c := r.b[r.i]; {
	case c == '{':
		return r.object(depth+1, nil)
	case c == '[':
		return r.array(depth + 1)
	case c == '"':
		return r.str()
	case c == '-' || '0' <= c && c <= '9':
		return r.number()
	case r.literal("true"):
		return true, nil
	case r.literal("false"):
		return false, nil
	case r.literal("null"):
		return nil, nil
	}
	return nil, r.syntax("not a JSON value")
}

func (r *reader) literal(lit string) bool {
	if len(r.b)-r.i >= len(lit) && string(r.b[r.i:r.i+len(lit)]) == lit {
		r.i += len(lit)
		return true
	}
	return false
}

// object reads the object at r.b[r.i] == '{' at depth; repeated, when not
// nil, collects its repeated names.
func (r *reader) object(depth int, repeated map[string]bool) (map[string]any, error) {
	if depth > MaxReadDepth {
		return nil, r.syntax(fmt.Sprintf("nested more than %d levels deep", MaxReadDepth))
	}
	r.i++
	out := map[string]any{}
	r.space()
	if r.i < len(r.b) && r.b[r.i] == '}' {
		r.i++
		return out, nil
	}
	for {
		r.space()
		if r.i >= len(r.b) {
			return nil, r.syntax("unexpected EOF, expected a member name")
		}
		if r.b[r.i] != '"' {
			return nil, r.syntax("expected a member name")
		}
		at := r.i
		clean := r.violation == nil
		name, err := r.str()
		if err != nil {
			return nil, err
		}
		if clean && r.violation != nil {
			// The name itself is bad: the fault is this object's.
			r.reason = "has a member name that is not valid Unicode (" + r.reason + ")"
			clean = false
		}
		r.space()
		if r.i >= len(r.b) {
			return nil, r.syntax("unexpected EOF, expected ':'")
		}
		if r.b[r.i] != ':' {
			return nil, r.syntax("expected ':'")
		}
		r.i++
		v, err := r.value(depth)
		if err != nil {
			return nil, err
		}
		if _, dup := out[name]; dup {
			r.violateAt(at, "member name %q appears more than once in one object", name)
			if repeated != nil {
				repeated[name] = true
			}
		}
		if clean && r.violation != nil {
			r.vpath = append(r.vpath, "."+name)
		}
		out[name] = v
		r.space()
		if r.i >= len(r.b) {
			return nil, r.syntax("unexpected EOF in an object")
		}
		switch r.b[r.i] {
		case ',':
			r.i++
		case '}':
			r.i++
			return out, nil
		default:
			return nil, r.syntax("expected ',' or '}'")
		}
	}
}

func (r *reader) array(depth int) ([]any, error) {
	if depth > MaxReadDepth {
		return nil, r.syntax(fmt.Sprintf("nested more than %d levels deep", MaxReadDepth))
	}
	r.i++
	out := []any{}
	r.space()
	if r.i < len(r.b) && r.b[r.i] == ']' {
		r.i++
		return out, nil
	}
	for {
		clean := r.violation == nil
		v, err := r.value(depth)
		if err != nil {
			return nil, err
		}
		if clean && r.violation != nil {
			r.vpath = append(r.vpath, "["+strconv.Itoa(len(out))+"]")
		}
		out = append(out, v)
		r.space()
		if r.i >= len(r.b) {
			return nil, r.syntax("unexpected EOF in an array")
		}
		switch r.b[r.i] {
		case ',':
			r.i++
		case ']':
			r.i++
			return out, nil
		default:
			return nil, r.syntax("expected ',' or ']'")
		}
	}
}

// str reads the string at r.b[r.i] == '"'.
func (r *reader) str() (string, error) {
	r.i++
	start := r.i
	// The common case: no escape, plain ASCII.
	for r.i < len(r.b) {
		c := r.b[r.i]
		if c == '"' {
			s := string(r.b[start:r.i])
			r.i++
			return s, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		r.i++
	}
	out := append([]byte(nil), r.b[start:r.i]...)
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			return string(out), nil
		case c < 0x20:
			return "", r.syntax("a control character in a string")
		case c >= utf8.RuneSelf:
			ru, size := utf8.DecodeRune(r.b[r.i:])
			if ru == utf8.RuneError && size == 1 {
				r.violate("invalid UTF-8")
			}
			out = append(out, r.b[r.i:r.i+size]...)
			r.i += size
		case c != '\\':
			out = append(out, c)
			r.i++
		default:
			if r.i+1 >= len(r.b) {
				return "", r.syntax("unexpected EOF in a string")
			}
			switch e := r.b[r.i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				u, ok := r.hex4(r.i + 2)
				if !ok {
					return "", r.syntax("a bad \\u escape")
				}
				if 0xD800 <= u && u < 0xDC00 && r.i+7 < len(r.b) && r.b[r.i+6] == '\\' && r.b[r.i+7] == 'u' {
					if lo, ok := r.hex4(r.i + 8); ok && 0xDC00 <= lo && lo < 0xE000 {
						out = utf8.AppendRune(out, 0x10000+(u-0xD800)<<10+(lo-0xDC00))
						r.i += 12
						continue
					}
				}
				if 0xD800 <= u && u < 0xE000 {
					r.violate("a lone surrogate \\u%04x", u)
					// WTF-8: invalid UTF-8, so the string shows it is bad.
					out = append(out, 0xED, byte(0x80|(u>>6)&0x3F), byte(0x80|u&0x3F))
				} else {
					out = utf8.AppendRune(out, u)
				}
				r.i += 6
				continue
			default:
				return "", r.syntax("a bad escape")
			}
			r.i += 2
		}
	}
	return "", r.syntax("unexpected EOF in a string")
}

func (r *reader) hex4(i int) (rune, bool) {
	if i+4 > len(r.b) {
		return 0, false
	}
	var v rune
	for _, c := range r.b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			v = v<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// number reads a number by RFC 8259's grammar.
func (r *reader) number() (json.Number, error) {
	start := r.i
	digits := func() int {
		n := 0
		for r.i < len(r.b) && '0' <= r.b[r.i] && r.b[r.i] <= '9' {
			r.i++
			n++
		}
		return n
	}
	if r.b[r.i] == '-' {
		r.i++
	}
	switch {
	case r.i < len(r.b) && r.b[r.i] == '0':
		r.i++
	case digits() == 0:
		return "", r.syntax("a bad number")
	}
	if r.i < len(r.b) && r.b[r.i] == '.' {
		r.i++
		if digits() == 0 {
			return "", r.syntax("a bad number")
		}
	}
	if r.i < len(r.b) && (r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		r.i++
		if r.i < len(r.b) && (r.b[r.i] == '+' || r.b[r.i] == '-') {
			r.i++
		}
		if digits() == 0 {
			return "", r.syntax("a bad number")
		}
	}
	return json.Number(r.b[start:r.i]), nil
}

// ReadEvent is an event line as Object.Event read it.
type ReadEvent struct {
	Envelope Envelope // the members that could be read, the payload normalized
	// SeqRead: seq occurs once, an integer written without fraction or
	// exponent, within ±(2^53−1). TenantRead: tenant_id occurs once, a
	// string of valid Unicode.
	SeqRead, TenantRead bool
	// Malformed is the first reason the line is not a well-formed envelope
	// in its members (SPEC.md §1), nil if none; ValidateStored checks the
	// values' grammar.
	Malformed error
}

// optional members: absent when unset, never "" nor null.
var stringMembers = map[string]bool{"id": true, "type": true, "tenant_id": true, "occurred_at": true, "prev_hash": true, "hash": true}
var optionalMembers = map[string]bool{"correlation_id": true, "causation_id": true, "actor_id": true, "traceparent": true}

// Event reads o as a stored envelope.
func (o *Object) Event() ReadEvent {
	var ev ReadEvent
	e := &ev.Envelope
	bad := func(field, format string, args ...any) {
		if ev.Malformed == nil {
			ev.Malformed = fieldErr(field, format, args...)
		}
	}
	if v, ok := o.Member("seq"); ok {
		if n, ok := readInteger(v, maxSafeInt); ok {
			e.Seq, ev.SeqRead = n, true
		}
	}
	if v, ok := o.Member("tenant_id"); ok {
		if s, ok := v.(string); ok && utf8.ValidString(s) {
			e.TenantID, ev.TenantRead = s, true
		}
	}
	if o.Violation != nil {
		ev.Malformed = fmt.Errorf("%w: not I-JSON: %v", ErrInvalid, o.Violation)
	}
	for _, name := range o.Names() {
		if !stringMembers[name] && !optionalMembers[name] && name != "seq" && name != "schema_version" && name != "payload" {
			bad(name, "unknown field: not a member of an envelope")
		}
	}
	for _, name := range []string{"id", "type", "tenant_id", "occurred_at", "schema_version", "payload", "seq", "prev_hash", "hash"} {
		if !o.Has(name) {
			bad(name, "is missing")
		}
	}
	for _, name := range o.Names() { // in order, so the first fault named is always the same
		v := o.members[name]
		switch {
		case stringMembers[name] || optionalMembers[name]:
			s, ok := v.(string)
			if !ok {
				bad(name, "is %s, not a string", kindOf(v))
				continue
			}
			if s == "" && optionalMembers[name] {
				bad(name, `is ""; an unset optional member is absent`)
			}
			switch name {
			case "id":
				e.ID = s
			case "type":
				e.Type = s
			case "occurred_at":
				e.OccurredAt = s
			case "prev_hash":
				e.PrevHash = s
			case "hash":
				e.Hash = s
			case "correlation_id":
				e.CorrelationID = s
			case "causation_id":
				e.CausationID = s
			case "actor_id":
				e.ActorID = s
			case "traceparent":
				e.TraceParent = s
			}
		case name == "seq":
			if !ev.SeqRead {
				bad(name, "is %s; want an integer from 1 to 2^53-1 without fraction or exponent", spell(v))
			}
		case name == "schema_version":
			n, ok := readInteger(v, MaxSchemaVersion)
			if !ok {
				bad(name, "is %s; want an integer from 1 to %d without fraction or exponent", spell(v), MaxSchemaVersion)
				continue
			}
			e.SchemaVersion = int(n)
		case name == "payload":
			m, ok := v.(map[string]any)
			if !ok {
				bad(name, "is %s, not an object", kindOf(v))
				continue
			}
			p, err := normalizeValue("payload", m, 1)
			if err != nil {
				if ev.Malformed == nil {
					ev.Malformed = err
				}
				continue
			}
			e.Payload = p.(map[string]any)
		}
	}
	return ev
}

// readInteger reads v as an integer written without fraction or exponent,
// within ±max.
func readInteger(v any, max int64) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; !(c == '-' && i == 0 || '0' <= c && c <= '9') {
			return 0, false
		}
	}
	x, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || x > max || x < -max {
		return 0, false
	}
	return x, true
}

func spell(v any) string {
	if n, ok := v.(json.Number); ok {
		return string(n)
	}
	return kindOf(v)
}
