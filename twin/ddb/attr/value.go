package attr

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"
)

// Kind is a DynamoDB data type, named as on the wire.
type Kind uint8

// The DynamoDB data types. The zero Kind is invalid (an empty AttributeValue).
const (
	KindInvalid Kind = iota
	KindS
	KindN
	KindB
	KindBOOL
	KindNULL
	KindM
	KindL
	KindSS
	KindNS
	KindBS
)

var kindNames = [...]string{"", "S", "N", "B", "BOOL", "NULL", "M", "L", "SS", "NS", "BS"}

// String returns the wire name of k ("S", "NS", …).
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// KindOf returns the Kind named name on the wire, or KindInvalid.
func KindOf(name string) Kind {
	for i, n := range kindNames {
		if i > 0 && n == name {
			return Kind(i)
		}
	}
	return KindInvalid
}

// Value is one DynamoDB AttributeValue. Exactly the field(s) of its Kind are set:
// S holds the string of S and the canonical text of N; B the bytes of B; Bool the
// value of BOOL (NULL has no payload); M, L, SS, NS (canonical texts), BS their members.
// Values are treated as immutable once stored: operations copy before they change one.
type Value struct {
	Kind Kind
	S    string
	B    []byte
	Bool bool
	M    map[string]*Value
	L    []*Value
	SS   []string // SS members, or NS members as canonical number texts
	BS   [][]byte
}

// Item is a whole item: attribute name to value.
type Item map[string]*Value

// Str, Num, Bin, Bool, Null, Map and List build values.
func Str(s string) *Value   { return &Value{Kind: KindS, S: s} }
func Bin(b []byte) *Value   { return &Value{Kind: KindB, B: b} }
func Boolean(b bool) *Value { return &Value{Kind: KindBOOL, Bool: b} }
func Null() *Value          { return &Value{Kind: KindNULL} }
func Map(m map[string]*Value) *Value {
	if m == nil {
		m = map[string]*Value{}
	}
	return &Value{Kind: KindM, M: m}
}
func List(l []*Value) *Value { return &Value{Kind: KindL, L: l} }

// Num builds an N value from a number's text, which must already be valid (see ParseNumber).
func Num(canonical string) *Value { return &Value{Kind: KindN, S: canonical} }

// ---- numbers: up to 38 significant digits, magnitude 1E-130 to 9.99…E+125 ----

// numCtx is DynamoDB's number context: 38 digits of precision. Arithmetic that needs
// more digits than that is refused (AWS: "Number overflow" / "precision"), never rounded.
var numCtx = func() *apd.Context {
	c := apd.BaseContext.WithPrecision(38)
	c.MaxExponent = 126
	c.MinExponent = -130
	c.Traps = apd.DefaultTraps | apd.Inexact | apd.Rounded
	return c
}()

// ParseNumber parses a DynamoDB number's text and returns its canonical form: no
// exponent unless needed, no leading or trailing zeros, no "+", "-0" as "0". The
// error is DynamoDB's own ValidationException wording.
func ParseNumber(s string) (string, *apd.Decimal, error) {
	d, err := parseDecimal(s)
	if err != nil {
		return "", nil, err
	}
	return formatDecimal(d), d, nil
}

func parseDecimal(s string) (*apd.Decimal, error) {
	if s == "" || strings.TrimSpace(s) != s {
		return nil, invalidf("The parameter cannot be converted to a numeric value: %s", s)
	}
	d, _, err := apd.NewFromString(s)
	if err != nil || d.Form != apd.Finite {
		return nil, invalidf("The parameter cannot be converted to a numeric value: %s", s)
	}
	return checkRange(d, s)
}

func checkRange(d *apd.Decimal, text string) (*apd.Decimal, error) {
	d.Reduce(d)
	if d.IsZero() {
		d.Negative = false
		d.Exponent = 0
		return d, nil
	}
	if d.NumDigits() > 38 {
		return nil, invalidf("Attempting to store more than 38 significant digits in a Number")
	}
	adj := int64(d.Exponent) + d.NumDigits() - 1 // exponent of the leading digit
	if adj > 125 {
		return nil, invalidf("Number overflow. Attempting to store a number with magnitude larger than supported range")
	}
	if adj < -130 {
		return nil, invalidf("Number underflow. Attempting to store a number with magnitude smaller than supported range")
	}
	_ = text
	return d, nil
}

