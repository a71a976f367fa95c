package envelope

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf8"

	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// This file reads a stored event straight from its canonical line: the
// RFC 8785 form of the whole envelope, hash included, as WriteExport writes
// it (see CanonicalJSON). Such a line holds the chain's canonical bytes
// verbatim: they are the line without its "hash" member. A verifier that
// trusts the line to be canonical can hash it in place instead of decoding
// and re-encoding the envelope, which costs several times the SHA-256.
//
// ScanCanonical accepts a line only when it is certain that decoding it
// (FromJSON), validating it (ValidateStored) and encoding it again
// (CanonicalBytes) gives back exactly the line without its hash member and
// the same field values. Anything it is not certain about — a member out of
// order or unknown, an escape in an envelope field or a member name, a number
// not already in its shortest form, a line over maxScanLine, nesting deeper
// than maxScanDepth — makes it say no, and the caller takes the decoding path,
// which gives the same verdict with its own error messages. scan_test.go checks
// the two paths against each other.

// maxScanLine bounds the lines ScanCanonical takes. Validate's size rule
// (MaxPayloadBytes, counted as checkValue does) can only fail for a payload
// over MaxPayloadBytes/2 bytes of JSON, so a line below this never needs it.
const maxScanLine = MaxPayloadBytes / 4

// maxScanDepth bounds nesting in the payload (the payload object is one
// level): Validate's MaxPayloadDepth, so a deeper line takes the decoding
// path, which refuses it.
const maxScanDepth = MaxPayloadDepth

// CanonicalLine is a stored event as ScanCanonical read it: the fields the
// chain checks, as slices of Line, and where the hash member sits.
type CanonicalLine struct {
	Line     []byte
	TenantID []byte
	PrevHash []byte // 64 lowercase hex digits
	Hash     []byte // 64 lowercase hex digits
	Seq      int64  // ≥ 1

	hashStart, hashEnd int // Line[hashStart:hashEnd] is `"hash":"…",`
}

// Canonical returns the event's canonical bytes (CanonicalBytes) as the two
// pieces of Line around the hash member; their concatenation is the bytes.
func (c *CanonicalLine) Canonical() (before, after []byte) {
	return c.Line[:c.hashStart], c.Line[c.hashEnd:]
}

// The members of a stored envelope in RFC 8785 order (all ASCII, so byte
// order is UTF-16 order).
const (
	mActorID = iota
	mCausationID
	mCorrelationID
	mHash
	mID
	mOccurredAt
	mPayload
	mPrevHash
	mSchemaVersion
	mSeq
	mTenantID
	mType
	memberCount
)

// required is the set of members a stored envelope must have.
const required = 1<<mHash | 1<<mID | 1<<mOccurredAt | 1<<mPayload | 1<<mPrevHash | 1<<mSchemaVersion | 1<<mSeq | 1<<mTenantID | 1<<mType

