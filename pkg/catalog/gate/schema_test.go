package gate_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/catalog/gate"
	"github.com/fourlanes/fourlanes/pkg/catalog/gate/testdata/payloads"
	"github.com/fourlanes/fourlanes/pkg/envelope"
)

var update = flag.Bool("update", false, "rewrite the golden schemas under testdata/payloads/want")

const payloadsPkg = "./pkg/catalog/gate/testdata/payloads"

// runPayloads runs the gate on the payloads fixture with cfg's schema
// settings and returns its check-5 violations about widget.made, the type
// the gate can describe.
func runPayloads(t *testing.T, schemas string, write bool) (*gate.Report, []gate.Violation) {
	t.Helper()
	r, err := gate.Run(gate.Config{Dir: repoRoot(t), Patterns: []string{payloadsPkg}, Schemas: schemas, WriteSchemas: write})
	if err != nil {
		t.Fatal(err)
	}
	var out []gate.Violation
	for _, v := range r.Violations {
		if !strings.Contains(v.Msg, "widget.broken") {
			out = append(out, v)
		}
	}
	return r, out
}

func made(t *testing.T, r *gate.Report) *gate.PublishedSchema {
	t.Helper()
	for _, s := range r.Schemas {
		if s.Type == "widget.made" && s.Version == 1 {
			return s
		}
	}
	t.Fatal("no schema of widget.made v1")
	return nil
}

// TestSchemaGolden: the schema the gate generates for a payload of every
// kind, as checked in (go test ./pkg/catalog/gate -run TestSchemaGolden
// -update rewrites it); each kind is described as envelope's rule reads it.
func TestSchemaGolden(t *testing.T) {
	r, _ := runPayloads(t, "", false)
	got := made(t, r).JSON
	golden := filepath.Join("testdata", "payloads", "want", "widget.made", "v1.json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("schema of payloads.Rich: got\n%s\nwant\n%s", got, want)
	}
	s := made(t, r).Schema
	for _, tc := range []struct{ field, want string }{
		{"id", `{"type":"string"}`},             // embedded, required
		{"batch", `{"type":["string","null"]}`}, // embedded by pointer: optional
		{"small", `{"type":"integer","minimum":0,"maximum":255}`},
		{"count", `{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}`},
		{"pair", `{"type":"array","items":{"type":"string"},"minItems":2,"maxItems":2}`},
		{"blob", `{"type":["string","null"],"contentEncoding":"base64"}`},
		{"at", `{"type":"string","format":"date-time"}`},
		{"ref", `{"type":["string","null"]}`},
		{"code", `{"$comment":"decoded by github.com/fourlanes/fourlanes/pkg/catalog/gate/testdata/payloads.Code.UnmarshalText","type":"string"}`},
		{"Untagged", `{"type":"string"}`},
	} {
		b, _ := json.Marshal(s.Properties[tc.field])
		if string(b) != tc.want {
			t.Errorf("%s: got %s, want %s", tc.field, b, tc.want)
		}
	}
	for _, absent := range []string{"Skipped", "hidden", "-"} {
		if _, ok := s.Properties[absent]; ok {
			t.Errorf("property %s: present, want absent", absent)
		}
	}
}

// TestSchemaAgreesWithTheReader: the schema's required fields and kinds are
// what envelope.DecodePayload enforces. From a payload built from the schema
// alone (every property present), dropping a required property fails the
// decode naming that field, dropping an optional one does not, and a value
// of another kind in any property fails naming it.
func TestSchemaAgreesWithTheReader(t *testing.T) {
	r, _ := runPayloads(t, "", false)
	s := made(t, r).Schema
	decode := func(p map[string]any) error {
		norm, err := envelope.NormalizePayload(p)
		if err != nil {
			t.Fatal(err)
		}
		var v payloads.Rich
		return (&envelope.Envelope{Payload: norm}).DecodePayload(&v)
	}
	if err := decode(instance(s).(map[string]any)); err != nil {
		t.Fatalf("a payload with every property: %v", err)
	}
	for name, prop := range s.Properties {
		p := instance(s).(map[string]any)
		delete(p, name)
		err := decode(p)
		var de *envelope.DecodeError
		switch required := slices.Contains(s.Required, name); {
		case required && (!errors.As(err, &de) || de.Err.Field != "payload."+name):
			t.Errorf("without required %s: got %v, want a DecodeError naming payload.%s", name, err, name)
		case !required && err != nil:
			t.Errorf("without optional %s: got %v, want success", name, err)
		}
		if len(prop.Type) == 0 || prop.Comment != "" {
			continue // any value, or decoded by the type itself
		}
		p = instance(s).(map[string]any)
		p[name] = otherKind(prop)
		if err := decode(p); !errors.As(err, &de) || !strings.HasPrefix(de.Err.Field, "payload."+name) {
			t.Errorf("%s as %v: got %v, want a DecodeError naming payload.%s", name, p[name], err, name)
		}
	}
}

