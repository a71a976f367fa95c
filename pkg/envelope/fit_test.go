package envelope_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

type line struct {
	SKU string `json:"sku"`
	Qty int32  `json:"qty"`
}

type base struct {
	OrderID string `json:"order_id"`
}

type placed struct {
	base
	Items    []line            `json:"items"`
	Total    int64             `json:"total_cents"`
	Currency string            `json:"currency,omitempty"`
	Note     *string           `json:"note"`
	At       time.Time         `json:"at,omitzero"`
	Tags     map[string]string `json:"tags,omitempty"`
	Raw      []byte            `json:"raw,omitempty"`
	internal int
}

func payload(t *testing.T, v any) map[string]any {
	t.Helper()
	p, err := envelope.NormalizePayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDecodePayloadIsATolerantReader: a reader ignores members its type
// does not have (a newer producer added an optional field), decodes absent
// optional fields as their zero value, and refuses, naming the field, a
// required field that is missing or null and a value of the wrong kind:
// never a zero value in place of data the type requires.
func TestDecodePayloadIsATolerantReader(t *testing.T) {
	good := `{"order_id":"o-1","items":[{"sku":"mug","qty":2}],"total_cents":1250}`
	for _, tc := range []struct {
		name, json string
		field      string // "" = decodes
		reason     string
	}{
		{"all required", good, "", ""},
		{"unknown members ignored", `{"order_id":"o-1","items":[],"total_cents":1,"currency":"EUR","colour":"red","items_v3":{"x":1}}`, "", ""},
		{"optional null", `{"order_id":"o-1","items":[],"total_cents":1,"note":null,"currency":null}`, "", ""},
		{"missing required", `{"order_id":"o-1","items":[]}`, "payload.total_cents", "is missing; envelope_test.placed.Total is required"},
		{"missing embedded", `{"items":[],"total_cents":1}`, "payload.order_id", "is missing"},
		{"null required", `{"order_id":"o-1","items":null,"total_cents":1}`, "payload.items", "is null"},
		{"wrong kind", `{"order_id":"o-1","items":[],"total_cents":"12.50"}`, "payload.total_cents", "is a string, want an integer (int64)"},
		{"nested missing", `{"order_id":"o-1","items":[{"sku":"mug"}],"total_cents":1}`, "payload.items[0].qty", "is missing"},
		{"nested out of range", `{"order_id":"o-1","items":[{"sku":"mug","qty":3000000000}],"total_cents":1}`, "payload.items[0].qty", "fits int32"},
		{"null element", `{"order_id":"o-1","items":[null],"total_cents":1}`, "payload.items[0]", "is null"},
		{"null map value", `{"order_id":"o-1","items":[],"total_cents":1,"tags":{"a":null}}`, "payload.tags.a", "is null"},
		{"not base64", `{"order_id":"o-1","items":[],"total_cents":1,"raw":[1]}`, "payload.raw", "want a base64 string"},
		{"bad time", `{"order_id":"o-1","items":[],"total_cents":1,"at":"yesterday"}`, "payload.at", "want an RFC 3339 time"},
		{"time not a string", `{"order_id":"o-1","items":[],"total_cents":1,"at":12}`, "payload.at", "want an RFC 3339 time string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := envelope.Envelope{Payload: payload(t, []byte(tc.json))}
			var p placed
			err := e.DecodePayload(&p)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("got %v, want success", err)
				}
				if p.OrderID != "o-1" {
					t.Errorf("order_id: got %q, want o-1", p.OrderID)
				}
				return
			}
			var de *envelope.DecodeError
			if !errors.As(err, &de) || de.Err.Field != tc.field || !strings.Contains(de.Err.Reason, tc.reason) {
				t.Fatalf("got %v, want a DecodeError on %s saying %q", err, tc.field, tc.reason)
			}
			if !errors.Is(err, envelope.ErrInvalid) || !de.Permanent() || de.Into != "envelope_test.placed" {
				t.Errorf("got %#v: want it to match ErrInvalid, be permanent and name the Go type", de)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("message %q does not name %s", err, tc.field)
			}
		})
	}
	var p placed
	if err := (&envelope.Envelope{Payload: payload(t, []byte(good))}).DecodePayload(p); err == nil {
		t.Error("decode into a non-pointer: got no error")
	}
}