func formatDecimal(d *apd.Decimal) string {
	if d.IsZero() {
		return "0"
	}
	// 'f' never uses an exponent: what AWS returns for every number it stores.
	return d.Text('f')
}

// Decimal returns the value of an N (or an NS member's text) as a decimal.
func Decimal(canonical string) *apd.Decimal {
	d, _, err := apd.NewFromString(canonical)
	if err != nil {
		panic("attr: stored number is not canonical: " + canonical)
	}
	return d
}

// AddNumbers returns a+b (or a-b when sub) in canonical form, or DynamoDB's error when
// the result needs more than 38 digits or leaves the range.
func AddNumbers(a, b string, sub bool) (string, error) {
	// Canonical texts carry no exponent, so 9e125 arrives as 126 digits; reduced
	// (9 × 10^125) the operands fit the 38-digit context, and only a result that
	// really needs more digits is refused.
	x, y := Decimal(a), Decimal(b)
	x.Reduce(x)
	y.Reduce(y)
	var r apd.Decimal
	var err error
	if sub {
		_, err = numCtx.Sub(&r, x, y)
	} else {
		_, err = numCtx.Add(&r, x, y)
	}
	if err != nil {
		if strings.Contains(err.Error(), "overflow") {
			return "", invalidf("Number overflow. Attempting to store a number with magnitude larger than supported range")
		}
		if strings.Contains(err.Error(), "underflow") || strings.Contains(err.Error(), "subnormal") {
			return "", invalidf("Number underflow. Attempting to store a number with magnitude smaller than supported range")
		}
		return "", invalidf("Number overflow. Attempting to store a number with magnitude larger than supported range")
	}
	d, err := checkRange(&r, "")
	if err != nil {
		return "", err
	}
	return formatDecimal(d), nil
}

// CompareNumbers orders two canonical number texts numerically. Canonical texts (what
// ParseNumber returns) compare without parsing, which key order does on every tree
// step: sign, then integer-digit count, then the digits. Any other text is compared as
// decimals.
func CompareNumbers(a, b string) int {
	if a == b {
		return 0
	}
	aNeg, aInt, aFrac, okA := splitCanonical(a)
	bNeg, bInt, bFrac, okB := splitCanonical(b)
	if !okA || !okB {
		return Decimal(a).Cmp(Decimal(b))
	}
	if aNeg != bNeg {
		if aNeg {
			return -1
		}
		return 1
	}
	// Without leading zeros a longer integer part is larger; without trailing zeros
	// the fractions order as text.
	c := len(aInt) - len(bInt)
	if c == 0 {
		c = strings.Compare(aInt, bInt)
	}
	if c == 0 {
		c = strings.Compare(aFrac, bFrac)
	}
	if aNeg {
		c = -c
	}
	switch {
	case c < 0:
		return -1
	case c > 0:
		return 1
	}
	return 0
}