// ScanCanonical reads line as the canonical form of a valid stored envelope.
// false means "not certainly": decode the line with FromJSON instead; it does
// not mean the line is invalid.
func ScanCanonical(line []byte) (CanonicalLine, bool) {
	c := CanonicalLine{Line: line}
	if len(line) < 2 || len(line) > maxScanLine || line[0] != '{' {
		return c, false
	}
	var str [memberCount][]byte // the string members' values
	var schemaVersion int64
	seen, next := 0, 0
	i := 1
	for {
		// A member name: one of the envelope's, after the last, written as
		// it is (no escapes), and its colon.
		m := next
		for m < memberCount && !hasLiteral(line, i, memberNames[m]) {
			m++
		}
		if m == memberCount {
			return c, false // unknown, repeated, out of order or escaped
		}
		nameStart := i
		seen |= 1 << m
		next = m + 1
		i += len(memberNames[m])
		switch m {
		case mPayload:
			if i >= len(line) || line[i] != '{' {
				return c, false
			}
			var ok bool
			if i, ok = scanPayload(line, i); !ok {
				return c, false
			}
		case mSchemaVersion, mSeq:
			var n int64
			var ok bool
			if i, n, ok = scanCount(line, i); !ok {
				return c, false
			}
			if m == mSeq {
				c.Seq = n
			} else {
				schemaVersion = n
			}
		case mHash, mPrevHash, mID:
			// Fixed length, and every byte a hex digit or '-': no escape,
			// valid UTF-8, so the bytes are the value. Checked here, without
			// a string scan.
			w := 64
			if m == mID {
				w = 36
			}
			if len(line)-i < w+2 || line[i] != '"' || line[i+w+1] != '"' {
				return c, false
			}
			v := line[i+1 : i+w+1]
			if m == mID && !validID(v) || m != mID && !isHexHash(v) {
				return c, false
			}
			str[m] = v
			i += w + 2
			if m == mHash {
				if i >= len(line) || line[i] != ',' {
					return c, false
				}
				c.hashStart, c.hashEnd = nameStart, i+1
			}
		case mOccurredAt, mType, mTenantID:
			// ASCII values whose rules leave out '"' and control characters:
			// up to the next quote, then the rule, which (with no '\\' for
			// the tenant, whose rule allows it) certifies no escape.
			if i >= len(line) || line[i] != '"' {
				return c, false
			}
			k := bytes.IndexByte(line[i+1:], '"')
			if k < 0 {
				return c, false
			}
			v := line[i+1 : i+1+k]
			switch m {
			case mOccurredAt:
				if !canonicalTime(v) {
					return c, false
				}
			case mType:
				if !validType(v) {
					return c, false
				}
			default:
				if !tenancy.ValidTenant(v) || bytes.IndexByte(v, '\\') >= 0 {
					return c, false
				}
			}
			str[m] = v
			i += k + 2
		default: // actor_id, causation_id, correlation_id: no escapes, so the bytes are the value
			if i >= len(line) || line[i] != '"' {
				return c, false
			}
			end, escaped, ok := scanString(line, i)
			if !ok || escaped || end == i+2 {
				return c, false // an empty one: the decoded envelope would drop it
			}
			str[m] = line[i+1 : end-1]
			i = end
		}
		if i >= len(line) {
			return c, false
		}
		if line[i] == '}' {
			if i+1 != len(line) {
				return c, false
			}
			break
		}
		if line[i] != ',' {
			return c, false
		}
		i++
	}
	// ValidateStored's rules, each checked above as its member was read.
	if seen&required != required || schemaVersion > MaxSchemaVersion {
		return c, false
	}
	c.TenantID, c.PrevHash, c.Hash = str[mTenantID], str[mPrevHash], str[mHash]
	return c, true
}

// memberNames are the envelope's members as a canonical line writes them,
// with their colon, by index.
var memberNames = [memberCount]string{
	mActorID:       `"actor_id":`,
	mCausationID:   `"causation_id":`,
	mCorrelationID: `"correlation_id":`,
	mHash:          `"hash":`,
	mID:            `"id":`,
	mOccurredAt:    `"occurred_at":`,
	mPayload:       `"payload":`,
	mPrevHash:      `"prev_hash":`,
	mSchemaVersion: `"schema_version":`,
	mSeq:           `"seq":`,
	mTenantID:      `"tenant_id":`,
	mType:          `"type":`,
}

// scanCount reads a positive decimal integer of at most 15 digits (exact in
// binary64, so JCS writes it back as it is) starting at b[i].
func scanCount(b []byte, i int) (int, int64, bool) {
	start := i
	var n int64
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		n = n*10 + int64(b[i]-'0')
		i++
	}
	if d := i - start; d == 0 || d > 15 || b[start] == '0' {
		return i, 0, false
	}
	return i, n, true
}

