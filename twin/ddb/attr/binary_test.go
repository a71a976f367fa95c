package attr

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestBinaryRoundTrip(t *testing.T) {
	const src = `{"s":{"S":"héllo"},"n":{"N":"-12.5"},"b":{"B":"AAEC"},"t":{"BOOL":true},"f":{"BOOL":false},"z":{"NULL":true},
		"m":{"M":{"a":{"L":[{"N":"1"},{"SS":["x","y"]},{"M":{}}]},"e":{"S":""}}},"ns":{"NS":["1","2"]},"bs":{"BS":["AQ==","Ag=="]},"l":{"L":[]}}`
	var it Item
	if err := json.Unmarshal([]byte(src), &it); err != nil {
		t.Fatal(err)
	}
	b := AppendFramed([]byte("prefix"), it)
	got, rest, err := DecodeFramed(append(b[len("prefix"):], "tail"...))
	if err != nil {
		t.Fatal(err)
	}
	if string(rest) != "tail" {
		t.Errorf("rest: got %q, want %q", rest, "tail")
	}
	if !EqualItems(got, it) {
		g, _ := got.MarshalJSON()
		w, _ := it.MarshalJSON()
		t.Errorf("round trip: got %s, want %s", g, w)
	}
	// Every truncation is refused, never a panic or a wrong item.
	for n := 0; n < len(b)-len("prefix"); n++ {
		if _, _, err := DecodeFramed(b[len("prefix") : len("prefix")+n]); err == nil {
			t.Fatalf("a truncation to %d bytes decoded", n)
		}
	}
}

// TestScalarFastPath: the scalar shortcut of UnmarshalJSON decodes what the generic
// path does, and leaves every error to it.
func TestScalarFastPath(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{`{"S":"abc"}`, `{"S":"abc"}`, ""},
		{` { "N" : "1.50" } `, `{"N":"1.5"}`, ""},
		{`{"N":"-0"}`, `{"N":"0"}`, ""},
		{`{"BOOL":false}`, `{"BOOL":false}`, ""},
		{`{"NULL":true}`, `{"NULL":true}`, ""},
		{`{"S":""}`, `{"S":""}`, ""},
		{`{"S":"h\u00e9\n"}`, `{"S":"hé\n"}`, ""},
		{`{"S":"hé"}`, `{"S":"hé"}`, ""},
		{`{"N":"dog"}`, "", "The parameter cannot be converted to a numeric value: dog"},
		{`{"NULL":false}`, "", "Null attribute value types must have the value of true"},
		{`{"BOOL":"yes"}`, "", "BOOL_VALUE can not be converted to a Boolean"},
		{`{"S":"a","N":"1"}`, "", "more than one datatypes"},
	} {
		var v Value
		err := json.Unmarshal([]byte(tc.in), &v)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: got error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got, _ := v.MarshalJSON(); string(got) != tc.want {
			t.Errorf("%s: got %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestLookupFramed(t *testing.T) {
	var it Item
	if err := json.Unmarshal([]byte(`{"a":{"M":{"x":{"L":[{"N":"1"},{"BOOL":true}]}}},"b":{"SS":["p"]},"exp":{"N":"17"},"z":{"NULL":true}}`), &it); err != nil {
		t.Fatal(err)
	}
	blob := string(AppendFramed(nil, it))
	for _, name := range []string{"a", "b", "exp", "z"} {
		if got := LookupFramed(blob, name); got == nil || !Equal(got, it[name]) {
			t.Errorf("LookupFramed %s: got %v, want %v", name, got, it[name])
		}
	}
	if got := LookupFramed(blob, "none"); got != nil {
		t.Errorf("LookupFramed of a missing name: got %v", got)
	}
}

func TestFramedSize(t *testing.T) {
	var it Item
	if err := json.Unmarshal([]byte(`{"a":{"M":{"x":{"L":[{"N":"12.50"},{"BOOL":true},{"NULL":true}]},"y":{"B":"AAE="}}},"b":{"SS":["p","qq"]},"c":{"NS":["1","22.5"]},"d":{"BS":["AQ=="]},"e":{"S":"héllo"},"f":{"L":[]}}`), &it); err != nil {
		t.Fatal(err)
	}
	b := AppendFramed(nil, it)
	got, err := FramedSize(string(b))
	if err != nil || got != it.Size() {
		t.Errorf("FramedSize: got %d (%v), want %d", got, err, it.Size())
	}
	if end, err := FramedEnd(string(b)+"tail", 0); err != nil || end != len(b) {
		t.Errorf("FramedEnd: got %d (%v), want %d", end, err, len(b))
	}
}

func TestFramedJSON(t *testing.T) {
	src := `{"a":{"M":{"x":{"L":[{"N":"12.5"},{"BOOL":true},{"NULL":true},{"BOOL":false}]},"y":{"B":"AAE="}}},"b":{"SS":["p","q\"<\n\u0001é"]},"c":{"NS":["1","22.5"]},"d":{"BS":["AQ=="]},"e":{"S":"héllo\\ \t"},"f":{"L":[]},"g":{"M":{}}}`
	var it Item
	if err := json.Unmarshal([]byte(src), &it); err != nil {
		t.Fatal(err)
	}
	got, err := AppendFramedJSON(nil, string(AppendFramed(nil, it)))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := it.MarshalJSON()
	if string(got) != string(want) {
		t.Errorf("AppendFramedJSON:\n got %s\nwant %s", got, want)
	}
}
