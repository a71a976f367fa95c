package catalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		glob, typ string
		want      bool
	}{
		{"order.placed", "order.placed", true},
		{"order.placed", "order.paid", false},
		{"order.*", "order.placed", true},
		{"order.*", "orders.placed", false},
		{"order.p*", "order.paid", true},
		{"order.pai?", "order.paid", true},
		{"order.pai?", "order.paidx", false},
		{"record.*.ORDER", "record.written.ORDER", true},
		{"record.*.ORDER", "record.deleted.ORDER", true},
		{"record.*.ORDER", "record.written.ORDERLINE", false},
		{"record.*", "record.written.ORDER", true}, // '*' crosses dots, as fnmatch does
		{"*.placed", "order.placed", true},
	} {
		if got := catalog.Match(tc.glob, tc.typ); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.glob, tc.typ, got, tc.want)
		}
	}
}

func TestCouldMatchPrefix(t *testing.T) {
	for _, tc := range []struct {
		glob string
		want bool
	}{
		{"record.*.ORDER", true},
		{"record.written.ORDR", true}, // a typo is still a change-feed subscriber
		{"rec*", true},
		{"*.placed", true},
		{"order.*", false},
		{"r?cord.x", true},
		{"recorder.x", false},
	} {
		if got := catalog.CouldMatchPrefix(tc.glob, "record."); got != tc.want {
			t.Errorf("CouldMatchPrefix(%q, record.) = %v, want %v", tc.glob, got, tc.want)
		}
	}
}

type widgetV1 struct {
	ID    string  `json:"id"`
	Count int     `json:"count"`
	Price float64 `json:"price"`
	Note  string  `json:"note,omitempty"`
	Tags  []tag   `json:"tags,omitempty"`
	Ref   *string `json:"ref"`
}

type tag struct {
	Name string `json:"name"`
}

type widgetV2 struct {
	ID   string `json:"id"`
	Size int    `json:"size"`
}

func (w widgetV2) Validate() error {
	if w.Size > 10 {
		return &envelope.FieldError{Field: "size", Reason: "is more than 10"}
	}
	return nil
}

type h struct{}

func (h) handle(context.Context, envelope.Envelope) error { return nil }

func module() catalog.Module[h] {
	return catalog.Module[h]{
		Name: "widgets",
		Emits: []catalog.EventType{
			{Name: "widget.made", Versions: []catalog.Version{catalog.V[widgetV1](1)}},
			{Name: "widget.sized", Versions: []catalog.Version{catalog.V[widgetV1](1), catalog.V[widgetV2](2)}},
		},
		Tracks: []catalog.Entity{{Name: "WIDGET", TableEnv: "WIDGETS_TABLE", TenantAttr: "tenant_id", IDAttr: "id", VersionAttr: "version"}},
		Subscribes: []catalog.Subscription[h]{
			{Name: "widgets.react", Types: "widget.*", Lane: catalog.Durable, Reads: []int{1, 2}, Handler: h.handle},
			{Name: "widgets.inline", Types: "widget.made", Lane: catalog.Inline, Reads: []int{1}, Handler: h.handle},
			{Name: "widgets.feed", Types: "record.*.WIDGET", Lane: catalog.BestEffort, Reads: []int{1}, Handler: h.handle},
		},
	}
}