// scanPayload checks the object at b[i] == '{' is in canonical form and
// returns the index after it: members sorted by their names' UTF-16 code
// units, no repeats, names without escapes, strings as appendString writes
// them, numbers already in their shortest form, no whitespace. It walks the
// value with an explicit stack, one loop, and the common case of a string
// (plain ASCII up to the closing quote, eight bytes at a time) inline: calls
// per token cost more than the bytes.
func scanPayload(b []byte, i int) (int, bool) {
	type frame struct { // small: the whole stack is zeroed on every call
		prevStart, prevEnd int32  // the last member name of an object: b[prevStart:prevEnd]
		prevKey            uint64 // its key, if it has one (else 0)
		obj, hasPrev       bool
	}
	var stack [maxScanDepth]frame
	d := -1 // the innermost open container
	n := len(b)
	const (
		stValue = iota // a value starts at i
		stName         // a member name starts at i
		stAfter        // a value ended just before i
	)
	state := stValue
	for {
		switch state {
		case stValue:
			if i >= n {
				return i, false
			}
			switch c := b[i]; {
			case c == '"':
				j := i + 1
				for {
					if j+8 <= n {
						m := special(binary.LittleEndian.Uint64(b[j:]))
						if m == 0 {
							j += 8
							continue
						}
						j += bits.TrailingZeros64(m) >> 3
					} else if j >= n {
						return j, false
					}
					if b[j] == '"' {
						j++
						break
					}
					var ok bool
					if j, _, ok = scanStringTail(b, j); !ok {
						return j, false
					}
					break
				}
				i, state = j, stAfter
			case c == '{' || c == '[':
				if d+1 == maxScanDepth {
					return i, false
				}
				d++
				stack[d] = frame{obj: c == '{'}
				i++
				switch {
				case i < n && (c == '{' && b[i] == '}' || c == '[' && b[i] == ']'):
					i++
					d--
					state = stAfter
				case c == '{':
					state = stName
				}
			case c == '-' || '0' <= c && c <= '9':
				j := i + 1
				for j < n && (b[j] >= '0' && b[j] <= '9' || b[j] == '.') {
					j++
				}
				// An exponent or a sign after the first byte ends the token
				// here and then fails the separator check. The common
				// spellings are recognized without parsing; 16 and 17
				// significant digits (a double printed shortest) by parsing.
				if !canonicalNumber(b[i:j]) && (j-i > 32 || !isCanonicalNumber(string(b[i:j]))) {
					return i, false
				}
				i, state = j, stAfter
			case c == 't' && hasLiteral(b, i, "true"), c == 'n' && hasLiteral(b, i, "null"):
				i, state = i+4, stAfter
			case c == 'f' && hasLiteral(b, i, "false"):
				i, state = i+5, stAfter
			default:
				return i, false
			}
		case stName:
			if i >= n || b[i] != '"' {
				return i, false
			}
			// Names are short: find the closing quote inline; anything
			// else in the way takes the careful path. A name of at most
			// eight plain ASCII bytes gets a key: its bytes big-endian,
			// zero-padded, whose order as integers is the names' order
			// (for ASCII, UTF-16 order is byte order, and no name byte is
			// zero), so the next name compares in one instruction.
			end := i + 1
			var key uint64
			if end+8 <= n {
				x := binary.LittleEndian.Uint64(b[end:])
				if m := special(x); m != 0 {
					k := bits.TrailingZeros64(m) >> 3
					end += k
					key = bits.ReverseBytes64(x & (1<<(8*k) - 1))
				} else {
					end += 8
					key = bits.ReverseBytes64(x)
				}
			}
			if end < n && b[end] == '"' {
				end++
			} else {
				key = 0
				var escaped, ok bool
				if end, escaped, ok = scanStringTail(b, end); !ok || escaped {
					return i, false // an escaped name would need decoding to sort
				}
			}
			if end == i+2 {
				return i, false // an empty name: DynamoDB refuses it
			}
			f := &stack[d]
			if f.hasPrev {
				if f.prevKey != 0 && key != 0 {
					if f.prevKey >= key {
						return i, false
					}
				} else if compareUTF16(b[f.prevStart:f.prevEnd], b[i+1:end-1]) >= 0 {
					return i, false
				}
			}
			f.hasPrev, f.prevStart, f.prevEnd, f.prevKey = true, int32(i+1), int32(end-1), key
			if end >= n || b[end] != ':' {
				return end, false
			}
			i, state = end+1, stValue
		case stAfter:
			if d < 0 {
				return i, true // the payload object itself has closed
			}
			if i >= n {
				return i, false
			}
			switch c := b[i]; {
			case c == ',':
				i++
				if stack[d].obj {
					state = stName
				} else {
					state = stValue
				}
			case c == '}' && stack[d].obj, c == ']' && !stack[d].obj:
				i++
				d--
			default:
				return i, false
			}
		}
	}
}

