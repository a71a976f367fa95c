package eventpattern

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestResolve(t *testing.T) {
	var doc any
	if err := json.Unmarshal([]byte(`{
		"eventID": "e1",
		"dynamodb": {"NewImage": {"tenant_id": {"S": "t1"}, "seq": {"N": "4"}}},
		"items": [{"id": "a"}, {"id": "b"}],
		"matrix": [[1, 2], [3]],
		"dash-name": {"under_score": true},
		"nothing": null
	}`), &doc); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want any
		ok   bool
	}{
		{"$.eventID", "e1", true},
		{"$.dynamodb.NewImage.tenant_id.S", "t1", true},
		{"$.dynamodb.NewImage.seq.N", "4", true},
		{"$.items[1].id", "b", true},
		{"$.matrix[0][1]", 2.0, true},
		{"$.dash-name.under_score", true, true},
		{"$.nothing", nil, true},
		{"$.items[*].id", nil, false}, // two values: not one
		{"$.matrix[1][*]", 3.0, true},
		{"$.dynamodb.NewImage.*.S", "t1", true}, // only tenant_id has S
		{"$.items[2].id", nil, false},
		{"$.missing", nil, false},
		{"$.eventID.S", nil, false},
		{"$.items.id", nil, false}, // no implicit array flattening
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, ok := Resolve(doc, tt.path)
			if ok != tt.ok || got != tt.want {
				t.Errorf("Resolve(%s) = (%v, %v), want (%v, %v)", tt.path, got, ok, tt.want, tt.ok)
			}
		})
	}
	if all := MustParsePath("$.items[*].id").ResolveAll(doc); len(all) != 2 || all[0] != "a" || all[1] != "b" {
		t.Errorf("ResolveAll = %v, want [a b]", all)
	}
	if v, ok := MustParsePath("$").Resolve(doc); !ok || v == nil {
		t.Error("$ did not resolve to the document")
	}
}

func TestParsePathErrors(t *testing.T) {
	for _, p := range []string{"", "tenant_id", "$.", "$..a", "$.a[", "$.a[-1]", "$.a[x]", "$.a b", "$.a*b", "$a"} {
		if _, err := ParsePath(p); err == nil {
			t.Errorf("ParsePath(%q) = nil error", p)
		} else if !errors.Is(err, ErrInvalidPath) {
			t.Errorf("ParsePath(%q) error %v does not wrap ErrInvalidPath", p, err)
		}
	}
	if _, ok := Resolve(map[string]any{}, "not a path"); ok {
		t.Error("Resolve of a malformed path reported ok")
	}
}

func TestIsDynamic(t *testing.T) {
	for v, want := range map[string]bool{"$.tenant_id": true, "$": true, "static-group": false, "": false, "$tenant": false} {
		if got := IsDynamic(v); got != want {
			t.Errorf("IsDynamic(%q) = %v, want %v", v, got, want)
		}
	}
}
