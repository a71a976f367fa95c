package envelope

import (
	"bytes"
	"encoding/json"
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// oracle is the definition the fast encoder must match byte for byte: a
// maintained JCS library over encoding/json's rendering, written out here so
// the test does not lean on the code under test.
func oracle(e *Envelope) ([]byte, error) {
	c := *e
	c.Hash = ""
	raw, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// checkSame fails unless CanonicalBytes and the oracle agree: equal bytes,
// or both an error.
func checkSame(t *testing.T, e *Envelope) {
	t.Helper()
	got, gotErr := e.CanonicalBytes()
	want, wantErr := oracle(e)
	switch {
	case (gotErr != nil) != (wantErr != nil):
		t.Fatalf("error: got %v, want %v\nenvelope: %#v", gotErr, wantErr, e)
	case !bytes.Equal(got, want):
		t.Fatalf("canonical bytes differ:\n got %q\nwant %q\nenvelope: %#v", got, want, e)
	}
}

// Runes that stress JCS: every escape class, the characters encoding/json
// escapes but JCS must not (<, >, &, U+2028, U+2029), the BMP private-use and
// compatibility range U+E000–U+FFFF (which sorts after supplementary
// characters by code point but before them in UTF-16), non-BMP characters,
// and U+FFFD itself.
var trickyRunes = []rune{
	'a', 'z', 'A', '0', ' ', '"', '\\', '/', '\b', '\f', '\n', '\r', '\t', 0x00, 0x01, 0x1f, 0x7f,
	'<', '>', '&', 0x80, 'é', 0x2028, 0x2029, 0xD7FF, 0xE000, 0xFB01, 0xFEFF, 0xFFFD, 0xFFFF,
	0x10000, 0x1F600, 0x10437, 0x10FFFF, '€', '日',
}

// numberForms are literals of every spelling JSON allows and a few it does not.
var numberForms = []string{
	"0", "-0", "0.0", "-0.0", "1", "-1", "10", "100", "1.5", "-1.5", "1.50", "0.1", "0.5",
	"12.25", "123456789012345", "1234567890123456", "999999999999999", "9007199254740991",
	"9007199254740992", "9007199254740993", "-9007199254740993", "18446744073709551616",
	"1e0", "1E2", "1e+2", "1e-2", "1.5e-7", "1e-6", "0.000001", "0.0000001", "0.00000123",
	"1e20", "1e21", "1e22", "123e18", "1.7976931348623157e308", "5e-324", "2.2250738585072014e-308",
	"0.1000000000000000055511151231257827", "0.30000000000000004", "1e400", "-1e400", "1e-400",
	"01", "+1", ".5", "1.", "1e", "--1", "0x10", "NaN", "", "1_000", " 1",
}

func randomString(r *rand.Rand, n int) string {
	var sb strings.Builder
	for range n {
		sb.WriteRune(trickyRunes[r.IntN(len(trickyRunes))])
	}
	return sb.String()
}

func randomNumber(r *rand.Rand) json.Number {
	switch r.IntN(5) {
	case 0:
		return json.Number(numberForms[r.IntN(len(numberForms))])
	case 1:
		return json.Number(strconv.FormatInt(r.Int64N(1<<54)-(1<<53), 10))
	case 2: // a random binary64 in a random spelling
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			f = r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
		}
		fmts := []byte{'g', 'e', 'f', 'E'}
		prec := -1
		if r.IntN(3) == 0 {
			prec = r.IntN(25)
		}
		return json.Number(strconv.FormatFloat(f, fmts[r.IntN(len(fmts))], prec, 64))
	case 3: // a short decimal, the common payload case (prices, ratios)
		s := strconv.FormatInt(r.Int64N(1_000_000), 10)
		if d := r.IntN(8); d > 0 && len(s) > 0 {
			s = strings.Repeat("0", max(0, d-len(s)+1)) + s
			s = s[:len(s)-d] + "." + s[len(s)-d:]
		}
		if r.IntN(4) == 0 {
			s = "-" + s
		}
		return json.Number(s)
	default:
		f, _ := jcs.NumberToJSON(r.NormFloat64() * math.Pow(10, float64(r.IntN(50)-25)))
		return json.Number(f)
	}
}

// randomValue draws a payload value of every kind the encoder meets, now and
// then one it must leave to the reference (a Go int, invalid UTF-8, NaN).
func randomValue(r *rand.Rand, depth int) any {
	switch k := r.IntN(20); {
	case k == 0:
		return nil
	case k == 1:
		return r.IntN(2) == 0
	case k <= 5:
		return randomString(r, r.IntN(10))
	case k <= 9:
		return randomNumber(r)
	case k == 10:
		f := math.Float64frombits(r.Uint64())
		if r.IntN(4) == 0 {
			f = []float64{0, math.Copysign(0, -1), 1e21, 1e-7, 5e-324, math.NaN(), math.Inf(1)}[r.IntN(7)]
		}
		return f
	case k == 11 && depth < 4:
		l := make([]any, r.IntN(5))
		for i := range l {
			l[i] = randomValue(r, depth+1)
		}
		if r.IntN(10) == 0 {
			return []any(nil)
		}
		return l
	case k >= 12 && depth < 4:
		if r.IntN(15) == 0 {
			return map[string]any(nil)
		}
		return randomObject(r, depth+1, r.IntN(8))
	case k == 18 && r.IntN(8) == 0:
		return []any{42, "\xff", "a\xed\xa0\x80b"}[r.IntN(3)] // encoding/json's to interpret
	default:
		return "leaf"
	}
}

func randomObject(r *rand.Rand, depth, n int) map[string]any {
	m := make(map[string]any, n)
	for range n {
		m[randomString(r, r.IntN(4))] = randomValue(r, depth)
	}
	return m
}

func randomEnvelopeForCanon(r *rand.Rand) Envelope {
	opt := func() string {
		if r.IntN(2) == 0 {
			return ""
		}
		return randomString(r, 1+r.IntN(6))
	}
	ints := []int64{0, 1, -1, 1 << 53, 1<<53 + 1, -(1<<53 + 1), math.MaxInt64, math.MinInt64, 1_000_000_000_000_000_000}
	seq := r.Int64N(1 << 20)
	if r.IntN(8) == 0 {
		seq = ints[r.IntN(len(ints))]
	}
	e := Envelope{
		ID:            "0190c5a8-7d4e-7c3b-9d1a-" + randomString(r, r.IntN(3)),
		Type:          "order.placed",
		TenantID:      randomString(r, 1+r.IntN(5)),
		OccurredAt:    "2026-11-29T19:45:00.123Z",
		SchemaVersion: r.IntN(5) - 1,
		CorrelationID: opt(),
		CausationID:   opt(),
		ActorID:       opt(),
		Payload:       randomObject(r, 0, r.IntN(10)),
		Seq:           seq,
		PrevHash:      strings.Repeat("ab", 32),
		Hash:          "ignored: never part of the canonical bytes",
	}
	if r.IntN(20) == 0 {
		e.Payload = nil
	}
	return e
}

// FuzzCanonicalBytes checks CanonicalBytes against the reference for random
// envelopes (from seed) with the fuzzed key, string and number spliced into
// the payload and the optional ids. Its seed corpus runs in go test.
func FuzzCanonicalBytes(f *testing.F) {
	for i, s := range []struct{ key, str, num string }{
		{"k", "v", "1"},
		{"\uFB01", "😀", "-0"},                            // U+FB01 vs U+1F600: UTF-16 order reverses
		{"\uE000", "\U0010FFFF", "1e21"},                 // private use vs the last code point
		{"😀", "\u2028\u2029<>&", "0.000001"},             // characters encoding/json escapes, JCS does not
		{"a\x00b", "\x00\x01\x1f\x7f\b\f\n\r\t", "1e-7"}, // every control escape
		{"\"\\/", "\"quoted\" \\ back", "1.50"},
		{"", "", "9007199254740993"},
		{"é", "e\u0301", "123456789012345"},
		{"k", "\xff", "1"},         // invalid UTF-8: encoding/json writes U+FFFD
		{"\xed\xa0\x80", "s", "1"}, // a UTF-8-encoded surrogate as a key
		{"k", "v", "01"},           // not a JSON number: both refuse
		{"k", "v", "1e400"},        // out of binary64's range: both refuse
		{"k", "v", ""},             // encoding/json writes an empty json.Number as 0
		{"k", "v", "0.1000000000000000055511151231257827"},
		{"k", "v", "1E+2"},
		{"k", "v", "-1.2345678901234567e-300"},
	} {
		f.Add(uint64(i), s.key, s.str, s.num)
	}
	for seed := range uint64(48) {
		f.Add(1000+seed, "ключ", "значение", "3.14")
	}
	f.Fuzz(func(t *testing.T, seed uint64, key, str, num string) {
		r := rand.New(rand.NewPCG(seed, 7))
		e := randomEnvelopeForCanon(r)
		if e.Payload == nil {
			e.Payload = map[string]any{}
		}
		e.Payload[key] = map[string]any{key + "2": str, "n": json.Number(num), "l": []any{str, json.Number(num)}}
		e.Payload[str] = json.Number(num)
		if r.IntN(2) == 0 {
			e.ActorID = str
		}
		checkSame(t, &e)
	})
}

// TestCanonicalBytesMatchReference runs many random envelopes through both.
func TestCanonicalBytesMatchReference(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 2000
	}
	r := rand.New(rand.NewPCG(11, 13))
	for range n {
		e := randomEnvelopeForCanon(r)
		checkSame(t, &e)
	}
}