func TestPrepare(t *testing.T) {
	cat, err := catalog.New(module().Spec())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, typ string
		payload   any
		field     string // FieldError.Field wanted; "" = success
		sentinel  error
	}{
		{"typed struct", "widget.made", widgetV1{ID: "w1", Count: 2, Price: 1.5}, "", nil},
		{"map", "widget.made", map[string]any{"id": "w1", "count": 2, "price": 3, "ref": "r"}, "", nil},
		{"current version", "widget.sized", widgetV2{ID: "w1", Size: 3}, "", nil},
		{"undeclared", "widget.exploded", widgetV1{}, "", catalog.ErrUndeclared},
		{"change type", "record.written.WIDGET", map[string]any{}, "", catalog.ErrUndeclared},
		{"missing required", "widget.made", map[string]any{"id": "w1", "price": 1}, "payload.count", nil},
		{"null required", "widget.made", map[string]any{"id": "w1", "count": nil, "price": 1}, "payload.count", nil},
		{"wrong type", "widget.made", map[string]any{"id": 7, "count": 1, "price": 1}, "payload.id", nil},
		{"fraction for int", "widget.made", map[string]any{"id": "w", "count": 1.5, "price": 1}, "payload.count", nil},
		{"unknown field", "widget.made", map[string]any{"id": "w", "count": 1, "price": 1, "colour": "red"}, "payload.colour", nil},
		{"nested", "widget.made", map[string]any{"id": "w", "count": 1, "price": 1, "tags": []any{map[string]any{}}}, "payload.tags[0].name", nil},
		{"other struct", "widget.made", widgetV2{ID: "w"}, "payload", nil},
		{"old version's type", "widget.sized", widgetV1{ID: "w"}, "payload", nil},
		{"validator", "widget.sized", widgetV2{ID: "w", Size: 11}, "payload.size", nil},
		{"not an object", "widget.made", []int{1}, "payload", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, norm, err := cat.Prepare(tc.typ, tc.payload)
			switch {
			case tc.sentinel != nil:
				if !errors.Is(err, tc.sentinel) {
					t.Fatalf("got %v, want %v", err, tc.sentinel)
				}
			case tc.field != "":
				var fe *envelope.FieldError
				if !errors.As(err, &fe) || fe.Field != tc.field {
					t.Fatalf("got %v, want a FieldError on %s", err, tc.field)
				}
			case err != nil:
				t.Fatalf("got %v, want success", err)
			default:
				if t2, _, _ := cat.Type(tc.typ); v != t2.Current().Schema || norm == nil {
					t.Errorf("got version %d, payload %v; want the current version %d", v, norm, t2.Current().Schema)
				}
			}
		})
	}
}

func TestDecode(t *testing.T) {
	cat, err := catalog.New(module().Spec())
	if err != nil {
		t.Fatal(err)
	}
	_, norm, err := cat.Prepare("widget.sized", widgetV2{ID: "w", Size: 3})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cat.Decode(envelope.Envelope{Type: "widget.sized", SchemaVersion: 2, Payload: norm})
	if w, ok := got.(*widgetV2); err != nil || !ok || w.Size != 3 {
		t.Errorf("Decode: got %#v, %v; want *widgetV2 size 3", got, err)
	}
	if _, err := cat.Decode(envelope.Envelope{Type: "widget.sized", SchemaVersion: 3, Payload: norm}); !errors.Is(err, catalog.ErrUnknownVersion) {
		t.Errorf("Decode of version 3: got %v, want ErrUnknownVersion", err)
	}
	// A newer producer's optional field is ignored; a required one missing
	// is an error naming it, never a zero.
	newer := map[string]any{"id": "w", "size": json.Number("3"), "colour": "red"}
	if got, err := cat.Decode(envelope.Envelope{Type: "widget.sized", SchemaVersion: 2, Payload: newer}); err != nil || got.(*widgetV2).Size != 3 {
		t.Errorf("Decode with an unknown member: got %#v, %v; want size 3", got, err)
	}
	var de *envelope.DecodeError
	_, err = cat.Decode(envelope.Envelope{Type: "widget.sized", SchemaVersion: 2, Payload: map[string]any{"id": "w"}})
	if !errors.As(err, &de) || de.Err.Field != "payload.size" || !strings.Contains(err.Error(), "widget.sized v2") {
		t.Errorf("Decode without size: got %v, want a DecodeError on payload.size naming widget.sized v2", err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(m *catalog.Module[h])
		check int
		want  string
	}{
		{"glob typo", func(m *catalog.Module[h]) { m.Subscribes[0].Types = "widgte.*" }, 3, `matches no declared type`},
		{"entity typo", func(m *catalog.Module[h]) { m.Subscribes[2].Types = "record.*.WIDGTE" }, 3, `did you mean`},
		{"change feed on LOCAL", func(m *catalog.Module[h]) { m.Subscribes[2].Lane = catalog.Local }, 4, "only the change feed dispatches"},
		{"BEST_EFFORT on events", func(m *catalog.Module[h]) { m.Subscribes[0].Lane = catalog.BestEffort }, 4, "is on BEST_EFFORT"},
		{"wrong lane and typo", func(m *catalog.Module[h]) {
			m.Subscribes[2].Lane = catalog.Local
			m.Subscribes[2].Types = "record.written.WIDGTE"
		}, 4, "LOCAL"},
		{"unknown lane", func(m *catalog.Module[h]) { m.Subscribes[0].Lane = "FAST" }, 0, "not one of"},
		{"duplicate subscription", func(m *catalog.Module[h]) { m.Subscribes[1].Name = "widgets.react" }, 0, "declared by module widgets and again"},
		{"declared change type", func(m *catalog.Module[h]) { m.Emits[0].Name = "record.written.WIDGET" }, 0, "change-feed namespace"},
		{"unreadable", func(m *catalog.Module[h]) { m.Subscribes[1].Reads = []int{2} }, 0, "reads schema versions [2]"},
		{"versions out of order", func(m *catalog.Module[h]) { m.Emits[1].Versions[0].Schema = 3 }, 0, "ascend"},
		{"module owner", func(m *catalog.Module[h]) { m.Owner = "Team Widgets" }, 0, `owner "Team Widgets" must be lower case`},
		{"subscription owner", func(m *catalog.Module[h]) { m.Subscribes[0].Owner = "team_a" }, 0, `owner "team_a" must be lower case`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := module()
			m.Emits = append([]catalog.EventType(nil), m.Emits...)
			m.Emits[1].Versions = append([]catalog.Version(nil), m.Emits[1].Versions...)
			tc.edit(&m)
			ps := catalog.Validate([]catalog.Spec{m.Spec()})
			found := false
			for _, p := range ps {
				found = found || p.Check == tc.check && strings.Contains(p.Msg, tc.want)
			}
			if !found {
				t.Errorf("got %v, want a check-%d problem containing %q", ps, tc.check, tc.want)
			}
			if _, err := catalog.New(m.Spec()); !errors.Is(err, catalog.ErrInvalidCatalog) {
				t.Errorf("New: got %v, want ErrInvalidCatalog", err)
			}
		})
	}
	if ps := catalog.Validate([]catalog.Spec{module().Spec()}); len(ps) != 0 {
		t.Errorf("valid module: got %v", ps)
	}
}

