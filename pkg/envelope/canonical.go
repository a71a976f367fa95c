package envelope

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// This file writes the RFC 8785 (JCS) bytes of an envelope directly, without
// the json.Marshal → jcs.Transform round trip, which parses what it has just
// printed. The output is byte-identical to that round trip (the reference,
// referenceCanonical): canonical_test.go checks it differentially, and any
// value this encoder is not certain about (a Go type other than the JSON
// kinds, invalid UTF-8, a number that does not parse, nesting deeper than
// maxCanonicalDepth) makes it hand the whole envelope to the reference, so the
// two can never disagree, errors included.

// maxCanonicalDepth bounds recursion; encoding/json starts looking for cycles
// at the same depth, so a cyclic payload gets its error from the reference.
const maxCanonicalDepth = 1000

// maxPooledBuffer keeps an occasional huge envelope from pinning memory.
const maxPooledBuffer = 64 << 10

// bufPool holds scratch buffers. The encoder passes its buffer by value
// (append style) rather than keeping it in a struct: a slice header stored in
// a heap object costs a GC write barrier on every append while GC marks.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// canonical returns the canonical bytes of e, without its hash or with it,
// built in a pooled buffer.
func canonical(e *Envelope, withHash bool) ([]byte, error) {
	bp := bufPool.Get().(*[]byte)
	buf, err := appendCanonical((*bp)[:0], e, withHash)
	var out []byte
	if err == nil {
		out = slices.Clone(buf)
	}
	if cap(buf) <= maxPooledBuffer {
		*bp = buf[:0]
		bufPool.Put(bp)
	}
	return out, err
}

// appendCanonical appends the canonical bytes of e to dst: by the direct
// encoder, or by the reference when the encoder leaves e to it.
func appendCanonical(dst []byte, e *Envelope, withHash bool) ([]byte, error) {
	if out, ok := appendEnvelope(dst, e, withHash); ok {
		return out, nil
	}
	ref, err := referenceCanonical(e, withHash)
	if err != nil {
		return dst, err
	}
	return append(dst, ref...), nil
}

// referenceCanonical is the definition: JCS of encoding/json's rendering of
// the envelope without its hash (or with it), by a maintained JCS library.
func referenceCanonical(e *Envelope, withHash bool) ([]byte, error) {
	c := *e
	c.TraceParent = "" // not part of the event (SPEC.md §1)
	if !withHash {
		c.Hash = ""
	}
	raw, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("canonical bytes: %w", err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonical bytes: %w", err)
	}
	return out, nil
}

// appendEnvelope writes e's members in RFC 8785 order (all names are ASCII,
// so UTF-16 order is byte order): actor_id, causation_id, correlation_id, id,
// occurred_at, payload, prev_hash, schema_version, seq, tenant_id, type.
// hash is left out unless withHash (then it sits between correlation_id and
// id, absent when empty); the three optional ids are absent when empty, as
// their omitempty tags make them for encoding/json. traceparent is never
// written: it is not part of the event (SPEC.md §1). false: leave e to the
// reference.
func appendEnvelope(b []byte, e *Envelope, withHash bool) ([]byte, bool) {
	ok := true
	str := func(name, v string) {
		if ok {
			b = append(b, name...)
			b, ok = appendString(b, v)
		}
	}
	b = append(b, '{')
	if e.ActorID != "" {
		str(`"actor_id":`, e.ActorID)
		b = append(b, ',')
	}
	if e.CausationID != "" {
		str(`"causation_id":`, e.CausationID)
		b = append(b, ',')
	}
	if e.CorrelationID != "" {
		str(`"correlation_id":`, e.CorrelationID)
		b = append(b, ',')
	}
	if withHash && e.Hash != "" {
		str(`"hash":`, e.Hash)
		b = append(b, ',')
	}
	str(`"id":`, e.ID)
	str(`,"occurred_at":`, e.OccurredAt)
	if !ok {
		return b, false
	}
	b = append(b, `,"payload":`...)
	if e.Payload == nil {
		b = append(b, "null"...)
	} else if b, ok = appendObject(b, e.Payload, 1); !ok {
		return b, false
	}
	str(`,"prev_hash":`, e.PrevHash)
	b = append(b, `,"schema_version":`...)
	b = appendInteger(b, int64(e.SchemaVersion))
	b = append(b, `,"seq":`...)
	b = appendInteger(b, e.Seq)
	str(`,"tenant_id":`, e.TenantID)
	str(`,"type":`, e.Type)
	return append(b, '}'), ok
}

