package expr

import (
	"strings"
	"testing"
)

func TestConditionTopLevel(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"sk = :v", "sk"},
		{"m.sk = :v", "m"},
		{"#m.#k = :v", "m"},
		{"attribute_exists(#k)", "sk"},
		{"size(a) > :v AND b[0].sk = :w", "a b"},
		{"NOT contains(tags, :t) OR x BETWEEN :v AND :w", "tags x"},
		{"a IN (:v, b, :w) AND (a = :v OR #k <> c.d)", "a b sk c"},
		{"begins_with(#k, :t) AND attribute_type(x, :t)", "sk x"},
	} {
		p := params(t, `{"#k":"sk","#m":"m"}`, `{":v":{"N":"1"},":w":{"N":"2"},":t":{"S":"S"}}`)
		cn, err := ParseCondition(c.in, "FilterExpression", p)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if got := strings.Join(cn.TopLevel(), " "); got != c.want {
			t.Errorf("TopLevel(%q): got %q, want %q", c.in, got, c.want)
		}
	}
}

func TestUpdatedPaths(t *testing.T) {
	full := item(t, `{"a":{"L":[{"S":"0"}]},"b":{"M":{"c":{"S":"1"},"keep":{"S":"2"}}},"d":{"L":[{"S":"0"},{"S":"1"},{"S":"2"}]},
		"e":{"S":"v"},"f":{"N":"1"},"g":{"SS":["x","y"]},"settings":{"N":"3"},"other":{"S":"v"},
		"m":{"M":{"a":{"M":{"b":{"S":"x"},"keep":{"S":"k"}}}}}}`)
	for _, c := range []struct{ in, want string }{
		{"SET a = list_append(a, :l), b.c = :v REMOVE d[1], #e ADD f :v DELETE g :s",
			`{"a":{"L":[{"S":"0"}]},"b":{"M":{"c":{"S":"1"}}},"d":{"L":[{"S":"1"}]},"e":{"S":"v"},"f":{"N":"1"},"g":{"SS":["x","y"]}}`},
		{"set settings = if_not_exists(settings, :v) + :v", `{"settings":{"N":"3"}}`},
		{"REMOVE m.a.b", `{"m":{"M":{"a":{"M":{"b":{"S":"x"}}}}}}`},
		{"SET e = a", `{"e":{"S":"v"}}`},
		{"REMOVE nothere", ``},
	} {
		p := params(t, `{"#e":"e"}`, `{":v":{"N":"1"},":l":{"L":[]},":s":{"SS":["x"]}}`)
		u, err := ParseUpdate(c.in, p)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		got := u.UpdatedPaths().Apply(full)
		if len(got) == 0 {
			got = nil
		}
		want := ""
		if c.want != "" {
			want = canon(t, c.want)
		}
		if g := itemJSON(t, got); g != want {
			t.Errorf("UpdatedPaths(%q) applied: got %s, want %s", c.in, g, want)
		}
	}
}