// TestSpecOwner: a subscription is owned by its own Owner, or else by its
// module's.
func TestSpecOwner(t *testing.T) {
	m := module()
	m.Owner = "team-widgets"
	m.Subscribes = append([]catalog.Subscription[h](nil), m.Subscribes...)
	m.Subscribes[1].Owner = "team-audit"
	spec := m.Spec()
	if spec.Owner != "team-widgets" {
		t.Errorf("module owner %q", spec.Owner)
	}
	for i, s := range spec.Subscribes {
		want := "team-widgets"
		if i == 1 {
			want = "team-audit"
		}
		if s.Owner != want {
			t.Errorf("subscription %s: owner %q, want %q", s.Name, s.Owner, want)
		}
	}
	if ps := catalog.Validate([]catalog.Spec{spec}); len(ps) != 0 {
		t.Errorf("owned module: %v", ps)
	}
	if got := module().Spec().Subscribes[0].Owner; got != "" {
		t.Errorf("no owner declared: %q", got)
	}
}

func TestRegistry(t *testing.T) {
	m := module()
	cat, err := catalog.New(m.Spec())
	if err != nil {
		t.Fatal(err)
	}
	// Nothing bound: every DURABLE subscription is reported unbound, loudly.
	reg, err := catalog.NewRegistry(cat)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	err = reg.LogServed(context.Background(), obs.NewLogger(&logs, "info"), catalog.Durable)
	if !errors.Is(err, catalog.ErrUnbound) || !strings.Contains(err.Error(), "widgets.react") {
		t.Errorf("LogServed with nothing bound: got %v, want ErrUnbound naming widgets.react", err)
	}
	if !strings.Contains(logs.String(), "declared but not registered") {
		t.Errorf("no error log for the unbound subscription:\n%s", logs.String())
	}
	rt := reg.Route("widget.made", catalog.Durable)
	if len(rt.Unbound) != 1 || !rt.Unmatched() {
		t.Errorf("Route with nothing bound: got %+v, want one unbound", rt)
	}

	reg, err = catalog.NewRegistry(cat, m.Bind(h{}))
	if err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	if err := reg.LogServed(context.Background(), obs.NewLogger(&logs, "info"), catalog.Durable, catalog.Inline); err != nil {
		t.Errorf("LogServed: %v", err)
	}
	for _, want := range []string{`"subscription":"widgets.react"`, `"lane":"DURABLE"`, `"subscription":"widgets.inline"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("start-up log lacks %s:\n%s", want, logs.String())
		}
	}
	rt = reg.Route("widget.made", catalog.Inline, catalog.Local)
	if len(rt.Bound) != 1 || rt.Bound[0].Name != "widgets.inline" || len(rt.Elsewhere) != 1 || rt.Unmatched() {
		t.Errorf("Route(widget.made, in-process): got %+v", rt)
	}
	if rt := reg.Route("widget.sized", catalog.Inline, catalog.Local); rt.Unmatched() {
		t.Errorf("an event served on another lane is not unmatched: %+v", rt)
	}

	// A binding whose declaration differs from the catalog's is refused.
	other := module()
	other.Subscribes = other.Subscribes[:1]
	if _, err := catalog.NewRegistry(cat, other.Bind(h{})); err == nil {
		t.Error("NewRegistry accepted a declaration that differs from the catalog's")
	}
	missing := module()
	missing.Subscribes[0].Handler = nil
	cat2, _ := catalog.New(missing.Spec())
	if _, err := catalog.NewRegistry(cat2, missing.Bind(h{})); err == nil || !strings.Contains(err.Error(), "declare no Handler") {
		t.Errorf("NewRegistry with a nil handler: got %v", err)
	}
	if got := cat.ChangeTypes(); strings.Join(got, " ") != "record.deleted.WIDGET record.written.WIDGET" {
		t.Errorf("ChangeTypes: got %v", got)
	}
}

// TestEventIsVersionOne: catalog.Event[T](name, doc) declares exactly what
// the long form with catalog.V[T](1) does, and Emit's Prepare writes it at
// schema version 1 with T's fields.
func TestEventIsVersionOne(t *testing.T) {
	short := catalog.Event[widgetV1]("widget.made", "A widget was made.")
	long := catalog.EventType{Name: "widget.made", Doc: "A widget was made.", Versions: []catalog.Version{catalog.V[widgetV1](1)}}
	if short.Name != long.Name || short.Doc != long.Doc || len(short.Versions) != 1 ||
		short.Versions[0].Schema != 1 || short.Versions[0].Payload != long.Versions[0].Payload {
		t.Fatalf("Event = %+v, want %+v", short, long)
	}
	cat, err := catalog.New(catalog.Module[catalog.NoHandlers]{Name: "widgets", Emits: []catalog.EventType{short}}.Spec())
	if err != nil {
		t.Fatal(err)
	}
	v, p, err := cat.Prepare("widget.made", widgetV1{ID: "w-1"})
	if err != nil || v != 1 || p["id"] != "w-1" {
		t.Fatalf("Prepare = v%d %v, %v; want v1 with id w-1", v, p, err)
	}
	if _, _, err := cat.Prepare("widget.made", struct{ ID string }{"w-1"}); err == nil {
		t.Fatal("Prepare took a payload of another Go type than Event's T")
	}
}

// TestLaneFor: a subscription that leaves Lane out runs on BEST_EFFORT when
// its glob can match change events (no other lane dispatches them), and is
// refused, naming the lanes to choose from, when it cannot.
func TestLaneFor(t *testing.T) {
	for _, tc := range []struct {
		types string
		lane  catalog.Lane
		want  catalog.Lane
	}{
		{"record.*.WIDGET", "", catalog.BestEffort},
		{"record.written.WIDGET", "", catalog.BestEffort},
		{"rec*", "", catalog.BestEffort},
		{"widget.*", "", ""},
		{"widget.made", catalog.Local, catalog.Local},
		{"record.*.WIDGET", catalog.Durable, catalog.Durable}, // said: kept, and Validate refuses it (check 4)
	} {
		if got := catalog.LaneFor(tc.types, tc.lane); got != tc.want {
			t.Errorf("LaneFor(%q, %q) = %q, want %q", tc.types, tc.lane, got, tc.want)
		}
	}
	type h struct{}
	on := func(h, context.Context, envelope.Envelope) error { return nil }
	m := catalog.Module[h]{Name: "widgets", Emits: []catalog.EventType{catalog.Event[widgetV1]("widget.made", "")},
		Tracks:     []catalog.Entity{{Name: "WIDGET", TableEnv: "WIDGETS_TABLE", TenantAttr: "tenant", IDAttr: "id", VersionAttr: "version"}},
		Subscribes: []catalog.Subscription[h]{{Name: "widgets.feed", Types: "record.*.WIDGET", Reads: []int{1}, Handler: on}}}
	cat, err := catalog.New(m.Spec())
	if err != nil {
		t.Fatal(err)
	}
	if s := cat.Subscriptions()[0]; s.Lane != catalog.BestEffort {
		t.Fatalf("a change-feed subscription without a Lane is on %q, want BEST_EFFORT", s.Lane)
	}
	m.Subscribes = append(m.Subscribes, catalog.Subscription[h]{Name: "widgets.react", Types: "widget.made", Reads: []int{1}, Handler: on})
	_, err = catalog.New(m.Spec())
	if err == nil || !strings.Contains(err.Error(), "widgets.react") || !strings.Contains(err.Error(), "has no lane; set Lane: catalog.Durable") {
		t.Fatalf("New with an event-type subscription without a Lane: %v; want it refused, naming the subscription and the lanes", err)
	}
}
