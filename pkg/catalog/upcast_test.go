package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/lanes"
)

type sizedV1 struct {
	ID    string `json:"id"`
	Count int    `json:"count"`
}

type sizedV2 struct {
	ID   string `json:"id"`
	Size int    `json:"size"`
	Unit string `json:"unit"`
}

type sizedV3 struct {
	ID   string `json:"id"`
	Size int    `json:"size"`
	Unit string `json:"unit"`
	Note string `json:"note,omitempty"`
}

func sizedV2FromV1(p sizedV1) (sizedV2, error) {
	if p.Count < 0 {
		return sizedV2{}, errors.New("a negative count has no size")
	}
	return sizedV2{ID: p.ID, Size: p.Count, Unit: "piece"}, nil
}

func sizedV3FromV2(p sizedV2) (sizedV3, error) {
	return sizedV3{ID: p.ID, Size: p.Size, Unit: p.Unit}, nil
}

// recorder is a receiver whose typed handler records what it was given.
type recorder struct{ got []sizedV3 }

func (r *recorder) onSized(_ context.Context, _ envelope.Envelope, p sizedV3) error {
	r.got = append(r.got, p)
	return nil
}

func (r *recorder) untyped(context.Context, envelope.Envelope) error { return nil }

func sizedModule(versions []catalog.Version, sub catalog.Subscription[*recorder]) catalog.Module[*recorder] {
	return catalog.Module[*recorder]{
		Name:       "widgets",
		Emits:      []catalog.EventType{{Name: "widget.sized", Versions: versions}},
		Subscribes: []catalog.Subscription[*recorder]{sub},
	}
}

var threeVersions = []catalog.Version{
	catalog.V[sizedV1](1),
	catalog.V[sizedV2](2, catalog.Upcast(sizedV2FromV1)),
	catalog.V[sizedV3](3, catalog.Upcast(sizedV3FromV2)),
}

func sized(t *testing.T, version int, p map[string]any) envelope.Envelope {
	t.Helper()
	norm, err := envelope.NormalizePayload(p)
	if err != nil {
		t.Fatal(err)
	}
	return envelope.Envelope{ID: "0190c5a8-7d4e-7c3b-9d1a-2b3c4d5e6f70", Type: "widget.sized", TenantID: "t1", SchemaVersion: version, Payload: norm}
}

// TestTypedHandlerGetsOlderVersionsUpcast: a typed handler that takes v3
// and reads 1, 2 and 3 receives each event as a sizedV3, decoded once by the
// framework and upcast in order (v1 → v2 → v3); a member its type lacks is
// ignored; a missing required field, or an upcaster's refusal, is a
// permanent error and the handler never runs.
func TestTypedHandlerGetsOlderVersionsUpcast(t *testing.T) {
	m := sizedModule(threeVersions, catalog.Subscription[*recorder]{Name: "widgets.size", Types: "widget.sized", Lane: catalog.Durable,
		Reads: []int{1, 2, 3}, Typed: catalog.Typed((*recorder).onSized)})
	cat, err := catalog.New(m.Spec())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	reg, err := catalog.NewRegistry(cat, m.Bind(rec))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := reg.Subscription("widgets.size")
	if b.Takes == nil || b.Takes.Name() != "sizedV3" {
		t.Fatalf("Takes: got %v, want sizedV3", b.Takes)
	}
	h := lanes.Guard(b)
	for _, e := range []envelope.Envelope{
		sized(t, 1, map[string]any{"id": "a", "count": 4}),
		sized(t, 2, map[string]any{"id": "b", "size": 5, "unit": "kg", "colour": "red"}),
		sized(t, 3, map[string]any{"id": "c", "size": 6, "unit": "m", "note": "n"}),
	} {
		if err := h(context.Background(), e); err != nil {
			t.Fatalf("v%d: %v", e.SchemaVersion, err)
		}
	}
	want := []sizedV3{{ID: "a", Size: 4, Unit: "piece"}, {ID: "b", Size: 5, Unit: "kg"}, {ID: "c", Size: 6, Unit: "m", Note: "n"}}
	if len(rec.got) != 3 || rec.got[0] != want[0] || rec.got[1] != want[1] || rec.got[2] != want[2] {
		t.Fatalf("handler got %+v, want %+v", rec.got, want)
	}

	for _, tc := range []struct {
		name string
		e    envelope.Envelope
		want string
	}{
		{"missing field", sized(t, 2, map[string]any{"id": "d", "unit": "kg"}), "decode widget.sized v2: decode payload into catalog_test.sizedV2: payload.size: is missing"},
		{"wrong kind", sized(t, 1, map[string]any{"id": "d", "count": "four"}), "payload.count: is a string, want an integer"},
		{"upcaster refuses", sized(t, 1, map[string]any{"id": "d", "count": -1}), "upcast widget.sized v1 to v2: a negative count has no size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := h(context.Background(), tc.e)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !lanes.IsPermanent(err) {
				t.Fatalf("got %v, want a permanent error saying %q", err, tc.want)
			}
			if len(rec.got) != 3 {
				t.Errorf("the handler ran: %+v", rec.got[3:])
			}
		})
	}

	// DecodeAs, for a handler that decodes by hand.
	got, err := cat.DecodeAs(sized(t, 1, map[string]any{"id": "e", "count": json.Number("2")}), b.Takes)
	if err != nil || got.(sizedV3) != (sizedV3{ID: "e", Size: 2, Unit: "piece"}) {
		t.Errorf("DecodeAs v1 as v3: got %#v, %v", got, err)
	}
}