// TestCanonicalFastPathTaken makes sure the differential tests above compare
// the fast encoder, not the reference with itself: for envelopes built the
// way Emit builds them, the encoder never falls back.
func TestCanonicalFastPathTaken(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 3000 {
		e := randomEnvelopeForCanon(r)
		raw, err := json.Marshal(e.Payload)
		if err != nil {
			continue // NaN and friends: not a payload Emit accepts
		}
		p, err := NormalizePayload(json.RawMessage(raw))
		if err != nil {
			continue
		}
		e.Payload = p
		got, ok := appendEnvelope(nil, &e, false)
		if !ok {
			t.Fatalf("case %d: fast encoder fell back on a normalized envelope: %#v", i, e)
		}
		want, err := oracle(&e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d:\n got %q\nwant %q", i, got, want)
		}
	}
}

// TestCanonicalExamples spells out the cases the rules turn on, so a reader
// need not trust the oracle to see them.
func TestCanonicalExamples(t *testing.T) {
	base := Envelope{ID: "i", Type: "a.b", TenantID: "t", OccurredAt: "o", SchemaVersion: 1, Seq: 2, PrevHash: "p", Hash: "h"}
	const tail = `,"prev_hash":"p","schema_version":1,"seq":2,"tenant_id":"t","type":"a.b"}`
	tests := []struct {
		name    string
		payload map[string]any
		want    string // the payload member's JSON
	}{
		{"UTF-16 order puts a non-BMP name before U+FB01", map[string]any{"\uFB01": json.Number("1"), "😀": json.Number("2"), "z": json.Number("3")}, `{"z":3,"😀":2,"ﬁ":1}`},
		{"escapes", map[string]any{"s": "\"\\\b\f\n\r\t\x00\x1f\x7f</>&\u2028"}, `{"s":"\"\\\b\f\n\r\t\u0000\u001f` + "\x7f</>&\u2028" + `"}`},
		{"numbers in ECMAScript form", map[string]any{"a": json.Number("1.50"), "b": json.Number("1E2"), "c": json.Number("-0"), "d": json.Number("1e21"), "e": json.Number("0.0000001"), "f": 2.5}, `{"a":1.5,"b":100,"c":0,"d":1e+21,"e":1e-7,"f":2.5}`},
		{"nested and empty", map[string]any{"l": []any{map[string]any{}, []any{}, nil, true}}, `{"l":[{},[],null,true]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := base
			e.Payload = tc.payload
			got, err := e.CanonicalBytes()
			if err != nil {
				t.Fatal(err)
			}
			want := `{"id":"i","occurred_at":"o","payload":` + tc.want + tail
			if string(got) != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
			checkSame(t, &e)
		})
	}
}

func TestCanonicalNumberRecognizer(t *testing.T) {
	for _, s := range numberForms {
		f, err := strconv.ParseFloat(s, 64)
		if !canonicalNumber(s) {
			continue
		}
		want, err2 := jcs.NumberToJSON(f)
		if err != nil || err2 != nil || want != s || !validNumber(s) {
			t.Errorf("canonicalNumber(%q) = true, but JCS writes %q (%v, %v)", s, want, err, err2)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 200000 {
		s := string(randomNumber(r))
		if canonicalNumber(s) {
			f, _ := strconv.ParseFloat(s, 64)
			if want, _ := jcs.NumberToJSON(f); want != s {
				t.Fatalf("canonicalNumber(%q) = true, but JCS writes %q", s, want)
			}
		}
	}
}

// BenchmarkCanonicalBytes compares the direct encoder with the reference on
// an envelope like the bench's (about 1 KB).
func BenchmarkCanonicalBytes(b *testing.B) {
	p, err := NormalizePayload(map[string]any{
		"order_id": "o-0190c5a8", "customer": map[string]any{"id": "c-42", "name": "Zoë Müller", "email": "zoe@example.com"},
		"currency": "EUR", "total": 1234.56, "note": strings.Repeat("gift wrap, please; ", 8),
		"items": []any{
			map[string]any{"sku": "SKU-1", "qty": 2, "price": 19.99, "title": "Blue mug"},
			map[string]any{"sku": "SKU-2", "qty": 1, "price": 249.5, "title": "Espresso machine"},
			map[string]any{"sku": "SKU-3", "qty": 12, "price": 0.75, "title": "Paper filter"},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	e := Envelope{ID: "0190c5a8-7d4e-7c3b-9d1a-2b3c4d5e6f70", Type: "order.placed", TenantID: "tenant-1",
		OccurredAt: "2026-11-29T19:45:00.123456789Z", SchemaVersion: 1, ActorID: "user-7",
		CorrelationID: "corr-1", Payload: p, Seq: 4211, PrevHash: strings.Repeat("ab", 32)}
	for _, c := range []struct {
		name string
		fn   func(*Envelope) ([]byte, error)
	}{
		{"direct", func(e *Envelope) ([]byte, error) { return canonical(e, false) }},
		{"reference", func(e *Envelope) ([]byte, error) { return referenceCanonical(e, false) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			out, _ := c.fn(&e)
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.fn(&e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSpecialMarksTheFirstByte checks special against a byte-wise reading:
// zero exactly when no byte needs a look, else its lowest mark on the first
// such byte.
func TestSpecialMarksTheFirstByte(t *testing.T) {
	needsLook := func(c byte) bool { return c < 0x20 || c >= 0x80 || c == '"' || c == '\\' }
	check := func(x uint64) {
		first := -1
		for k := range 8 {
			if needsLook(byte(x >> (8 * k))) {
				first = k
				break
			}
		}
		m := special(x)
		switch {
		case first < 0 && m != 0:
			t.Fatalf("special(%#016x) = %#016x; want 0", x, m)
		case first >= 0 && (m == 0 || bits.TrailingZeros64(m)>>3 != first):
			t.Fatalf("special(%#016x) = %#016x; want the lowest mark on byte %d", x, m, first)
		}
	}
	// Every byte value in every position, among neighbours that sit on the
	// edges of the tests (a borrow must not move the first mark).
	edges := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x5b, 0x5c, 0x5d, 0x7f, 0x80, 'a'}
	for pos := range 8 {
		for c := range 256 {
			for _, e := range edges {
				var x uint64
				for k := range 8 {
					x |= uint64(e) << (8 * k)
				}
				x &^= 0xff << (8 * pos)
				x |= uint64(c) << (8 * pos)
				check(x)
				check(x&^(0xff<<(8*((pos+1)%8))) | 'a'<<(8*((pos+1)%8)))
			}
		}
	}
	r := rand.New(rand.NewPCG(41, 42))
	for range 1 << 20 {
		x := r.Uint64()
		check(x)
		check(x & 0x7f7f7f7f7f7f7f7f)
	}
}

// TestHexRules checks isHexHash and validID, which read eight bytes at a
// time, against a byte-wise reading: every byte value in every position
// of a valid hash and a valid id.
func TestHexRules(t *testing.T) {
	isHex := func(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }
	hash := []byte(strings.Repeat("0123456789abcdef", 4))
	id := []byte("0190c5a8-7d4e-7c3b-9d1a-2b3c4d5e6f70")
	for pos := range 64 {
		for c := range 256 {
			h := bytes.Clone(hash)
			h[pos] = byte(c)
			if got, want := isHexHash(h), isHex(byte(c)); got != want || isHexHash(string(h)) != want {
				t.Fatalf("isHexHash(%q) = %v; want %v", h, got, want)
			}
		}
	}
	for pos := range 36 {
		for c := range 256 {
			v := bytes.Clone(id)
			v[pos] = byte(c)
			want := isHex(byte(c))
			if pos == 8 || pos == 13 || pos == 18 || pos == 23 {
				want = c == '-'
			}
			if got := validID(v); got != want || validID(string(v)) != want {
				t.Fatalf("validID(%q) = %v; want %v", v, got, want)
			}
		}
	}
	for _, s := range []string{"", runOfA(63), runOfA(65)} {
		if isHexHash(s) {
			t.Errorf("isHexHash(%q) = true", s)
		}
	}
	for _, s := range []string{"", string(id[:35]), string(id) + "0", strings.ToUpper(string(id))} {
		if validID(s) {
			t.Errorf("validID(%q) = true", s)
		}
	}
}

func runOfA(n int) string { return strings.Repeat("a", n) }