func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// scanString checks the string at b[i] == '"' is written exactly as
// appendString writes its value: valid UTF-8, control characters escaped in
// the short form or \u00xx (lowercase), '"' and '\\' escaped, nothing else.
// It returns the index after the closing quote and whether there was any
// escape.
func scanString(b []byte, i int) (end int, escaped, ok bool) { return scanStringTail(b, i+1) }

// scanStringTail is scanString from b[i], inside the string.
func scanStringTail(b []byte, i int) (end int, escaped, ok bool) {
	for i < len(b) {
		if i+8 <= len(b) {
			m := special(binary.LittleEndian.Uint64(b[i:]))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) / 8 // straight to the first byte that needs a look
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, escaped, true
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return i, escaped, false
			}
			i += size
		case c < 0x20:
			return i, escaped, false // a raw control character
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return i, escaped, false
			}
			switch b[i+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u': // only \u00xx for a control character without a short form
				if i+6 > len(b) || b[i+2] != '0' || b[i+3] != '0' || b[i+4] > '1' || b[i+4] < '0' {
					return i, escaped, false
				}
				lo := b[i+5]
				var v byte
				switch {
				case '0' <= lo && lo <= '9':
					v = lo - '0'
				case 'a' <= lo && lo <= 'f':
					v = lo - 'a' + 10
				default:
					return i, escaped, false
				}
				v += (b[i+4] - '0') << 4
				if v == '\b' || v == '\f' || v == '\n' || v == '\r' || v == '\t' {
					return i, escaped, false
				}
				i += 6
			default:
				return i, escaped, false
			}
		default:
			i++
		}
	}
	return i, escaped, false
}

// validType is ValidType's rule, written out: the regular expression it
// states (checked against this in scan_test.go) cost more than the rest of
// validation together.
func validType[T string | []byte](s T) bool {
	n := len(s)
	if n == 0 || n > 256 || !lower(s[0]) {
		return false
	}
	i := 1
	for i < n && (lower(s[i]) || digit(s[i]) || s[i] == '_') {
		i++
	}
	if i == n {
		return false // at least one ".name" segment
	}
	for i < n {
		if s[i] != '.' || i+1 == n || !alnum(s[i+1]) {
			return false
		}
		i += 2
		for i < n && (alnum(s[i]) || s[i] == '_' || s[i] == '-') {
			i++
		}
	}
	return true
}

func lower(c byte) bool { return 'a' <= c && c <= 'z' }
func digit(c byte) bool { return '0' <= c && c <= '9' }
func alnum(c byte) bool { return lower(c) || digit(c) || 'A' <= c && c <= 'Z' }

// canonicalTime is ValidTime's rule (SPEC.md §1): RFC 3339 in UTC as
// FormatTime writes it, YYYY-MM-DDTHH:MM:SS[.fraction]Z with a year from 0000
// to 9999, a real date, and a fraction of one to nine digits without a
// trailing zero. scan_test.go checks it equals "time.Parse accepts it and
// FormatTime gives it back".
func canonicalTime[T string | []byte](s T) bool {
	n := len(s)
	if n < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[n-1] != 'Z' {
		return false
	}
	num := func(i, w int) int {
		v := 0
		for k := i; k < i+w; k++ {
			if !digit(s[k]) {
				return -1
			}
			v = v*10 + int(s[k]-'0')
		}
		return v
	}
	year, month, day := num(0, 4), num(5, 2), num(8, 2)
	hour, minute, sec := num(11, 2), num(14, 2), num(17, 2)
	if year < 0 || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return false
	}
	if n == 20 {
		return true
	}
	// .fraction
	if s[19] != '.' || n < 22 || n > 30 || s[n-2] == '0' {
		return false
	}
	for k := 20; k < n-1; k++ {
		if !digit(s[k]) {
			return false
		}
	}
	return true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