// TestTypedDeclarationsRefused: catalog.New refuses, naming the
// subscription or type and the fix, a typed handler that could not receive
// what it reads, and an upcaster that does not build from the version
// before it; NewRegistry refuses a subscription with both handlers.
func TestTypedDeclarationsRefused(t *testing.T) {
	typed := catalog.Typed((*recorder).onSized)
	sub := func(reads ...int) catalog.Subscription[*recorder] {
		return catalog.Subscription[*recorder]{Name: "widgets.size", Types: "widget.*", Lane: catalog.Durable, Reads: reads, Typed: typed}
	}
	for _, tc := range []struct {
		name string
		m    catalog.Module[*recorder]
		want string
	}{
		{"no upcaster", sizedModule([]catalog.Version{catalog.V[sizedV1](1), catalog.V[sizedV2](2), catalog.V[sizedV3](3, catalog.Upcast(sizedV3FromV2))}, sub(1, 3)),
			"subscription widgets.size: reads widget.sized v1, but v2 declares no upcaster from v1"},
		{"newer than it takes", sizedModule(append(threeVersions, catalog.V[sizedV1](4)), sub(3, 4)),
			"reads widget.sized v4, newer than v3"},
		{"type not declared", sizedModule(threeVersions[:2], sub(1, 2)),
			"its Typed handler takes catalog_test.sizedV3, but widget.sized declares it in no version"},
		{"upcaster from the wrong version", sizedModule([]catalog.Version{catalog.V[sizedV1](1), catalog.V[sizedV2](2), catalog.V[sizedV3](3, catalog.Upcast(func(sizedV1) (sizedV3, error) { return sizedV3{}, nil }))}, sub(3)),
			"type widget.sized: schema version 3's upcaster takes catalog_test.sizedV1, but the version before it (v2) has payload catalog_test.sizedV2"},
		{"upcaster on the first version", sizedModule([]catalog.Version{catalog.V[sizedV3](1, catalog.Upcast(sizedV3FromV2))}, sub(1)),
			"schema version 1 declares an upcaster, but no version comes before it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := catalog.New(tc.m.Spec())
			if !errors.Is(err, catalog.ErrInvalidCatalog) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidCatalog saying %q", err, tc.want)
			}
		})
	}

	both := sub(3)
	both.Handler = (*recorder).untyped
	m := sizedModule(threeVersions, both)
	cat, err := catalog.New(m.Spec())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := catalog.NewRegistry(cat, m.Bind(&recorder{})); err == nil || !strings.Contains(err.Error(), "declare both Handler and Typed") {
		t.Errorf("both handlers: got %v", err)
	}
}

type feed struct{ got []catalog.ChangeV1 }

func (f *feed) onChange(_ context.Context, _ envelope.Envelope, c catalog.ChangeV1) error {
	f.got = append(f.got, c)
	return nil
}

func (f *feed) onWrong(context.Context, envelope.Envelope, sizedV1) error { return nil }

// TestTypedChangeFeedHandler: a BEST_EFFORT subscription's typed handler
// takes catalog.ChangeV1; one taking anything else is refused.
func TestTypedChangeFeedHandler(t *testing.T) {
	m := catalog.Module[*feed]{
		Name:   "widgets",
		Tracks: []catalog.Entity{{Name: "WIDGET", TableEnv: "WIDGETS_TABLE", TenantAttr: "tenant_id", IDAttr: "id", VersionAttr: "version"}},
		Subscribes: []catalog.Subscription[*feed]{{Name: "widgets.feed", Types: "record.*.WIDGET", Lane: catalog.BestEffort, Reads: []int{1},
			Typed: catalog.Typed((*feed).onChange)}},
	}
	cat, err := catalog.New(m.Spec())
	if err != nil {
		t.Fatal(err)
	}
	f := &feed{}
	reg, err := catalog.NewRegistry(cat, m.Bind(f))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := reg.Subscription("widgets.feed")
	e := envelope.Envelope{Type: "record.written.WIDGET", SchemaVersion: 1, TenantID: "t1",
		Payload: map[string]any{"entity": "WIDGET", "id": "w-1", "version": json.Number("3")}}
	if err := b.Handler(context.Background(), e); err != nil || len(f.got) != 1 || f.got[0].ID != "w-1" || f.got[0].Version != 3 {
		t.Fatalf("got %+v, %v; want the change of w-1 at version 3", f.got, err)
	}
	delete(e.Payload, "version")
	if err := b.Handler(context.Background(), e); !lanes.IsPermanent(err) || !strings.Contains(err.Error(), "payload.version: is missing") {
		t.Errorf("a change without its version: got %v, want a permanent error naming payload.version", err)
	}

	m.Subscribes[0].Typed = catalog.Typed((*feed).onWrong)
	if _, err := catalog.New(m.Spec()); err == nil || !strings.Contains(err.Error(), "but change events (record.deleted.WIDGET) carry catalog.ChangeV1") {
		t.Errorf("a change-feed handler taking sizedV1: got %v", err)
	}
}
