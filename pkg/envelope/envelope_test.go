package envelope_test

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

func validEnvelope(t testing.TB) envelope.Envelope {
	t.Helper()
	p, err := envelope.NormalizePayload(map[string]any{"order_id": "o-1", "total": 12.5, "items": []any{"a", 2}})
	if err != nil {
		t.Fatal(err)
	}
	return envelope.Envelope{
		ID:            "0190c5a8-7d4e-7c3b-9d1a-2b3c4d5e6f70",
		Type:          "order.placed",
		TenantID:      "t1",
		OccurredAt:    "2026-11-29T19:45:00.123456789Z",
		SchemaVersion: 1,
		Payload:       p,
	}
}

func TestValidateNamesTheField(t *testing.T) {
	big := strings.Repeat("x", envelope.MaxPayloadBytes)
	tests := []struct {
		name  string
		edit  func(*envelope.Envelope)
		field string
	}{
		{"empty id", func(e *envelope.Envelope) { e.ID = "" }, "id"},
		{"type without module", func(e *envelope.Envelope) { e.Type = "placed" }, "type"},
		{"type with upper-case module", func(e *envelope.Envelope) { e.Type = "Order.placed" }, "type"},
		{"type with space", func(e *envelope.Envelope) { e.Type = "order.pla ced" }, "type"},
		{"empty tenant", func(e *envelope.Envelope) { e.TenantID = "" }, "tenant_id"},
		{"tenant too long", func(e *envelope.Envelope) { e.TenantID = strings.Repeat("t", 129) }, "tenant_id"},
		{"occurred_at not RFC 3339", func(e *envelope.Envelope) { e.OccurredAt = "yesterday" }, "occurred_at"},
		{"occurred_at not UTC", func(e *envelope.Envelope) { e.OccurredAt = "2026-11-29T20:45:00+01:00" }, "occurred_at"},
		{"schema version 0", func(e *envelope.Envelope) { e.SchemaVersion = 0 }, "schema_version"},
		{"nil payload", func(e *envelope.Envelope) { e.Payload = nil }, "payload"},
		{"payload too large", func(e *envelope.Envelope) { e.Payload = map[string]any{"blob": big} }, "payload"},
		{"raw float in payload", func(e *envelope.Envelope) { e.Payload = map[string]any{"x": 1.5} }, "payload.x"},
		{"non-canonical number", func(e *envelope.Envelope) { e.Payload = map[string]any{"x": json.Number("1.50")} }, "payload.x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := validEnvelope(t)
			tc.edit(&e)
			err := e.Validate()
			var fe *envelope.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *FieldError", err)
			}
			if fe.Field != tc.field {
				t.Errorf("field: got %q, want %q (%v)", fe.Field, tc.field, err)
			}
			if !errors.Is(err, envelope.ErrInvalid) {
				t.Errorf("errors.Is(err, ErrInvalid) = false for %v", err)
			}
		})
	}
	e := validEnvelope(t)
	if err := e.Validate(); err != nil {
		t.Fatalf("valid envelope: %v", err)
	}
}

