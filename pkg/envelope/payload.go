package envelope

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// maxSafeInt is I-JSON's largest exactly interoperable integer, 2^53 − 1.
const maxSafeInt = 1<<53 - 1

// DynamoDB's number limits: at most 38 significant digits, and a magnitude of
// 0 or from 1e-130 up to 9.9999999999999999999999999999999999999e125. A
// binary64 value below maxDynamoMagnitude is at most 9.9999999999999999e125
// (its shortest spelling has at most 17 digits), so "< 1e126" is the upper
// rule; and the shortest spellings of the binary64 values 1e-130 and 1e126
// are exactly those, so comparing binary64 values decides as comparing the
// decimals would.
const (
	maxDynamoDigits    = 38
	minDynamoMagnitude = 1e-130
	maxDynamoMagnitude = 1e126
)

// significantDigits counts the digits of a JSON number's mantissa without
// leading and trailing zeros ("0.0120e5" has 2).
func significantDigits(s string) int {
	first, last, n := -1, -1, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == 'e' || c == 'E' {
			break
		}
		if c < '0' || c > '9' {
			continue
		}
		if c != '0' {
			if first < 0 {
				first = n
			}
			last = n
		}
		n++
	}
	if first < 0 {
		return 0
	}
	return last - first + 1
}

// NormalizePayload turns a payload value (a struct, a map, or raw JSON bytes)
// into the envelope's payload form: a map whose numbers are json.Number in
// their canonical (ECMAScript) spelling. It refuses anything that is not a
// JSON object, anything the verifier refuses (a repeated member name, text
// that is not valid UTF-8, a lone surrogate escape such as \ud800: SPEC.md
// §1), and any number that is not exact in IEEE 754 binary64, naming the
// field path. encoding/json would keep the last of repeated members and turn
// bad text into U+FFFD; a payload is never repaired, so an event is stored
// exactly as its producer wrote it or not at all.
func NormalizePayload(v any) (map[string]any, error) {
	var raw []byte
	switch p := v.(type) {
	case nil:
		return nil, fieldErr("payload", "is nil; pass a struct or map (an empty map for no data)")
	case json.RawMessage:
		raw = p
	case []byte:
		raw = p
	default:
		// encoding/json writes a Go string that is not valid UTF-8 as
		// U+FFFD, so the Go value is checked before it is encoded.
		if err := checkText("payload", reflect.ValueOf(v), 1); err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fieldErr("payload", "cannot be encoded as JSON: %v", err)
		}
		raw = b
	}
	o, err := ReadObject(raw)
	if err != nil {
		return nil, notAnObject(raw, err)
	}
	if o.Violation != nil {
		return nil, violation(o)
	}
	norm, err := normalizeValue("payload", o.members, 1)
	if err != nil {
		return nil, err
	}
	return norm.(map[string]any), nil
}

// violation is the FieldError for the first way o's text breaks I-JSON.
func violation(o *Object) *FieldError {
	reason := o.ViolationReason
	switch {
	case strings.HasPrefix(reason, "member name"):
		reason = "appears more than once in its object; JSON member names must be unique (RFC 7493), and a verifier refuses the event: send each member once"
	case strings.HasPrefix(reason, "has a member name"):
		reason += ", and a verifier refuses the event; send member names as Unicode text"
	case strings.HasPrefix(reason, "a lone surrogate"):
		reason = "has " + reason + " (half of a UTF-16 pair): not Unicode text, and a verifier refuses the event; escape the whole pair or send the character itself"
	case strings.HasPrefix(reason, "starts with a byte order mark"):
		reason = reason + "; send the JSON text without it"
	default:
		reason = "is " + reason + " text, and a verifier refuses the event; send strings as UTF-8"
	}
	return &FieldError{Field: "payload" + o.ViolationField, Reason: reason}
}

