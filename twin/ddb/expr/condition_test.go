package expr

import (
	"testing"
)

// The item most condition cases read.
const condItem = `{
	"pk": {"S": "p1"},
	"n": {"N": "10"},
	"f": {"N": "2.5"},
	"s": {"S": "hello world"},
	"b": {"B": "AAEC"},
	"t": {"BOOL": true},
	"z": {"NULL": true},
	"ss": {"SS": ["red", "green"]},
	"ns": {"NS": ["1", "2.5"]},
	"bs": {"BS": ["AQ==", "Ag=="]},
	"l": {"L": [{"S": "x"}, {"N": "7"}, {"M": {"deep": {"S": "yes"}}}]},
	"m": {"M": {"a": {"N": "1"}, "b": {"L": [{"S": "q"}, {"S": "r"}]}, "Safety.Warning": {"S": "dot"}}},
	"Safety.Warning": {"S": "top-level name with a dot"},
	"e": {"S": ""},
	"u": {"S": "ünï"}
}`

const condValues = `{
	":10": {"N": "10"}, ":ten0": {"N": "10.0"}, ":9": {"N": "9"}, ":11": {"N": "11"}, ":2": {"N": "2"}, ":3": {"N": "3"},
	":ten": {"S": "10"}, ":hello": {"S": "hello"}, ":world": {"S": "world"}, ":hw": {"S": "hello world"},
	":red": {"S": "red"}, ":blue": {"S": "blue"}, ":one": {"N": "1"}, ":x": {"S": "x"}, ":seven": {"N": "7"},
	":b01": {"B": "AAE="}, ":b02": {"B": "AAI="}, ":bs1": {"B": "AQ=="}, ":yes": {"S": "yes"},
	":S": {"S": "S"}, ":N": {"S": "N"}, ":SS": {"S": "SS"}, ":NS": {"S": "NS"}, ":BS": {"S": "BS"}, ":B": {"S": "B"},
	":BOOL": {"S": "BOOL"}, ":NULL": {"S": "NULL"}, ":L": {"S": "L"}, ":M": {"S": "M"},
	":t": {"BOOL": true}, ":f": {"BOOL": false}, ":null": {"NULL": true},
	":list": {"L": [{"S": "x"}, {"N": "7"}, {"M": {"deep": {"S": "yes"}}}]},
	":set": {"SS": ["green", "red"]}, ":a": {"S": "a"}, ":z": {"S": "z"}, ":empty": {"S": ""}, ":zero": {"N": "0"},
	":big": {"N": "99999999999999999999999999999999999999"}
}`

