package envelope_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// verifierRefuses lists payload texts the verifier refuses (FromJSON reads a
// stored line strictly) and encoding/json silently repairs: the field
// NormalizePayload must name, and what its reason must say.
var verifierRefuses = []struct{ name, in, field, reason string }{
	{"repeated member", `{"order_id":"o-1","order_id":"o-2"}`, "payload.order_id", "more than once"},
	{"repeated nested member", `{"a":{"items":[1,{"sku":"x","sku":"y"}]}}`, "payload.a.items[1].sku", "more than once"},
	{"invalid UTF-8", "{\"note\":\"caf\xe9\"}", "payload.note", "UTF-8"},
	{"invalid UTF-8 in an array", "{\"tags\":[\"ok\",\"\xff\"]}", "payload.tags[1]", "UTF-8"},
	{"lone high surrogate", `{"name":"\ud800"}`, "payload.name", `lone surrogate \ud800`},
	{"lone low surrogate", `{"a":{"b":"x\udc00y"}}`, "payload.a.b", `lone surrogate \udc00`},
	{"reversed pair", `{"s":"\udc00\ud800"}`, "payload.s", "lone surrogate"},
	{"bad member name", "{\"a\":{\"k\xff\":1}}", "payload.a", "member name"},
	{"surrogate member name", `{"\ud83d":1}`, "payload", "member name"},
	{"byte order mark", "\xef\xbb\xbf{\"a\":1}", "payload", "byte order mark"},
}

// TestNormalizePayloadRefusesWhatTheVerifierRefuses: a payload whose text a
// verifier refuses is refused at emit, naming its field, never stored as
// encoding/json would repair it (last member wins, U+FFFD).
func TestNormalizePayloadRefusesWhatTheVerifierRefuses(t *testing.T) {
	line, err := json.Marshal(validEnvelope(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range verifierRefuses {
		t.Run(tc.name, func(t *testing.T) {
			_, err := envelope.NormalizePayload(json.RawMessage(tc.in))
			var fe *envelope.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Reason, tc.reason) {
				t.Fatalf("NormalizePayload(%q): got %v, want a FieldError on %s saying %q", tc.in, err, tc.field, tc.reason)
			}
			if !errors.Is(err, envelope.ErrInvalid) {
				t.Errorf("got %v, want it to match ErrInvalid", err)
			}
			// The same text as a stored event's payload: the verifier's
			// reader refuses it too (the rule is one rule).
			body := strings.TrimPrefix(tc.in, "\xef\xbb\xbf")
			bad := strings.Replace(string(line), `"payload":{"items":["a",2],"order_id":"o-1","total":12.5}`, `"payload":`+body, 1)
			if bad == string(line) {
				t.Fatalf("fixture line %s has no payload to replace", line)
			}
			if tc.name != "byte order mark" {
				if _, err := envelope.FromJSON([]byte(bad)); err == nil {
					t.Errorf("FromJSON(%s): got nil, want the verifier to refuse it", bad)
				}
			}
		})
	}
	for _, ok := range []string{`{"s":"\ud83d\ude00"}`, `{"s":"😀 café \ufffd"}`, `{"a":{"x":1},"b":{"x":2}}`, ` {"a":1} `} {
		if _, err := envelope.NormalizePayload(json.RawMessage(ok)); err != nil {
			t.Errorf("NormalizePayload(%s): %v", ok, err)
		}
	}
}

type textID string

func (t textID) MarshalText() ([]byte, error) { return []byte(t), nil }

type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }

// TestNormalizePayloadRefusesBadGoText: encoding/json writes a Go string that
// is not valid UTF-8 as U+FFFD; NormalizePayload refuses it instead, in
// struct fields (by their json names), map keys and values, slices, text
// marshalers and MarshalJSON output.
func TestNormalizePayloadRefusesBadGoText(t *testing.T) {
	type line struct {
		SKU string `json:"sku"`
	}
	type order struct {
		ID    string    `json:"order_id"`
		Lines []line    `json:"lines"`
		At    time.Time `json:"at"`
		Ref   textID    `json:"ref,omitempty"`
		Raw   rawJSON   `json:"raw,omitempty"`
		Note  *string   `json:"note,omitempty"`
	}
	bad := "caf\xe9"
	for _, tc := range []struct {
		name  string
		in    any
		field string
	}{
		{"struct field", order{ID: bad}, "payload.order_id"},
		{"nested slice", &order{ID: "o-1", Lines: []line{{"a"}, {bad}}}, "payload.lines[1].sku"},
		{"pointer field", order{ID: "o-1", Note: &bad}, "payload.note"},
		{"text marshaler", order{ID: "o-1", Ref: textID(bad)}, "payload.ref"},
		{"MarshalJSON output", order{ID: "o-1", Raw: rawJSON(`"` + bad + `"`)}, "payload.raw"},
		{"map value", map[string]any{"a": map[string]any{"b": []any{bad}}}, "payload.a.b[0]"},
		{"map key", map[string]any{"a": map[string]int{bad: 1}}, "payload.a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := envelope.NormalizePayload(tc.in)
			var fe *envelope.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Reason, "UTF-8") {
				t.Fatalf("got %v, want a FieldError on %s about UTF-8", err, tc.field)
			}
		})
	}
	p, err := envelope.NormalizePayload(order{ID: "o-1 café", Lines: []line{{"ü"}}, Ref: "r-1", Raw: `{"x":1}`})
	if err != nil {
		t.Fatalf("valid struct: %v", err)
	}
	if p["order_id"] != "o-1 café" || p["ref"] != "r-1" {
		t.Errorf("got %v, want the struct's values", p)
	}
}

// TestCanonicalNumberIntegers: short integers take a fast path; it must
// answer exactly what the exact path answers around its edges (-0, leading
// zeros, 15 and 16 digits, 2^53).
func TestCanonicalNumberIntegers(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0", "0"}, {"-0", "0"}, {"7", "7"}, {"-7", "-7"},
		{"999999999999999", "999999999999999"}, {"-999999999999999", "-999999999999999"},
		{"1000000000000000", "1000000000000000"}, {"9007199254740991", "9007199254740991"},
		{"9007199254740992", ""}, {"007", ""}, {"-", ""}, {"", ""}, {"1e3", "1000"}, {"12.50", "12.5"},
	} {
		got, err := envelope.CanonicalNumber("n", tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("CanonicalNumber(%q) = %s, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("CanonicalNumber(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