// splitCanonical splits a canonical number's text: an optional "-" (never on zero), an
// integer part without leading zeros ("0" below one), and an optional "." with a
// fraction that does not end in zero. ok is false for any other text.
func splitCanonical(s string) (neg bool, intPart, frac string, ok bool) {
	if len(s) > 0 && s[0] == '-' {
		neg, s = true, s[1:]
	}
	intPart = s
	if i := strings.IndexByte(s, '.'); i >= 0 {
		intPart, frac = s[:i], s[i+1:]
		if frac == "" || frac[len(frac)-1] == '0' || !allDigits(frac) {
			return false, "", "", false
		}
	}
	if intPart == "" || !allDigits(intPart) || (intPart[0] == '0' && len(intPart) > 1) {
		return false, "", "", false
	}
	if neg && intPart == "0" && frac == "" {
		return false, "", "", false // "-0"
	}
	return neg, intPart, frac, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// ---- comparison and equality ----

// Compare orders two scalar values of one Kind as DynamoDB orders keys and compares in
// expressions: S and B bytewise (UTF-8 bytes for S), N numerically. ok is false when the
// kinds differ or are not S, N or B.
func Compare(a, b *Value) (c int, ok bool) {
	if a == nil || b == nil || a.Kind != b.Kind {
		return 0, false
	}
	switch a.Kind {
	case KindS:
		return strings.Compare(a.S, b.S), true
	case KindN:
		return CompareNumbers(a.S, b.S), true
	case KindB:
		return bytes.Compare(a.B, b.B), true
	}
	return 0, false
}

// Equal reports whether a and b are the same DynamoDB value: sets compare as sets,
// numbers numerically (canonical texts make that a string comparison).
func Equal(a, b *Value) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case KindS, KindN:
		return a.S == b.S
	case KindB:
		return bytes.Equal(a.B, b.B)
	case KindBOOL:
		return a.Bool == b.Bool
	case KindNULL:
		return true
	case KindM:
		if len(a.M) != len(b.M) {
			return false
		}
		for k, v := range a.M {
			w, ok := b.M[k]
			if !ok || !Equal(v, w) {
				return false
			}
		}
		return true
	case KindL:
		if len(a.L) != len(b.L) {
			return false
		}
		for i := range a.L {
			if !Equal(a.L[i], b.L[i]) {
				return false
			}
		}
		return true
	case KindSS, KindNS:
		if len(a.SS) != len(b.SS) {
			return false
		}
		seen := make(map[string]struct{}, len(a.SS))
		for _, s := range a.SS {
			seen[s] = struct{}{}
		}
		for _, s := range b.SS {
			if _, ok := seen[s]; !ok {
				return false
			}
		}
		return true
	case KindBS:
		if len(a.BS) != len(b.BS) {
			return false
		}
		seen := make(map[string]struct{}, len(a.BS))
		for _, s := range a.BS {
			seen[string(s)] = struct{}{}
		}
		for _, s := range b.BS {
			if _, ok := seen[string(s)]; !ok {
				return false
			}
		}
		return true
	}
	return false
}

// EqualItems reports whether two items hold the same attributes with equal values.
func EqualItems(a, b Item) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !Equal(v, w) {
			return false
		}
	}
	return true
}

// Clone returns a deep copy of v.
func (v *Value) Clone() *Value {
	if v == nil {
		return nil
	}
	c := *v
	if v.B != nil {
		c.B = append([]byte(nil), v.B...)
	}
	if v.M != nil {
		c.M = make(map[string]*Value, len(v.M))
		for k, e := range v.M {
			c.M[k] = e.Clone()
		}
	}
	if v.L != nil {
		c.L = make([]*Value, len(v.L))
		for i, e := range v.L {
			c.L[i] = e.Clone()
		}
	}
	if v.SS != nil {
		c.SS = append([]string(nil), v.SS...)
	}
	if v.BS != nil {
		c.BS = make([][]byte, len(v.BS))
		for i, e := range v.BS {
			c.BS[i] = append([]byte(nil), e...)
		}
	}
	return &c
}

// Clone returns a deep copy of it.
func (it Item) Clone() Item {
	if it == nil {
		return nil
	}
	c := make(Item, len(it))
	for k, v := range it {
		c[k] = v.Clone()
	}
	return c
}

// ---- size, by AWS's rules ----
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html

// Size returns the item's size as DynamoDB counts it: each attribute's name length in
// UTF-8 bytes plus its value's size.
func (it Item) Size() int {
	n := 0
	for k, v := range it {
		n += len(k) + v.Size()
	}
	return n
}

