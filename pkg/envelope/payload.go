package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// maxSafeInt is I-JSON's largest exactly interoperable integer, 2^53 − 1.
const maxSafeInt = 1<<53 - 1

// NormalizePayload turns a payload value (a struct, a map, or raw JSON bytes)
// into the envelope's payload form: a map whose numbers are json.Number in
// their canonical (ECMAScript) spelling. It refuses anything that is not a
// JSON object and any number that is not exact in IEEE 754 binary64, naming
// the field path.
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
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fieldErr("payload", "cannot be encoded as JSON: %v", err)
		}
		raw = b
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, fieldErr("payload", "is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, fieldErr("payload", "has trailing data after the JSON object")
	}
	m, ok := out.(map[string]any)
	if !ok {
		return nil, fieldErr("payload", "must be a JSON object, got %s", kindOf(out))
	}
	norm, err := normalizeValue("payload", m)
	if err != nil {
		return nil, err
	}
	return norm.(map[string]any), nil
}

// normalizeValue checks v and rewrites every number to its canonical spelling.
func normalizeValue(path string, v any) (any, error) {
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
		out := make([]any, len(x))
		for i, e := range x {
			n, err := normalizeValue(fmt.Sprintf("%s[%d]", path, i), e)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if !utf8.ValidString(k) {
				return nil, fieldErr(path, "has a key that is not valid UTF-8")
			}
			n, err := normalizeValue(path+"."+k, e)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	default:
		return nil, fieldErr(path, "has unsupported Go type %T; use JSON kinds only", v)
	}
}

// checkValue verifies an already-normalized payload (used by Validate).
func checkValue(path string, v any) error {
	switch x := v.(type) {
	case nil, bool:
		return nil
	case string:
		if !utf8.ValidString(x) {
			return fieldErr(path, "is not valid UTF-8")
		}
		return nil
	case json.Number:
		n, err := CanonicalNumber(path, string(x))
		if err != nil {
			return err
		}
		if n != x {
			return fieldErr(path, "number %s is not in canonical form %s; build payloads with NormalizePayload", x, n)
		}
		return nil
	case []any:
		for i, e := range x {
			if err := checkValue(fmt.Sprintf("%s[%d]", path, i), e); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		for k, e := range x {
			if err := checkValue(path+"."+k, e); err != nil {
				return err
			}
		}
		return nil
	default:
		return fieldErr(path, "has unsupported Go type %T; build payloads with NormalizePayload", v)
	}
}

// CanonicalNumber checks that the decimal s is exact in IEEE 754 binary64 as
// I-JSON requires (integers within ±(2^53−1); other values must survive a
// round trip through binary64 unchanged) and returns its RFC 8785 spelling.
// path names the field in the error.
func CanonicalNumber(path, s string) (json.Number, error) {
	want, ok := new(big.Rat).SetString(s)
	if !ok {
		return "", fieldErr(path, "%q is not a number", s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return "", fieldErr(path, "number %s is outside IEEE 754 binary64's range; send it as a string", s)
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
	default:
		return fmt.Sprintf("%T", v)
	}
}

func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode payload into %T: %w", v, err)
	}
	return nil
}

// FromJSON decodes one envelope from its JSON form (stream-filter's output,
// an SQS message body, a line of an export): strictly (no unknown members,
// no trailing data) and with the payload in envelope form. It does not
// validate: callers that need a stored event call ValidateStored, and a
// verifier reports a malformed event as a chain break instead.
func FromJSON(b []byte) (Envelope, error) {
	var e Envelope
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return e, fmt.Errorf("decode envelope: %w", err)
	}
	if dec.More() {
		return e, fmt.Errorf("decode envelope: trailing data after the envelope")
	}
	if e.Payload != nil {
		p, err := NormalizePayload(e.Payload)
		if err != nil {
			return e, fmt.Errorf("decode envelope: %w", err)
		}
		e.Payload = p
	}
	return e, nil
}