func appendValue(b []byte, v any, depth int) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		return strconv.AppendBool(b, x), true
	case string:
		return appendString(b, x)
	case json.Number:
		return appendNumber(b, string(x))
	case float64:
		s, err := jcs.NumberToJSON(x)
		if err != nil {
			return b, false // NaN or ±Inf: the reference reports it
		}
		return append(b, s...), true
	case map[string]any:
		if x == nil {
			return append(b, "null"...), true
		}
		return appendObject(b, x, depth+1)
	case []any:
		if x == nil {
			return append(b, "null"...), true
		}
		if depth+1 > maxCanonicalDepth {
			return b, false
		}
		b = append(b, '[')
		for i, el := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendValue(b, el, depth+1); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	}
	return b, false
}

// member is one object member waiting to be written in order.
type member struct {
	name  string
	value any
}

// smallObject is how many members an object may have and still be sorted on
// the stack: the members in an array there, sorted through an index array
// (no pointers moved, so no allocation and no GC write barriers).
const smallObject = 16

func appendObject(b []byte, m map[string]any, depth int) ([]byte, bool) {
	if depth > maxCanonicalDepth {
		return b, false
	}
	if len(m) > smallObject {
		return appendLargeObject(b, m, depth)
	}
	var members [smallObject]member
	var order [smallObject]uint8
	n := 0
	for k, v := range m {
		members[n] = member{k, v}
		// Insertion sort as the members arrive.
		j := n
		for ; j > 0 && compareUTF16(members[order[j-1]].name, k) > 0; j-- {
			order[j] = order[j-1]
		}
		order[j] = uint8(n)
		n++
	}
	b = append(b, '{')
	for i, idx := range order[:n] {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendString(b, members[idx].name); !ok {
			return b, false
		}
		b = append(b, ':')
		if b, ok = appendValue(b, members[idx].value, depth); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

func appendLargeObject(b []byte, m map[string]any, depth int) ([]byte, bool) {
	members := make([]member, 0, len(m))
	for k, v := range m {
		members = append(members, member{k, v})
	}
	slices.SortFunc(members, func(x, y member) int { return compareUTF16(x.name, y.name) })
	b = append(b, '{')
	for i := range members {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendString(b, members[i].name); !ok {
			return b, false
		}
		b = append(b, ':')
		if b, ok = appendValue(b, members[i].value, depth); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// compareUTF16 orders valid UTF-8 strings by their UTF-16 code units.
// UTF-8 byte order is code point order, and so is UTF-16 order except in one
// case: a character from U+E000–U+FFFF (UTF-8 lead byte 0xEE or 0xEF) sorts
// after a supplementary character (lead byte 0xF0–0xF4) by code point, but
// before it in UTF-16, whose surrogates (0xD800–0xDBFF) are smaller. At the
// first differing byte both strings are at the same offset within a
// character, so comparing lead bytes there decides.
func compareUTF16[T string | []byte](a, b T) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	x, y := a[i], b[i]
	switch {
	case x >= 0xF0 && (y == 0xEE || y == 0xEF):
		return -1
	case y >= 0xF0 && (x == 0xEE || x == 0xEF):
		return 1
	}
	return int(x) - int(y)
}

const hexDigits = "0123456789abcdef"

// SWAR constants: a byte-wise test on eight bytes at once.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// plain reports whether the eight bytes in x are all ASCII that a JCS string
// holds as they are: none ≥ 0x80, below 0x20, '"' or '\\'. (The classic
// "has a byte less than n / equal to n" tests; exact for "any".)
func plain(x uint64) bool { return special(x) == 0 }

// special marks, in the high bit of each byte, the bytes of x that plain
// refuses. The lowest marked byte is exact (a borrow only ever marks bytes
// above a marked one), so bits.TrailingZeros64(special(x))/8 is the index of
// the first byte to look at.
//
// Flipping bit 1 of every byte maps '"' (0x22) to 0x20 and the control
// characters (0x00–0x1F) onto themselves, while 0x20, 0x21 and 0x23 land on
// 0x22, 0x23 and 0x21: one "less than 0x21" test then finds both.
func special(x uint64) uint64 {
	y := x ^ (lsb * 0x02)
	low := (y - lsb*0x21) & ^y // a control character or '"'
	slash := x ^ (lsb * '\\')
	slash = (slash - lsb) & ^slash
	return (x | low | slash) & msb
}

// load64 reads eight bytes of s, the first in the low byte (one load on
// little-endian machines).
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// appendString writes s as a JCS string: only '"', '\\' and the control
// characters are escaped (the five short forms, else \u00xx in lowercase
// hex); all else, U+2028, U+2029, '<', '>' and '&' included, is written as it
// is. Invalid UTF-8 is the reference's to handle (encoding/json substitutes
// U+FFFD).
func appendString(b []byte, s string) ([]byte, bool) {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) {
			if plain(load64(s[i:])) {
				i += 8
				continue
			}
		} else if len(s) >= 8 && plain(load64(s[len(s)-8:])) {
			break // the last eight bytes, the rest among them, are plain
		}
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				return b, false
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"'), true
}

// appendInteger writes an int the way JCS writes the binary64 it parses as: exact
// below 2^53, rounded (and in exponent form from 1e21) beyond.
func appendInteger(b []byte, n int64) []byte {
	if -1<<53 < n && n < 1<<53 {
		return strconv.AppendInt(b, n, 10)
	}
	s, _ := jcs.NumberToJSON(float64(n)) // finite: cannot fail
	return append(b, s...)
}

// appendNumber writes a JSON number literal in its RFC 8785 form. Payloads hold
// numbers NormalizePayload already spelled canonically, which canonicalNumber
// recognizes without parsing; anything else goes through binary64 as in JCS.
func appendNumber(b []byte, s string) ([]byte, bool) {
	if canonicalNumber(s) {
		return append(b, s...), true
	}
	if !validNumber(s) {
		return b, false // encoding/json refuses it (or, for "", writes 0)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return b, false // out of binary64's range
	}
	out, err := jcs.NumberToJSON(f)
	if err != nil {
		return b, false
	}
	return append(b, out...), true
}

// canonicalNumber reports whether s is certainly already in RFC 8785 form:
// a plain decimal (no exponent, no leading zero, no trailing fractional zero,
// not -0) with at most 15 significant digits and a magnitude of at least 1e-6
// or zero, or an integer within ±(2^53−1). Any decimal of at most 15 significant digits is the only such
// decimal that reads back as its binary64 value (DBL_DIG is 15), so it is the
// shortest round-trip spelling, and ECMAScript prints numbers from 1e-6 up to
// 1e21 without an exponent. False means "not known", not "not canonical".
func canonicalNumber[T string | []byte](s T) bool {
	i, neg := 0, false
	if i < len(s) && s[i] == '-' {
		i, neg = i+1, true
	}
	if i == len(s) {
		return false
	}
	intStart := i
	if s[i] == '0' {
		i++
	} else {
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		if i == intStart {
			return false
		}
	}
	intDigits := i - intStart
	if i == len(s) {
		if s[intStart] == '0' {
			return !neg // "0" yes, "-0" is written 0
		}
		// Every integer within I-JSON's ±(2^53−1) prints as itself.
		return intDigits <= 15 || intDigits == 16 && string(s[intStart:i]) <= "9007199254740991"
	}
	if s[i] != '.' {
		return false
	}
	i++
	fracStart := i
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	if i != len(s) || i == fracStart || s[i-1] == '0' {
		return false
	}
	if s[intStart] != '0' {
		return intDigits+(i-fracStart) <= 15
	}
	zeros := 0
	for s[fracStart+zeros] == '0' {
		zeros++
	}
	// 0.000001 is 1e-6 (printed plainly); 0.0000001 is printed 1e-7.
	return zeros <= 5 && i-fracStart-zeros <= 15
}

// validNumber is RFC 8259's number grammar, which encoding/json enforces on a
// json.Number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(s string) bool {
	digits := func(i int) int {
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i
	}
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i == len(s):
		return false
	case s[i] == '0':
		i++
	case '1' <= s[i] && s[i] <= '9':
		i = digits(i + 1)
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(s)
}