// instance builds a value that fits s, every property present.
func instance(s *gate.Schema) any {
	kind := ""
	for _, k := range s.Type {
		if k != "null" {
			kind = k
			break
		}
	}
	switch kind {
	case "string":
		if s.Format == "date-time" {
			return "2026-01-02T03:04:05Z"
		}
		if s.ContentEncoding == "base64" {
			return "AQI="
		}
		return "x"
	case "boolean":
		return true
	case "integer":
		return 1
	case "number":
		return 1.5
	case "array":
		n := 1
		if s.MinItems != nil {
			n = int(*s.MinItems)
		}
		xs := make([]any, n)
		for i := range xs {
			xs[i] = instance(s.Items)
		}
		return xs
	case "object":
		m := map[string]any{}
		for name, p := range s.Properties {
			m[name] = instance(p)
		}
		if s.AdditionalProperties != nil {
			m["k"] = instance(s.AdditionalProperties)
		}
		return m
	}
	return map[string]any{"any": "value"}
}

// otherKind is a value of a kind s does not allow.
func otherKind(s *gate.Schema) any {
	if slices.Contains(s.Type, "string") {
		return 7
	}
	return "seven"
}

// TestSchemaCompatibility: against published schemas, an unchanged shape
// passes; every incompatible change is a check-5 violation at the version's
// declaration, naming the type, the version and the field and telling the
// author to declare the next version, and writing never rewrites it; an
// added optional field is compatible: a stale file, which writing refreshes.
func TestSchemaCompatibility(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "widget.made", "v1.json")
	if _, vs := runPayloads(t, dir, false); len(vs) != 1 || !strings.Contains(vs[0].Msg, "widget.made v1: no published schema") {
		t.Fatalf("no schemas yet: got %v, want one violation saying widget.made v1 has no published schema", vs)
	}
	r, vs := runPayloads(t, dir, true)
	if len(vs) != 0 {
		t.Fatalf("after writing: %v", vs)
	}
	generated := made(t, r).JSON
	if _, vs := runPayloads(t, dir, false); len(vs) != 0 {
		t.Fatalf("unchanged: %v", vs)
	}
	declLine := fmt.Sprintf("pkg/catalog/gate/testdata/payloads/module.go:%d:", lineOf(t, "testdata/payloads/module.go", "catalog.V[Rich](1)"))
	next := "published versions never change incompatibly: declare v2 with the new shape and keep github.com/fourlanes/fourlanes/pkg/catalog/gate/testdata/payloads.Rich as"

	// Each case edits the published file, standing for a Go type that moved
	// away from it the other way.
	for _, tc := range []struct {
		name string
		edit func(s *gate.Schema)
		want string // "" = compatible
	}{
		{"removed", func(s *gate.Schema) {
			s.Properties["colour"] = &gate.Schema{Type: gate.Types{"string"}}
			s.Required = append(s.Required, "colour")
		}, "widget.made v1: field colour removed (or renamed); " + next},
		{"retyped", func(s *gate.Schema) { s.Properties["price"] = &gate.Schema{Type: gate.Types{"string"}} },
			"widget.made v1: field price retyped: was string, now number; " + next},
		{"range", func(s *gate.Schema) {
			lo, hi := int64(-1<<31), int64(1<<31-1)
			s.Properties["count"].Minimum, s.Properties["count"].Maximum = &lo, &hi
		},
			"widget.made v1: field count retyped: was integer from -2147483648 to 2147483647, now integer from -9007199254740991 to 9007199254740991; " + next},
		{"nested", func(s *gate.Schema) {
			s.Properties["parts"].Items.Properties["qty"] = &gate.Schema{Type: gate.Types{"boolean"}}
		},
			"widget.made v1: field parts[].qty retyped: was boolean, now integer from -2147483648 to 2147483647; " + next},
		{"made required", func(s *gate.Schema) {
			s.Required = slices.DeleteFunc(s.Required, func(n string) bool { return n == "done" })
			s.Properties["done"] = &gate.Schema{Type: gate.Types{"boolean", "null"}}
		}, "widget.made v1: field done made required (events already published may lack it); " + next},
		{"made optional", func(s *gate.Schema) { s.Required = append(s.Required, "note") },
			"widget.made v1: field note made optional (readers of the published shape require it); " + next},
		{"added as required", func(s *gate.Schema) {
			delete(s.Properties, "small")
			s.Required = slices.DeleteFunc(s.Required, func(n string) bool { return n == "small" })
		}, "widget.made v1: field small added as required (events already published lack it); " + next},
		{"no longer personal", func(s *gate.Schema) { s.Properties["lot"].Personal = true },
			"widget.made v1: field lot no longer personal (new events would carry it in the clear, beyond erasure); " + next},
		{"optional added", func(s *gate.Schema) { delete(s.Properties, "note") }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s gate.Schema
			if err := json.Unmarshal(generated, &s); err != nil {
				t.Fatal(err)
			}
			tc.edit(&s)
			published, err := json.MarshalIndent(&s, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, published, 0o644); err != nil {
				t.Fatal(err)
			}
			_, vs := runPayloads(t, dir, false)
			if tc.want == "" {
				if len(vs) != 1 || !strings.Contains(vs[0].Msg, "is stale (field note added (optional): compatible); regenerate it with `fourlanes gate -schemas") {
					t.Fatalf("got %v, want one violation saying the file is stale and how to regenerate it", vs)
				}
				if _, vs := runPayloads(t, dir, true); len(vs) != 0 {
					t.Fatalf("after writing: %v", vs)
				}
				if b, _ := os.ReadFile(file); !bytes.Equal(b, generated) {
					t.Errorf("writing did not refresh the compatible change")
				}
				return
			}
			if len(vs) != 1 || vs[0].Check != 5 || !strings.HasPrefix(vs[0].String(), declLine) || !strings.Contains(vs[0].Msg, tc.want) {
				t.Fatalf("got %v, want one check-5 violation at %s saying %q", vs, declLine, tc.want)
			}
			if _, vs := runPayloads(t, dir, true); len(vs) != 1 {
				t.Errorf("writing: got %v, want the violation to stay", vs)
			}
			if b, _ := os.ReadFile(file); !bytes.Equal(b, published) {
				t.Errorf("writing rewrote an incompatibly changed schema")
			}
		})
	}

	// A published version no module declares any more.
	if err := os.WriteFile(file, generated, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "widget.made", "v2.json"), generated, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, vs := runPayloads(t, dir, false); len(vs) != 1 || !strings.Contains(vs[0].Msg, "no module declares widget.made schema version 2; a published version stays declared") {
		t.Fatalf("an undeclared published version: got %v", vs)
	}
}