// Operators, functions and precedence as documented in
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.OperatorsAndFunctions.html
// and document paths as in
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.Attributes.html
func TestConditionEval(t *testing.T) {
	names := `{"#sw": "Safety.Warning", "#m": "m", "#status": "status", "#a": "a", "#dot": "Safety.Warning"}`
	cases := []struct {
		expr string
		want bool
	}{
		// comparators: numbers numerically, strings and binaries bytewise
		{"n = :10", true},
		{"n = :ten0", true},
		{"n <> :10", false},
		{"n <> :9", true},
		{"n < :11", true},
		{"n <= :10", true},
		{"n > :9", true},
		{"n >= :11", false},
		{"f < :3", true},
		{"f > :2", true},
		{"n < :big", true},
		{"s > :hello", true},
		{"s < :world", true},
		{"b > :b01", true},
		{"b < :b02", true},
		// different types never compare; <> of different types holds
		{"n = :ten", false},
		{"n < :ten", false},
		{"n > :ten", false},
		{"n <> :ten", true},
		{"t = :t", true},
		{"t = :f", false},
		{"z = :null", true},
		{"l = :list", true},
		{"ss = :set", true},
		{"e = :empty", true},
		// an absent attribute equals nothing; <> holds
		{"absent = :10", false},
		{"absent <> :10", true},
		{"absent < :10", false},
		// attribute to attribute
		{"n > f", true},
		{"m.a < n", true},
		{"l[1] = :seven", true},
		{"l[2].deep = :yes", true},
		{"m.b[1] > m.b[0]", true},
		{"l[3] = :x", false},
		{"m[0] = :x", false},
		{"l.a = :x", false},
		// names: a dot inside #name is part of the name; a dot in the text is a path
		{"#sw = :x", false},
		{"begins_with(#sw, :x)", false},
		{"begins_with(#dot, :empty)", true},
		{"#m.#sw = :x", false},
		{"size(#m.#sw) = :3", true},
		{"size(#sw) > :10", true},
		{"#m.a = :one", true},
		// value on the left
		{":11 > n", true},
		{":9 >= n", false},
		// BETWEEN is inclusive
		{"n BETWEEN :9 AND :11", true},
		{"n BETWEEN :10 AND :10", true},
		{"n between :2 and :9", false},
		{"s BETWEEN :a AND :z", true},
		{"n BETWEEN :a AND :z", false},
		{"absent BETWEEN :2 AND :9", false},
		// IN
		{"n IN (:9, :10, :11)", true},
		{"n IN (:9, :11)", false},
		{"s in (:hw)", true},
		{"absent IN (:9)", false},
		{"n IN (m.a, f)", false},
		// functions
		{"attribute_exists(n)", true},
		{"attribute_exists(absent)", false},
		{"attribute_exists(m.a)", true},
		{"attribute_exists(m.zz)", false},
		{"attribute_exists(l[2].deep)", true},
		{"attribute_exists(z)", true},
		{"attribute_not_exists(absent)", true},
		{"attribute_not_exists(pk)", false},
		{"attribute_type(n, :N)", true},
		{"attribute_type(n, :S)", false},
		{"attribute_type(s, :S)", true},
		{"attribute_type(ss, :SS)", true},
		{"attribute_type(ns, :NS)", true},
		{"attribute_type(bs, :BS)", true},
		{"attribute_type(b, :B)", true},
		{"attribute_type(t, :BOOL)", true},
		{"attribute_type(z, :NULL)", true},
		{"attribute_type(l, :L)", true},
		{"attribute_type(m, :M)", true},
		{"attribute_type(absent, :M)", false},
		{"begins_with(s, :hello)", true},
		{"begins_with(s, :world)", false},
		{"begins_with(s, :empty)", true},
		{"begins_with(b, :b01)", true},
		{"begins_with(b, :b02)", false},
		{"begins_with(n, :ten)", false},
		{"begins_with(absent, :hello)", false},
		{"contains(s, :world)", true},
		{"contains(s, :blue)", false},
		{"contains(ss, :red)", true},
		{"contains(ss, :blue)", false},
		{"contains(ns, :one)", true},
		{"contains(ns, :red)", false},
		{"contains(bs, :bs1)", true},
		{"contains(l, :x)", true},
		{"contains(l, :seven)", true},
		{"contains(l, :one)", false},
		{"contains(b, :b01)", true},
		{"contains(n, :one)", false},
		{"contains(absent, :x)", false},
		// size: S and B length, set, list and map member counts
		{"size(s) = :11", true},
		{"size(b) = :3", true},
		{"size(ss) = :2", true},
		{"size(ns) = :2", true},
		{"size(bs) = :2", true},
		{"size(l) = :3", true},
		{"size(m) = :3", true},
		{"size(e) = :zero", true},
		{"size(u) = :3", true}, // characters, not UTF-8 bytes
		{"size(m.b) < :3", true},
		{"size(n) = :2", false},
		{"size(n) <> :2", true},
		{"size(absent) >= :zero", false},
		{":2 < size(l)", true},
		{"size(s) BETWEEN :10 AND :11", true},
		{"size(l) IN (:2, :3)", true},
		{"size(s) > size(l)", true},
		// logic: NOT binds tighter than AND, AND tighter than OR
		{"n = :9 OR n = :10", true},
		{"n = :10 AND s = :hw", true},
		{"n = :10 AND s = :x", false},
		{"NOT n = :9", true},
		{"not n = :10", false},
		{"NOT attribute_exists(absent)", true},
		{"NOT NOT attribute_exists(n)", true},
		{"n = :9 AND n = :10 OR n = :10", true},   // (F and T) or T
		{"n = :10 OR n = :9 AND n = :9", true},    // T or (F and F)
		{"n = :9 OR n = :10 AND n = :9", false},   // F or (T and F)
		{"(n = :9 OR n = :10) AND n = :9", false}, // parentheses first
		{"NOT n = :9 AND n = :9", false},          // (not F) and F
		{"NOT (n = :9 AND n = :9)", true},
		{"(n = :10)", true},
		{"(n = :10) AND (s = :hw)", true},
		{"((n = :10) AND (s = :hw)) OR (n = :9)", true},
		{"(size(s)) = :11", true},
		{"(size(s) = :11)", true},
		{"n = (:10)", true},
		// keywords are case-insensitive; spacing is free
		{"n=:10 aNd s=:hw", true},
		{"  n\t=\n:10  ", true},
		{"attribute_exists (n)", true},
		{"m . a = :one", true},
		{"l [ 1 ] = :seven", true},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			p := params(t, names, condValues)
			c, err := ParseCondition(tc.expr, "ConditionExpression", p)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			got, err := c.Eval(item(t, condItem))
			if err != nil {
				t.Fatalf("eval: %v", err)
			}
			if got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// A absent item (PutItem with attribute_not_exists on a new key) has no attributes.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html
func TestConditionOnMissingItem(t *testing.T) {
	cases := []struct {
		expr string
		want bool
	}{
		{"attribute_not_exists(pk)", true},
		{"attribute_exists(pk)", false},
		{"pk = :v", false},
		{"pk <> :v", true},
		{"NOT contains(pk, :v)", true},
	}
	for _, tc := range cases {
		c, err := ParseCondition(tc.expr, "ConditionExpression", params(t, "", `{":v":{"S":"x"}}`))
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		if got, _ := c.Eval(nil); got != tc.want {
			t.Errorf("%s on no item: got %v, want %v", tc.expr, got, tc.want)
		}
	}
}