// Size returns the value's size by AWS's rules: strings and binaries their length;
// numbers one byte per two significant digits plus one; BOOL and NULL one byte; lists
// and maps three bytes plus one per element (plus the key's length for maps); sets the
// sum of their members.
func (v *Value) Size() int {
	switch v.Kind {
	case KindS:
		return len(v.S)
	case KindN:
		return numberSize(v.S)
	case KindB:
		return len(v.B)
	case KindBOOL, KindNULL:
		return 1
	case KindL:
		n := 3
		for _, e := range v.L {
			n += 1 + e.Size()
		}
		return n
	case KindM:
		n := 3
		for k, e := range v.M {
			n += 1 + len(k) + e.Size()
		}
		return n
	case KindSS:
		n := 0
		for _, s := range v.SS {
			n += len(s)
		}
		return n
	case KindNS: // SS, NS and BS differ in how a member is sized (bytes, numberSize, raw bytes)
		n := 0
		for _, s := range v.SS {
			n += numberSize(s)
		}
		return n
	case KindBS:
		n := 0
		for _, b := range v.BS {
			n += len(b)
		}
		return n
	}
	return 0
}

// numberSize: one byte per two significant digits, plus one; zero, with none, is one
// byte (the documented rule read literally). pkg/eventstore's numberSize (the bench's
// WCU model, eventstore.ItemSize) must stay in step with this one:
// TestItemSizeMatchesEventstoreModel (package ddb_test) holds them to the same sizes.
func numberSize(s string) int {
	digits, lead, trailingZeros := 0, true, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == 'e' || c == 'E' {
			break
		}
		if c < '0' || c > '9' {
			continue
		}
		if lead && c == '0' {
			continue
		}
		lead = false
		digits++
		if c == '0' {
			trailingZeros++
		} else {
			trailingZeros = 0
		}
	}
	digits -= trailingZeros
	return (digits+1)/2 + 1
}

// ---- JSON, as the DynamoDB JSON 1.0 protocol writes AttributeValues ----

// MarshalJSON writes v as {"S":"…"}, {"N":"…"}, {"B":"<base64>"}, {"M":{…}} and so on.
func (v *Value) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	v.appendJSON(&buf)
	return buf.Bytes(), nil
}

func (v *Value) appendJSON(buf *bytes.Buffer) {
	buf.WriteString(`{"`)
	buf.WriteString(v.Kind.String())
	buf.WriteString(`":`)
	switch v.Kind {
	case KindS, KindN:
		writeJSONString(buf, v.S)
	case KindB:
		writeBase64(buf, v.B)
	case KindBOOL:
		if v.Bool {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case KindNULL:
		buf.WriteString("true")
	case KindM:
		v.appendMembers(buf)
	case KindL:
		appendArray(buf, len(v.L), func(i int) { v.L[i].appendJSON(buf) })
	case KindSS, KindNS:
		appendArray(buf, len(v.SS), func(i int) { writeJSONString(buf, v.SS[i]) })
	case KindBS:
		appendArray(buf, len(v.BS), func(i int) { writeBase64(buf, v.BS[i]) })
	default:
		buf.WriteString("null")
	}
	buf.WriteByte('}')
}

func writeJSONString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s)
	buf.Write(b)
}

func writeBase64(buf *bytes.Buffer, b []byte) {
	buf.WriteByte('"')
	enc := base64.StdEncoding
	out := make([]byte, enc.EncodedLen(len(b)))
	enc.Encode(out, b)
	buf.Write(out)
	buf.WriteByte('"')
}

// MarshalJSON writes the item as a JSON object of AttributeValues.
func (it Item) MarshalJSON() ([]byte, error) {
	return Map(it).marshalMembers(), nil
}

func (v *Value) marshalMembers() []byte {
	var buf bytes.Buffer
	v.appendMembers(&buf)
	return buf.Bytes()
}

// appendMembers writes v's map as a JSON object, its keys sorted.
func (v *Value) appendMembers(buf *bytes.Buffer) {
	buf.WriteByte('{')
	keys := make([]string, 0, len(v.M))
	for k := range v.M {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		writeJSONString(buf, k)
		buf.WriteByte(':')
		v.M[k].appendJSON(buf)
	}
	buf.WriteByte('}')
}

// appendArray writes a JSON array of n elements, elem(i) writing the i-th.
func appendArray(buf *bytes.Buffer, n int, elem func(i int)) {
	buf.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			buf.WriteByte(',')
		}
		elem(i)
	}
	buf.WriteByte(']')
}