// TestCheckPayloadRefusesUnknownMembers: an emit is strict where a reader
// is tolerant (a member its type lacks is a producer's bug), and gives the
// author the way to make a field optional.
func TestCheckPayloadRefusesUnknownMembers(t *testing.T) {
	typ := reflect.TypeFor[placed]()
	for _, tc := range []struct{ json, field, reason string }{
		{`{"order_id":"o","items":[],"total_cents":1,"colour":"red"}`, "payload.colour", "is not a field of envelope_test.placed"},
		{`{"order_id":"o","items":[],"total_cents":1,"internal":1}`, "payload.internal", "is not a field"},
		{`{"order_id":"o","items":[]}`, "payload.total_cents", "tag it omitempty, or make it a pointer"},
	} {
		err := envelope.CheckPayload(payload(t, []byte(tc.json)), typ)
		var fe *envelope.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Reason, tc.reason) {
			t.Errorf("%s: got %v, want a FieldError on %s saying %q", tc.json, err, tc.field, tc.reason)
		}
	}
	if err := envelope.CheckPayload(payload(t, []byte(`{"order_id":"o","items":[],"total_cents":1}`)), typ); err != nil {
		t.Errorf("a payload that fits: got %v", err)
	}
}

type code int

func (c *code) UnmarshalText(b []byte) error { *c = code(len(b)); return nil }

type Extra struct {
	Batch string `json:"batch"`
}

type everything struct {
	base
	*Extra
	ID     string           `json:"id"`
	Count  int              `json:"count"`
	Small  uint8            `json:"small"`
	Ratio  float32          `json:"ratio"`
	Done   bool             `json:"done"`
	Lines  []line           `json:"lines"`
	Pair   [2]string        `json:"pair"`
	Blob   []byte           `json:"blob"`
	At     time.Time        `json:"at"`
	Ref    *string          `json:"ref"`
	Labels map[string]int64 `json:"labels"`
	ByID   map[int]string   `json:"by_id"`
	Maybe  []*line          `json:"maybe"`
	Any    any              `json:"any"`
	Code   code             `json:"code"`
	Raw    json.RawMessage  `json:"raw"`
	Named  struct {
		Deep []map[string]bool `json:"deep"`
	} `json:"named"`
}

// TestDecodePayloadDecodesAsEncodingJSON: the reader assigns values in one
// pass over the payload, and the result is what encoding/json makes of the
// same payload's JSON, for every kind a payload holds.
func TestDecodePayloadDecodesAsEncodingJSON(t *testing.T) {
	for _, raw := range []string{
		`{"order_id":"o-1","batch":"b7","id":"x","count":-3,"small":255,"ratio":0.25,"done":true,
		  "lines":[{"sku":"a","qty":1},{"sku":"b","qty":2}],"pair":["l","r"],"blob":"AQID","at":"2026-01-02T03:04:05.5Z",
		  "ref":"r","labels":{"a":9007199254740991,"b":-1},"by_id":{"7":"seven","-2":"minus"},"maybe":[null,{"sku":"c","qty":3}],
		  "any":{"n":1.5,"xs":[1,"two",null,true]},"code":"abcd","raw":{"kept":[1,2]},"named":{"deep":[{"t":true},{}]}}`,
		`{"order_id":"o-2","id":"y","count":0,"small":0,"ratio":1e-7,"done":false,"lines":[],"pair":["only"],"blob":"",
		  "at":"2026-01-02T03:04:05+02:00","ref":null,"labels":{},"by_id":{},"maybe":[],"any":null,"code":"","raw":"s","named":{"deep":[]}}`,
	} {
		p := payload(t, []byte(raw))
		var got, want everything
		if err := (&envelope.Envelope{Payload: p}).DecodePayload(&got); err != nil {
			t.Fatalf("DecodePayload: %v", err)
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got  %+v\nwant %+v (encoding/json)", got, want)
		}
	}
}
