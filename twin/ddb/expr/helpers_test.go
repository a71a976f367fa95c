package expr

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// item decodes an item written in DynamoDB JSON; "" is no item.
func item(t testing.TB, js string) attr.Item {
	t.Helper()
	if js == "" {
		return nil
	}
	var it attr.Item
	if err := json.Unmarshal([]byte(js), &it); err != nil {
		t.Fatalf("item %s: %v", js, err)
	}
	return it
}

// params builds Params from JSON: names as {"#a":"a"}, values in DynamoDB JSON.
func params(t testing.TB, names, values string) *Params {
	t.Helper()
	var n map[string]string
	var v map[string]*attr.Value
	if names != "" {
		if err := json.Unmarshal([]byte(names), &n); err != nil {
			t.Fatalf("names %s: %v", names, err)
		}
	}
	if values != "" {
		if err := json.Unmarshal([]byte(values), &v); err != nil {
			t.Fatalf("values %s: %v", values, err)
		}
	}
	return NewParams(n, v)
}

func itemJSON(t testing.TB, it attr.Item) string {
	t.Helper()
	if it == nil {
		return ""
	}
	b, err := json.Marshal(it)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// canon re-encodes an item's JSON so expected and actual compare as text.
func canon(t testing.TB, js string) string {
	t.Helper()
	return itemJSON(t, item(t, js))
}

// wantErr checks that err is an *Error with exactly msg.
func wantErr(t testing.TB, err error, msg string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got error %v (%T), want *Error %q", err, err, msg)
	}
	if e.Msg != msg {
		t.Fatalf("got error\n  %q\nwant\n  %q", e.Msg, msg)
	}
}