func lineOf(t *testing.T, file, text string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, text) {
			return i + 1
		}
	}
	t.Fatalf("%s: no line with %q", file, text)
	return 0
}

// TestPersonalMarks: marking a field personal in place is compatible (new
// events seal it); unmarking one is not (new events would be in the clear);
// the subject mark may be set when a version first gets personal fields,
// and never moves once events hold sealed values.
func TestPersonalMarks(t *testing.T) {
	str := func(personal, subject bool) *gate.Schema {
		return &gate.Schema{Type: gate.Types{"string"}, Personal: personal, Subject: subject}
	}
	obj := func(props map[string]*gate.Schema) *gate.Schema {
		return &gate.Schema{Type: gate.Types{"object"}, Properties: props, Required: []string{"email", "id", "other"}}
	}
	plain := obj(map[string]*gate.Schema{"id": str(false, false), "email": str(false, false), "other": str(false, false)})
	sealedV := obj(map[string]*gate.Schema{"id": str(false, true), "email": str(true, false), "other": str(false, false)})
	moved := obj(map[string]*gate.Schema{"id": str(false, false), "email": str(true, false), "other": str(false, true)})
	for _, tc := range []struct {
		name       string
		old, next  *gate.Schema
		want       []string
		compatible bool
	}{
		{"first sealed", plain, sealedV, []string{"email: made personal"}, true},
		{"unsealed", sealedV, plain, []string{"email: no longer personal", "id: changed its subject mark"}, false},
		{"subject moved", sealedV, moved, []string{"id: changed its subject mark", "other: changed its subject mark"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := gate.Compare(tc.old, tc.next)
			var got []string
			ok := true
			for _, c := range cs {
				got = append(got, c.Field+": "+c.What)
				ok = ok && c.Compatible
			}
			if len(got) != len(tc.want) || ok != tc.compatible {
				t.Fatalf("changes %q (compatible %v); want %q (compatible %v)", got, ok, tc.want, tc.compatible)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("change %d: %q; want %q...", i, got[i], w)
				}
			}
		})
	}
}