// UnmarshalJSON reads one AttributeValue and validates it as DynamoDB does on input:
// exactly one data type; numbers parsed to 38 digits and stored canonically; sets
// non-empty and without duplicates. Errors are *InvalidError.
func (v *Value) UnmarshalJSON(data []byte) error {
	if v.unmarshalScalar(data) {
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return serialf("Supplied AttributeValue is not a JSON object")
	}
	if len(raw) != 1 {
		if len(raw) == 0 {
			return invalidf("Supplied AttributeValue is empty, must contain exactly one of the supported datatypes")
		}
		return invalidf("Supplied AttributeValue has more than one datatypes set, must contain exactly one of the supported datatypes")
	}
	for name, body := range raw {
		k := KindOf(name)
		if k == KindInvalid {
			return invalidf("Supplied AttributeValue has an unknown datatype %q, must contain exactly one of the supported datatypes", name)
		}
		*v = Value{Kind: k}
		switch k {
		case KindS:
			if err := json.Unmarshal(body, &v.S); err != nil {
				return serialf("STRING_VALUE can not be converted to a String")
			}
			if !utf8.ValidString(v.S) {
				return invalidf("Supplied AttributeValue S is not valid UTF-8")
			}
		case KindN:
			var s string
			if err := json.Unmarshal(body, &s); err != nil {
				return serialf("NUMBER_VALUE can not be converted to a String")
			}
			c, _, err := ParseNumber(s)
			if err != nil {
				return err
			}
			v.S = c
		case KindB:
			if err := json.Unmarshal(body, &v.B); err != nil {
				return serialf("Base64 encoded value of B is malformed")
			}
			if v.B == nil {
				v.B = []byte{}
			}
		case KindBOOL:
			if err := json.Unmarshal(body, &v.Bool); err != nil {
				return serialf("BOOL_VALUE can not be converted to a Boolean")
			}
		case KindNULL:
			var b bool
			if err := json.Unmarshal(body, &b); err != nil || !b {
				return invalidf("One or more parameter values were invalid: Null attribute value types must have the value of true")
			}
		case KindM:
			if err := json.Unmarshal(body, &v.M); err != nil {
				return asValidation(err, "M can not be converted to a map of AttributeValues")
			}
			if v.M == nil {
				v.M = map[string]*Value{}
			}
			for mk, e := range v.M {
				if e == nil {
					return invalidf("Supplied AttributeValue is empty, must contain exactly one of the supported datatypes")
				}
				_ = mk
			}
		case KindL:
			if err := json.Unmarshal(body, &v.L); err != nil {
				return asValidation(err, "L can not be converted to a list of AttributeValues")
			}
			if v.L == nil {
				v.L = []*Value{}
			}
			for _, e := range v.L {
				if e == nil {
					return invalidf("Supplied AttributeValue is empty, must contain exactly one of the supported datatypes")
				}
			}
		case KindSS:
			if err := json.Unmarshal(body, &v.SS); err != nil {
				return serialf("SS can not be converted to a list of Strings")
			}
			if err := checkSet(k, v.SS); err != nil {
				return err
			}
		case KindNS:
			var texts []string
			if err := json.Unmarshal(body, &texts); err != nil {
				return serialf("NS can not be converted to a list of Strings")
			}
			v.SS = make([]string, len(texts))
			for i, s := range texts {
				c, _, err := ParseNumber(s)
				if err != nil {
					return err
				}
				v.SS[i] = c
			}
			if err := checkSet(k, v.SS); err != nil {
				return err
			}
		case KindBS:
			if err := json.Unmarshal(body, &v.BS); err != nil {
				return serialf("Base64 encoded value of BS is malformed")
			}
			members := make([]string, len(v.BS))
			for i, b := range v.BS {
				members[i] = string(b)
			}
			if err := checkSet(k, members); err != nil {
				return err
			}
		}
	}
	return nil
}