func TestNormalizePayloadNumbers(t *testing.T) {
	tests := []struct {
		in    string
		want  string // canonical spelling, or "" when refused
		field string
	}{
		{`{"n":9007199254740991}`, "9007199254740991", ""},
		{`{"n":-9007199254740991}`, "-9007199254740991", ""},
		{`{"n":9007199254740992}`, "", "payload.n"},
		{`{"n":18446744073709551616}`, "", "payload.n"},
		{`{"n":0.1}`, "0.1", ""},
		{`{"n":1.50}`, "1.5", ""},
		{`{"n":1e3}`, "1000", ""},
		{`{"n":1.5e-7}`, "1.5e-7", ""},
		{`{"n":1e21}`, "", "payload.n"},
		{`{"n":1e400}`, "", "payload.n"},
		{`{"n":0.10000000000000000001}`, "", "payload.n"},
		{`{"a":{"items":[1,{"price":123456789012345678}]}}`, "", "payload.a.items[1].price"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			p, err := envelope.NormalizePayload(json.RawMessage(tc.in))
			if tc.want == "" {
				var fe *envelope.FieldError
				if !errors.As(err, &fe) || fe.Field != tc.field {
					t.Fatalf("got %v, want a FieldError on %s", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
			if got := p["n"]; got != json.Number(tc.want) {
				t.Errorf("got %v, want %s", got, tc.want)
			}
		})
	}
	for _, bad := range []any{nil, []int{1}, "str", math.NaN()} {
		if _, err := envelope.NormalizePayload(bad); err == nil {
			t.Errorf("NormalizePayload(%v): got nil error, want refusal", bad)
		}
	}
}

func TestOptionalFieldsAbsentWhenUnset(t *testing.T) {
	e := sealed(t, validEnvelope(t))
	it, err := e.ToItem()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{keys.AttrActorID, keys.AttrCorrelationID, keys.AttrCausationID} {
		if _, ok := it[name]; ok {
			t.Errorf("item has %s although it is unset", name)
		}
	}
	raw, _ := json.Marshal(e)
	for _, name := range []string{"actor_id", "correlation_id", "causation_id"} {
		if strings.Contains(string(raw), name) {
			t.Errorf("JSON has %s although it is unset: %s", name, raw)
		}
	}
	// An empty optional attribute in a stored row is refused, not read as unset.
	it[keys.AttrActorID] = &types.AttributeValueMemberS{Value: ""}
	if _, err := envelope.FromItem(it); err == nil {
		t.Error("FromItem accepted an empty actor_id")
	}
}

func TestHeadRowIsNotAnEvent(t *testing.T) {
	it := envelope.Item{
		keys.AttrTenant:   &types.AttributeValueMemberS{Value: "t1"},
		keys.AttrSeq:      &types.AttributeValueMemberN{Value: "0"},
		keys.AttrKind:     &types.AttributeValueMemberS{Value: keys.KindHead},
		keys.AttrLastSeq:  &types.AttributeValueMemberN{Value: "3"},
		keys.AttrLastHash: &types.AttributeValueMemberS{Value: strings.Repeat("a", 64)},
	}
	if _, err := envelope.FromItem(it); !errors.Is(err, envelope.ErrNotEventRow) {
		t.Fatalf("got %v, want ErrNotEventRow", err)
	}
}

func sealed(t testing.TB, e envelope.Envelope) envelope.Envelope {
	t.Helper()
	if e.Seq == 0 {
		e.Seq = 1
	}
	if e.PrevHash == "" {
		e.PrevHash = chain.Genesis(e.TenantID)
	}
	if err := chain.Seal(&e); err != nil {
		t.Fatal(err)
	}
	return e
}

// randomEnvelope draws a valid envelope with a nested payload of every JSON kind.
func randomEnvelope(r *rand.Rand) envelope.Envelope {
	var value func(depth int) any
	value = func(depth int) any {
		switch k := r.IntN(8); {
		case k == 0:
			return nil
		case k == 1:
			return r.IntN(2) == 0
		case k == 2:
			runes := []rune("aé€😀\"\\\n\u2028x<>&")
			var sb strings.Builder
			for i := r.IntN(12); i > 0; i-- {
				sb.WriteRune(runes[r.IntN(len(runes))])
			}
			return sb.String()
		case k == 3:
			return json.Number(strconv.FormatInt(r.Int64N(1<<53)-(1<<52), 10))
		case k == 4:
			f := math.Float64frombits(r.Uint64())
			if math.IsNaN(f) || math.IsInf(f, 0) {
				f = r.NormFloat64()
			}
			return f
		case k == 5 && depth < 3:
			l := make([]any, r.IntN(4))
			for i := range l {
				l[i] = value(depth + 1)
			}
			return l
		case k >= 6 && depth < 3:
			m := map[string]any{}
			for i := r.IntN(4); i > 0; i-- {
				m["k"+strconv.Itoa(r.IntN(100))+string(rune('a'+r.IntN(26)))] = value(depth + 1)
			}
			return m
		default:
			return "leaf"
		}
	}
	top := map[string]any{}
	for i := r.IntN(6); i > 0; i-- {
		top["f"+strconv.Itoa(i)] = value(0)
	}
	raw, err := json.Marshal(top)
	if err != nil {
		panic(err)
	}
	p, err := envelope.NormalizePayload(json.RawMessage(raw))
	if err != nil {
		// Random floats can be integers beyond 2^53; drop the payload then.
		p = map[string]any{}
	}
	e := envelope.Envelope{
		ID:            "0190c5a8-7d4e-7c3b-9d1a-" + strconv.FormatInt(1e11+r.Int64N(8e11), 10),
		Type:          "order.placed",
		TenantID:      "tenant-" + strconv.Itoa(r.IntN(5)),
		OccurredAt:    "2026-11-29T19:45:00Z",
		SchemaVersion: 1 + r.IntN(3),
		Payload:       p,
		Seq:           1 + r.Int64N(1000),
	}
	if r.IntN(2) == 0 {
		e.ActorID = "user-7"
	}
	if r.IntN(2) == 0 {
		e.CorrelationID = "corr-" + strconv.Itoa(r.IntN(100))
	}
	if r.IntN(3) == 0 {
		e.CausationID = e.ID
	}
	return e
}

// TestHashSurvivesItemStreamEnvelope is the property: for any valid envelope,
// the hash recomputed after item → stream image (JSON, as Lambda and Pipes
// deliver it) → envelope is identical.
func TestHashSurvivesItemStreamEnvelope(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		e := sealed(t, randomEnvelope(r))
		it, err := e.ToItem()
		if err != nil {
			t.Fatalf("case %d: ToItem: %v", i, err)
		}
		img, err := envelope.ToStreamImage(it)
		if err != nil {
			t.Fatalf("case %d: ToStreamImage: %v", i, err)
		}
		raw, err := json.Marshal(img)
		if err != nil {
			t.Fatal(err)
		}
		got, err := envelope.FromStreamJSON(raw)
		if err != nil {
			t.Fatalf("case %d: FromStreamJSON(%s): %v", i, raw, err)
		}
		h, err := chain.Hash(&got)
		if err != nil {
			t.Fatal(err)
		}
		if h != e.Hash || got.Hash != e.Hash {
			t.Fatalf("case %d: hash after round trip: got %s (stored %s), want %s\n%s", i, h, got.Hash, e.Hash, raw)
		}
		a, _ := e.CanonicalBytes()
		b, _ := got.CanonicalBytes()
		if string(a) != string(b) {
			t.Fatalf("case %d: canonical bytes differ:\n%s\n%s", i, a, b)
		}
	}
}
