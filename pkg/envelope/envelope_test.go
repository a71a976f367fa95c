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
	"github.com/fourlanes/fourlanes/pkg/tenancy"
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
		{"tenant with a space", func(e *envelope.Envelope) { e.TenantID = "acme corp" }, "tenant_id"},
		{"tenant not ASCII", func(e *envelope.Envelope) { e.TenantID = "té" }, "tenant_id"},
		{"tenant with an emoji", func(e *envelope.Envelope) { e.TenantID = "shop😀" }, "tenant_id"},
		{"tenant with a control character", func(e *envelope.Envelope) { e.TenantID = "ac\tme" }, "tenant_id"},
		{"id not a UUID", func(e *envelope.Envelope) { e.ID = "e1" }, "id"},
		{"id in upper case", func(e *envelope.Envelope) { e.ID = strings.ToUpper(e.ID) }, "id"},
		{"occurred_at with a trailing zero", func(e *envelope.Envelope) { e.OccurredAt = "2026-11-29T19:45:00.10Z" }, "occurred_at"},
		{"schema version beyond 2^31-1", func(e *envelope.Envelope) { e.SchemaVersion = 1 << 31 }, "schema_version"},
		{"payload empty key", func(e *envelope.Envelope) { e.Payload = map[string]any{"a": map[string]any{"": true}} }, "payload.a"},
		{"payload 33 levels deep", func(e *envelope.Envelope) { e.Payload = nest(32) }, "payload" + strings.Repeat(".a", 32)},
		{"payload number below DynamoDB's range", func(e *envelope.Envelope) { e.Payload = map[string]any{"x": json.Number("1e-131")} }, "payload.x"},
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
	e.Payload = nest(31) // 32 levels with the payload: DynamoDB's limit
	if err := e.Validate(); err != nil {
		t.Fatalf("payload at 32 levels: %v", err)
	}
	// The tenant error names the tenant and the rule.
	e = validEnvelope(t)
	e.TenantID = "acme corp"
	if err := e.Validate(); err == nil || !strings.Contains(err.Error(), `"acme corp"`) || !strings.Contains(err.Error(), tenancy.TenantRule) {
		t.Errorf("got %v, want the tenant quoted and the rule", err)
	}
}

// nest is a payload whose key "a" nests n objects: n+1 levels with the payload.
func nest(n int) map[string]any {
	v := any(true)
	for range n {
		v = map[string]any{"a": v}
	}
	return map[string]any{"a": v}
}

// TestNormalizePayloadRefusesWhatDynamoDBRefuses: a payload DynamoDB would
// refuse is refused before anything is sent, naming the field.
func TestNormalizePayloadRefusesWhatDynamoDBRefuses(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 32) + "1" + strings.Repeat("}", 32)
	for _, tc := range []struct{ in, field, reason string }{
		{`{"n":1e-131}`, "payload.n", "DynamoDB's range"},
		{`{"n":-9.9e-131}`, "payload.n", "DynamoDB's range"},
		{`{"n":1e-400}`, "payload.n", "DynamoDB's range"},
		{`{"n":1e126}`, "payload.n", "DynamoDB's range"},
		{`{"n":1.000000000000000000000000000000000000001}`, "payload.n", "40 significant digits; DynamoDB keeps at most 38"},
		{`{"a":{"b":[{"":1}]}}`, "payload.a.b[0]", "empty key"},
		{`{"":1}`, "payload", "empty key"},
		{`{"x":` + deep + `}`, "payload.x" + strings.Repeat(".a", 31), "32 levels"},
		{`{"x":` + strings.Repeat("[", 32) + strings.Repeat("]", 32) + `}`, "payload.x" + strings.Repeat("[0]", 31), "32 levels"},
	} {
		_, err := envelope.NormalizePayload(json.RawMessage(tc.in))
		var fe *envelope.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Reason, tc.reason) {
			t.Errorf("NormalizePayload(%.40s): got %v, want a FieldError on %s saying %q", tc.in, err, tc.field, tc.reason)
		}
	}
	for _, ok := range []string{`{"n":1e-130}`, `{"n":0}`, `{"n":-0.0}`, `{"n":1.0000000000000000000000000000000000000}`,
		`{"x":` + strings.Repeat(`{"a":`, 31) + "1" + strings.Repeat("}", 31) + `}`} {
		if _, err := envelope.NormalizePayload(json.RawMessage(ok)); err != nil {
			t.Errorf("NormalizePayload(%.40s): %v", ok, err)
		}
	}
}

