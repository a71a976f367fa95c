package attr

import (
	"encoding/json"
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