// unmarshalScalar decodes the commonest values, {"S":"…"}, {"N":"…"}, {"BOOL":…}
// and {"NULL":true} with a plain ASCII text, without the generic decoder's two
// passes and map; it reports false (v untouched) for anything else, which the
// generic path then decodes. encoding/json has checked data is valid JSON.
func (v *Value) unmarshalScalar(data []byte) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipSpace(data, i+1)
	if i >= len(data) || data[i] != '"' {
		return false
	}
	j := i + 1
	for j < len(data) && data[j] >= 'A' && data[j] <= 'Z' {
		j++
	}
	if j >= len(data) || data[j] != '"' {
		return false
	}
	kind := KindOf(string(data[i+1 : j]))
	i = skipSpace(data, j+1)
	if i >= len(data) || data[i] != ':' {
		return false
	}
	i = skipSpace(data, i+1)
	var text string
	var flag bool
	switch kind {
	case KindS, KindN:
		if i >= len(data) || data[i] != '"' {
			return false
		}
		j = i + 1
		for j < len(data) && data[j] != '"' {
			if c := data[j]; c == '\\' || c >= 0x80 {
				return false // escapes and non-ASCII text take the generic path
			}
			j++
		}
		if j >= len(data) {
			return false
		}
		text = string(data[i+1 : j])
		i = j + 1
	case KindBOOL, KindNULL:
		switch {
		case bytes.HasPrefix(data[i:], []byte("true")):
			flag, i = true, i+4
		case bytes.HasPrefix(data[i:], []byte("false")) && kind == KindBOOL:
			i += 5
		default:
			return false
		}
	default:
		return false
	}
	if i = skipSpace(data, i); i >= len(data) || data[i] != '}' || skipSpace(data, i+1) != len(data) {
		return false
	}
	switch kind {
	case KindN:
		c, _, err := ParseNumber(text)
		if err != nil {
			return false // the generic path words the error
		}
		*v = Value{Kind: KindN, S: c}
	case KindS:
		*v = Value{Kind: KindS, S: text}
	case KindBOOL:
		*v = Value{Kind: KindBOOL, Bool: flag}
	default:
		*v = Value{Kind: KindNULL}
	}
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func checkSet(k Kind, members []string) error {
	if len(members) == 0 {
		return invalidf("One or more parameter values were invalid: An %s may not be empty", setWord(k))
	}
	seen := make(map[string]struct{}, len(members))
	for _, m := range members {
		if _, dup := seen[m]; dup {
			return invalidf("One or more parameter values were invalid: Input collection %s contains duplicates.", setDisplay(k, members))
		}
		seen[m] = struct{}{}
	}
	return nil
}

func setWord(k Kind) string {
	switch k {
	case KindSS:
		return "string set"
	case KindNS:
		return "number set"
	}
	return "binary set"
}

func setDisplay(k Kind, members []string) string {
	if k == KindBS {
		return "[binary]"
	}
	return "[" + strings.Join(members, ", ") + "]"
}

// asValidation passes on an error of a nested value as it is; any other (the JSON
// was not of the expected shape) is a SerializationError with msg.
func asValidation(err error, msg string) error {
	switch e := err.(type) {
	case *InvalidError:
		return e
	case *SerializationError:
		return e
	}
	return serialf("%s", msg)
}

// InvalidError is a value DynamoDB refuses; its message is AWS's ValidationException wording.
// The server sends it as a ValidationException.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

// SerializationError is an AttributeValue whose JSON has the wrong shape for its
// type ({"N": 3} instead of {"N": "3"}, a B that is not base64): AWS answers these
// with SerializationException, not ValidationException (observed, and relied on by
// public compatibility suites run against AWS).
type SerializationError struct{ Msg string }

func (e *SerializationError) Error() string { return e.Msg }

func serialf(format string, args ...any) *SerializationError {
	return &SerializationError{Msg: fmt.Sprintf(format, args...)}
}

func invalidf(format string, args ...any) *InvalidError {
	return &InvalidError{Msg: fmt.Sprintf(format, args...)}
}

// UnmarshalJSON reads an item (a JSON object of AttributeValues).
func (it *Item) UnmarshalJSON(data []byte) error {
	var m map[string]*Value
	if err := json.Unmarshal(data, &m); err != nil {
		return asValidation(err, "Supplied item is not a map of AttributeValues")
	}
	for _, v := range m {
		if v == nil {
			return invalidf("Supplied AttributeValue is empty, must contain exactly one of the supported datatypes")
		}
	}
	*it = m
	return nil
}
