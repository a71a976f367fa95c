package envelope

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestTraceParentIsNotHashed: the trace context rides with the envelope
// (JSON, item, stream image) but is not part of the event: the canonical
// bytes and so the hash are the same with it, without it, or with another.
func TestTraceParentIsNotHashed(t *testing.T) {
	e := Envelope{
		ID: "0190a5f1-6e3c-7a2b-8c4d-5e6f7a8b9c0d", Type: "order.placed", TenantID: "acme",
		OccurredAt: "2026-01-02T03:04:05Z", SchemaVersion: 1, Payload: map[string]any{"n": json.Number("1")},
		Seq: 1, PrevHash: strings.Repeat("a", 64), Hash: strings.Repeat("b", 64),
	}
	plain, err := e.CanonicalBytes()
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", "garbage"} {
		traced := e
		traced.TraceParent = tp
		got, err := traced.CanonicalBytes()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(plain) {
			t.Errorf("traceparent %q changes the canonical bytes:\n got %s\nwant %s", tp, got, plain)
		}
		ref, err := referenceCanonical(&traced, false)
		if err != nil || string(ref) != string(plain) {
			t.Errorf("reference canonical with traceparent %q: got %s, %v; want %s", tp, ref, err, plain)
		}
		// It travels: item round trip, and JSON as the Pipe and SQS carry it.
		it, err := traced.ToItem()
		if err != nil {
			t.Fatal(err)
		}
		back, err := FromItem(it)
		if err != nil || back.TraceParent != tp {
			t.Errorf("item round trip: traceparent %q, %v; want %q", back.TraceParent, err, tp)
		}
		raw, _ := json.Marshal(traced)
		fromJSON, err := FromJSON(raw)
		if err != nil || fromJSON.TraceParent != tp {
			t.Errorf("JSON round trip: traceparent %q, %v; want %q", fromJSON.TraceParent, err, tp)
		}
	}
	it, err := e.ToItem()
	if err != nil {
		t.Fatal(err)
	}
	if _, present := it[keys.AttrTraceParent]; present {
		t.Error("an envelope without trace context has a traceparent attribute; optional members are absent when unset")
	}
	raw, _ := json.Marshal(e)
	if strings.Contains(string(raw), "traceparent") {
		t.Errorf("JSON of an envelope without trace context names traceparent: %s", raw)
	}
}

func TestValidTraceParent(t *testing.T) {
	for tp, want := range map[string]bool{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": true,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00": true,
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01": false, // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01": false, // zero span id
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": false, // unknown version
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01": false, // upper case
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7":    false,
		"": false,
	} {
		if got := ValidTraceParent(tp); got != want {
			t.Errorf("ValidTraceParent(%q) = %v, want %v", tp, got, want)
		}
	}
}
