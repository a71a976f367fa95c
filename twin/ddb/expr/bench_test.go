package expr

import (
	"testing"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// A conditional write's usual condition and a counter-and-list update, parsed and
// applied once per iteration, as the server does once per request.
func BenchmarkConditionParseEval(b *testing.B) {
	names := map[string]string{"#s": "status"}
	vals := map[string]*attr.Value{":v": attr.Num("3"), ":open": attr.Str("open")}
	it := attr.Item{"pk": attr.Str("p"), "version": attr.Num("3"), "status": attr.Str("open")}
	const expr = "attribute_not_exists(pk) OR (version = :v AND #s = :open)"
	b.ReportAllocs()
	for b.Loop() {
		c, err := ParseCondition(expr, "ConditionExpression", NewParams(names, vals))
		if err != nil {
			b.Fatal(err)
		}
		if ok, _ := c.Eval(it); !ok {
			b.Fatal("condition false")
		}
	}
}

func BenchmarkUpdateParseApply(b *testing.B) {
	names := map[string]string{"#c": "count"}
	vals := map[string]*attr.Value{":one": attr.Num("1"), ":zero": attr.Num("0"),
		":e": attr.List([]*attr.Value{attr.Str("evt")}), ":t": attr.Str("2026-01-01T00:00:00Z")}
	it := attr.Item{"pk": attr.Str("p"), "count": attr.Num("41"), "events": attr.List([]*attr.Value{attr.Str("a")})}
	const expr = "SET #c = if_not_exists(#c, :zero) + :one, events = list_append(events, :e), updated = :t REMOVE draft"
	b.ReportAllocs()
	for b.Loop() {
		u, err := ParseUpdate(expr, NewParams(names, vals))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := u.Apply(it); err != nil {
			b.Fatal(err)
		}
	}
}