// TestFromJSONIsStrict: what encoding/json would repair or accept and the
// spec forbids is an error, never a silently different envelope.
func TestFromJSONIsStrict(t *testing.T) {
	e := sealed(t, validEnvelope(t))
	line, err := e.CanonicalJSON()
	if err != nil {
		t.Fatal(err)
	}
	s := string(line)
	got, err := envelope.FromJSON(line)
	if err != nil || got.Hash != e.Hash {
		t.Fatalf("valid line: %v", err)
	}
	// Whitespace and another member order are fine.
	if _, err := envelope.FromJSON([]byte(" \t{ \"seq\" : 1 ," + strings.TrimPrefix(strings.Replace(s, `"seq":1,`, "", 1), "{") + " ")); err != nil {
		t.Errorf("reordered line with whitespace: %v", err)
	}
	payload := `"payload":{"items":["a",2],"order_id":"o-1","total":12.5}`
	if !strings.Contains(s, payload) {
		t.Fatalf("line %s has no %s", s, payload)
	}
	for name, bad := range map[string]string{
		"repeated payload":         strings.Replace(s, payload, payload+`,"payload":{}`, 1),
		"repeated payload key":     strings.Replace(s, `"order_id":"o-1"`, `"order_id":"o-1","order_id":"o-2"`, 1),
		"invalid UTF-8":            strings.Replace(s, `"o-1"`, "\"o-\xff\"", 1),
		"lone surrogate":           strings.Replace(s, `"o-1"`, `"o-\udfff"`, 1),
		"empty optional":           strings.Replace(s, `"hash"`, `"actor_id":"","hash"`, 1),
		"null optional":            strings.Replace(s, `"hash"`, `"actor_id":null,"hash"`, 1),
		"seq beyond 2^53":          strings.Replace(s, `"seq":1`, `"seq":9007199254740993`, 1),
		"schema_version 1.0":       strings.Replace(s, `"schema_version":1`, `"schema_version":1.0`, 1),
		"unknown member":           strings.Replace(s, `"hash"`, `"zzz":1,"hash"`, 1),
		"missing member":           strings.Replace(s, `"schema_version":1,`, ``, 1),
		"byte order mark":          "\ufeff" + s,
		"trailing data":            s + "{}",
		"payload too deep":         strings.Replace(s, `"total":12.5`, `"total":`+strings.Repeat("[", 32)+strings.Repeat("]", 32), 1),
		"payload number too small": strings.Replace(s, `12.5`, `1e-200`, 1),
	} {
		if bad == s {
			t.Fatalf("%s: the edit did not apply", name)
		}
		if got, err := envelope.FromJSON([]byte(bad)); err == nil {
			t.Errorf("%s: FromJSON accepted %q as %+v", name, bad, got)
		}
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

// TestItemTemplateSealsLikeToItem: a row made from a template is the row
// ToItem makes, at every seal of one template (the event store re-seals an
// Emit at a new seq after a lost race), and each seal's fields are checked
// as ValidateStored checks them.
func TestItemTemplateSealsLikeToItem(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 500; i++ {
		e := randomEnvelope(r)
		tmpl, err := e.ItemTemplate()
		if err != nil {
			t.Fatalf("case %d: ItemTemplate: %v", i, err)
		}
		for _, seq := range []int64{1, 2, 1 << 40} {
			e.Seq, e.PrevHash = seq, chain.Genesis(e.TenantID)
			e = sealed(t, e)
			want, err := e.ToItem()
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Item(e.Seq, e.PrevHash, e.Hash)
			if err != nil {
				t.Fatalf("case %d seq %d: Item: %v", i, seq, err)
			}
			back, err := envelope.FromItem(got)
			if err != nil || len(got) != len(want) || back.Hash != e.Hash || back.Seq != seq {
				t.Fatalf("case %d seq %d: template row %v (read back %+v, %v), want %v", i, seq, got, back, err, want)
			}
			if h, err := chain.Hash(&back); err != nil || h != e.Hash {
				t.Fatalf("case %d seq %d: the template row's event hashes to %s (%v), want %s", i, seq, h, err, e.Hash)
			}
		}
	}

	e := validEnvelope(t)
	tmpl, err := e.ItemTemplate()
	if err != nil {
		t.Fatal(err)
	}
	hash := strings.Repeat("a", 64)
	for _, tc := range []struct {
		seq        int64
		prev, hash string
		field      string
	}{
		{0, hash, hash, "seq"},
		{envelope.MaxSeq + 1, hash, hash, "seq"},
		{1, "ABC", hash, "prev_hash"},
		{1, hash, strings.Repeat("A", 64), "hash"},
	} {
		_, err := tmpl.Item(tc.seq, tc.prev, tc.hash)
		var fe *envelope.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("Item(%d, %q, %q) = %v, want a FieldError on %s", tc.seq, tc.prev, tc.hash, err, tc.field)
		}
	}
	if _, err := (envelope.ItemTemplate{}).Item(1, hash, hash); err == nil {
		t.Error("the zero template made a row")
	}
	e.TenantID = ""
	if _, err := e.ItemTemplate(); err == nil {
		t.Error("ItemTemplate took an envelope without a tenant")
	}
}