// notAnObject says why raw, which ReadObject could not read (err), is not a
// payload, in encoding/json's words where it has some.
func notAnObject(raw []byte, err error) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if derr := dec.Decode(&out); derr != nil {
		return fieldErr("payload", "is not valid JSON: %v", derr)
	}
	if dec.More() {
		return fieldErr("payload", "has trailing data after the JSON object")
	}
	if _, ok := out.(map[string]any); !ok {
		return fieldErr("payload", "must be a JSON object, got %s", kindOf(out))
	}
	return fieldErr("payload", "is not valid JSON: %v", strings.TrimPrefix(err.Error(), ErrNotJSON.Error()+": "))
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// checkText finds the first string in the Go value v (its member names
// included, in the order encoding/json writes them) that is not valid UTF-8,
// which encoding/json would write as U+FFFD. A type with its own MarshalJSON
// is left to ReadObject, which sees its output as it is; below depth
// MaxReadDepth the walk stops (json.Marshal refuses a cycle, and the depth
// rule refuses the rest).
func checkText(path string, v reflect.Value, depth int) *FieldError {
	if !v.IsValid() || depth > MaxReadDepth {
		return nil
	}
	t := v.Type()
	if t.Implements(jsonMarshalerType) || v.CanAddr() && reflect.PointerTo(t).Implements(jsonMarshalerType) {
		return nil
	}
	if t.Implements(textMarshalerType) {
		if (t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface) && v.IsNil() {
			return nil
		}
		b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		if err == nil && !utf8.Valid(b) {
			return &FieldError{Field: path, Reason: "is not valid UTF-8 text (its MarshalText), and a verifier refuses the event; send strings as UTF-8"}
		}
		return nil
	}
	badText := &FieldError{Field: path, Reason: "is not valid UTF-8 text, and a verifier refuses the event; send strings as UTF-8"}
	switch t.Kind() {
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return badText
		}
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return checkText(path, v.Elem(), depth)
	case reflect.Struct:
		for _, f := range jsonFields(t) {
			fv, ok := fieldOf(v, f.Index)
			if !ok {
				continue
			}
			if err := checkText(path+"."+f.Name, fv, depth+1); err != nil {
				return err
			}
		}
	case reflect.Map:
		keys := v.MapKeys()
		if t.Key().Kind() == reflect.String {
			slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		}
		for _, k := range keys {
			name := fmt.Sprint(k.Interface())
			if k.Kind() == reflect.String {
				if name = k.String(); !utf8.ValidString(name) {
					return &FieldError{Field: path, Reason: "has a member name that is not valid UTF-8, and a verifier refuses the event; send member names as UTF-8"}
				}
			}
			if err := checkText(path+"."+name, v.MapIndex(k), depth+1); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // base64
		}
		for i := 0; i < v.Len(); i++ {
			if err := checkText(path+"["+strconv.Itoa(i)+"]", v.Index(i), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// fieldOf is v's field at index without allocating: false when an embedded
// struct pointer on the way is nil (encoding/json writes nothing for it).
func fieldOf(v reflect.Value, index []int) (reflect.Value, bool) {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, true
}

// normalizeValue checks v, at depth (the payload object is 1), and rewrites
// every number to its canonical spelling.
func normalizeValue(path string, v any, depth int) (any, error) {
	switch x := v.(type) {
	case nil, bool:
		return x, nil
	case string:
		if !utf8.ValidString(x) {
			return nil, fieldErr(path, "is not valid UTF-8")
		}
		return x, nil
	case json.Number:
		n, err := CanonicalNumber(path, string(x))
		if err != nil {
			return nil, err
		}
		return n, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fieldErr(path, "is %v; JSON has no NaN or infinity", x)
		}
		return CanonicalNumber(path, strconv.FormatFloat(x, 'g', -1, 64))
	case []any:
		if depth > MaxPayloadDepth {
			return nil, tooDeep(path)
		}
		out := make([]any, len(x))
		for i, e := range x {
			n, err := normalizeValue(fmt.Sprintf("%s[%d]", path, i), e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case map[string]any:
		if depth > MaxPayloadDepth {
			return nil, tooDeep(path)
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			n, err := normalizeMember(path, k, e, depth)
			if err != nil {
				// Name the first fault in key order, not the first the map
				// happened to yield, so the error is always the same.
				_, err = firstFault(path, x, depth)
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	default:
		return nil, fieldErr(path, "has unsupported Go type %T; use JSON kinds only", v)
	}
}

// firstFault walks v in key order (no retries below), returning its first
// fault: the error normalizeValue names, deterministically.
func firstFault(path string, v any, depth int) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		if depth > MaxPayloadDepth {
			return nil, tooDeep(path)
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if !utf8.ValidString(k) {
				return nil, fieldErr(path, "has a key that is not valid UTF-8")
			}
			if k == "" {
				return nil, emptyKey(path)
			}
			if _, err := firstFault(path+"."+k, x[k], depth+1); err != nil {
				return nil, err
			}
		}
		return nil, nil
	case []any:
		if depth > MaxPayloadDepth {
			return nil, tooDeep(path)
		}
		for i, e := range x {
			if _, err := firstFault(fmt.Sprintf("%s[%d]", path, i), e, depth+1); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
	return normalizeValue(path, v, depth)
}

func normalizeMember(path, k string, e any, depth int) (any, error) {
	if !utf8.ValidString(k) {
		return nil, fieldErr(path, "has a key that is not valid UTF-8")
	}
	if k == "" {
		return nil, emptyKey(path)
	}
	return normalizeValue(path+"."+k, e, depth+1)
}

// checkValue verifies an already-normalized payload (used by Validate) and
// returns its size in DynamoDB's terms (UTF-8 bytes of names and strings,
// numbers by their digits). It runs on every verification of a stored event,
// so the path of a failing field is built only on the way out of an error.
func checkValue(path string, v any) (int, error) {
	n, err := check(v, 1)
	if err != nil {
		err.Field = path + err.Field
		return 0, err
	}
	return n, nil
}

func tooDeep(path string) *FieldError {
	return &FieldError{Field: path, Reason: fmt.Sprintf("nests objects and arrays more than %d levels deep (the payload counts as 1); DynamoDB stores at most %d", MaxPayloadDepth, MaxPayloadDepth)}
}

func emptyKey(path string) *FieldError {
	return &FieldError{Field: path, Reason: `has an empty key ""; DynamoDB refuses empty map keys`}
}

func checkMember(k string, e any, depth int) (int, *FieldError) {
	if k == "" {
		return 0, emptyKey("")
	}
	if !utf8.ValidString(k) {
		return 0, &FieldError{Reason: "has a key that is not valid UTF-8"}
	}
	n, err := check(e, depth+1)
	if err != nil {
		err.Field = "." + k + err.Field
	}
	return n, err
}

func check(v any, depth int) (int, *FieldError) {
	switch x := v.(type) {
	case nil, bool:
		return 1, nil
	case string:
		if !utf8.ValidString(x) {
			return 0, &FieldError{Reason: "is not valid UTF-8"}
		}
		return len(x), nil
	case json.Number:
		if isCanonicalNumber(string(x)) {
			return len(x)/2 + 2, nil
		}
		n, err := CanonicalNumber("", string(x))
		if err != nil {
			return 0, err.(*FieldError)
		}
		if n == x {
			return len(x)/2 + 2, nil
		}
		return 0, &FieldError{Reason: fmt.Sprintf("number %s is not in canonical form %s; build payloads with NormalizePayload", x, n)}
	case []any:
		if depth > MaxPayloadDepth {
			return 0, tooDeep("")
		}
		size := 3
		for i, e := range x {
			n, err := check(e, depth+1)
			if err != nil {
				err.Field = "[" + strconv.Itoa(i) + "]" + err.Field
				return 0, err
			}
			size += n + 1
		}
		return size, nil
	case map[string]any:
		if depth > MaxPayloadDepth {
			return 0, tooDeep("")
		}
		size := 3
		for k, e := range x {
			n, err := checkMember(k, e, depth)
			if err != nil {
				// The first fault in key order, as normalizeValue names it.
				if _, ferr := firstFault("", x, depth); ferr != nil {
					if fe, ok := ferr.(*FieldError); ok {
						return 0, fe
					}
				}
				return 0, err
			}
			size += len(k) + n + 1
		}
		return size, nil
	default:
		return 0, &FieldError{Reason: fmt.Sprintf("has unsupported Go type %T; build payloads with NormalizePayload", v)}
	}
}

// isCanonicalNumber is the fast path of CanonicalNumber for the spellings
// NormalizePayload produces: an integer within ±(2^53−1), or a decimal in
// [1e-6, 1e21) written with the fewest digits that round-trip (ECMAScript
// writes those ranges in plain notation, as strconv's 'f' format with -1 does).
// Anything else takes the exact path.
func isCanonicalNumber(s string) bool {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f == 0 && s != "0" {
		return false
	}
	if f == math.Trunc(f) {
		return math.Abs(f) <= maxSafeInt && strconv.FormatInt(int64(f), 10) == s
	}
	if a := math.Abs(f); a < 1e-6 || a >= 1e21 {
		return false
	}
	var buf [32]byte
	return string(strconv.AppendFloat(buf[:0], f, 'f', -1, 64)) == s
}

// shortInteger reports whether s is an integer of at most 15 digits in
// plain form (no sign but '-', no leading zero, not -0): exact in binary64
// (below 2^53) and spelled as RFC 8785 spells it.
func shortInteger(s string) bool {
	d := s
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 15 || d[0] == '0' && (len(d) > 1 || len(s) > 1) {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

// CanonicalNumber checks that the decimal s is exact in IEEE 754 binary64 as
// I-JSON requires (integers within ±(2^53−1); other values must survive a
// round trip through binary64 unchanged) and returns its RFC 8785 spelling.
// path names the field in the error.
func CanonicalNumber(path, s string) (json.Number, error) {
	if shortInteger(s) {
		return json.Number(s), nil // the common case: exact, and already its own spelling
	}
	// The cheap checks first: big.Rat would build 10^exponent.
	if !validNumber(s) {
		return "", fieldErr(path, "%q is not a JSON number", s)
	}
	d := significantDigits(s)
	if d > maxDynamoDigits {
		return "", fieldErr(path, "number %s has %d significant digits; DynamoDB keeps at most %d; send it as a string", s, d, maxDynamoDigits)
	}
	f, err := strconv.ParseFloat(s, 64)
	a := math.Abs(f)
	if err != nil || math.IsInf(f, 0) || a >= maxDynamoMagnitude || d > 0 && a < minDynamoMagnitude {
		return "", fieldErr(path, "number %s is outside DynamoDB's range (0, or a magnitude from 1e-130 to 9.99…e125); send it as a string", s)
	}
	want, ok := new(big.Rat).SetString(s)
	if !ok {
		return "", fieldErr(path, "%q is not a number", s)
	}
	if want.IsInt() && new(big.Int).Abs(want.Num()).Cmp(big.NewInt(maxSafeInt)) > 0 {
		return "", fieldErr(path, "integer %s is outside I-JSON's exact range ±(2^53−1); send it as a string", s)
	}
	short := strconv.FormatFloat(f, 'g', -1, 64)
	got, _ := new(big.Rat).SetString(short)
	if got.Cmp(want) != 0 {
		return "", fieldErr(path, "number %s is not exact in IEEE 754 binary64 (it would read back as %s); send it as a string", s, short)
	}
	es6, err := jcs.NumberToJSON(f)
	if err != nil {
		return "", fieldErr(path, "number %s: %v", s, err)
	}
	return json.Number(es6), nil
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// FromJSON decodes one envelope from its JSON form (stream-filter's output,
// an SQS message body, a line of an export) strictly (ReadObject, Event): no
// unknown, missing or repeated members, no trailing data, valid Unicode, no
// "" or null optional member, integers without fraction or exponent, and the
// payload in envelope form. It does not check the values' grammar: callers
// that need a stored event call ValidateStored, and a verifier reports a
// malformed event as a chain break instead.
func FromJSON(b []byte) (Envelope, error) {
	o, err := ReadObject(b)
	if err != nil {
		return Envelope{}, fmt.Errorf("decode envelope: %w", err)
	}
	ev := o.Event()
	if ev.Malformed != nil {
		return ev.Envelope, fmt.Errorf("decode envelope: %w", ev.Malformed)
	}
	return ev.Envelope, nil
}
