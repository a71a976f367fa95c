package expr

import (
	"testing"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// Key condition expressions as documented in
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.KeyConditionExpressions.html
func TestKeyCondition(t *testing.T) {
	const vals = `{":p": {"S": "p1"}, ":a": {"N": "1"}, ":b": {"N": "9"}, ":pre": {"S": "2024-"}, ":bin": {"B": "AAE="}}`
	names := `{"#pk": "pk", "#sk": "sk"}`
	cases := []struct {
		expr                string
		hash, rng, op, a, b string
	}{
		{"pk = :p", "pk", "", "", "", ""},
		{"#pk = :p", "pk", "", "", "", ""},
		{"(pk = :p)", "pk", "", "", "", ""},
		{"pk = :p AND sk = :a", "pk", "sk", "=", "1", ""},
		{"pk = :p AND sk < :a", "pk", "sk", "<", "1", ""},
		{"pk = :p AND sk <= :a", "pk", "sk", "<=", "1", ""},
		{"pk = :p AND sk > :a", "pk", "sk", ">", "1", ""},
		{"pk = :p AND sk >= :a", "pk", "sk", ">=", "1", ""},
		{"pk = :p AND sk BETWEEN :a AND :b", "pk", "sk", "BETWEEN", "1", "9"},
		{"pk = :p AND begins_with(sk, :pre)", "pk", "sk", "begins_with", "2024-", ""},
		{"sk > :a AND pk = :p", "pk", "sk", ">", "1", ""},
		{"(#pk = :p) AND (#sk BETWEEN :a AND :b)", "pk", "sk", "BETWEEN", "1", "9"},
		{"pk = :p and :a < sk", "pk", "sk", ">", "1", ""},
		{":p = pk", "pk", "", "", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			kc, err := ParseKeyCondition(tc.expr, params(t, names, vals))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if kc.HashName != tc.hash || kc.Hash == nil || kc.Hash.S != "p1" {
				t.Fatalf("hash: got %s = %v, want %s = p1", kc.HashName, kc.Hash, tc.hash)
			}
			if kc.RangeName != tc.rng {
				t.Fatalf("range name: got %q, want %q", kc.RangeName, tc.rng)
			}
			if tc.rng == "" {
				if kc.Range != nil {
					t.Fatalf("range: got %+v, want none", kc.Range)
				}
				return
			}
			r := kc.Range
			if r.Op != tc.op || r.A.S != tc.a || (tc.b == "") != (r.B == nil) || (r.B != nil && r.B.S != tc.b) {
				t.Fatalf("range: got %+v, want %s %s %s", r, tc.op, tc.a, tc.b)
			}
		})
	}
}

// Only = on the partition key, one of = < <= > >= BETWEEN begins_with on the sort key,
// joined by AND: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.KeyConditionExpressions.html
// The wordings are AWS's as commonly reported; not verified here against AWS itself.
func TestKeyConditionErrors(t *testing.T) {
	const vals = `{":p": {"S": "p1"}, ":a": {"N": "1"}, ":b": {"N": "9"}, ":n": {"N": "5"}}`
	const p = "Invalid KeyConditionExpression: "
	cases := []struct{ expr, want string }{
		{"pk = :p OR sk = :a", p + "Invalid operator used in KeyConditionExpression: OR"},
		{"NOT pk = :p", p + "Invalid operator used in KeyConditionExpression: NOT"},
		{"pk IN (:p)", p + "Invalid operator used in KeyConditionExpression: IN"},
		{"pk = :p AND sk <> :a", p + "Invalid operator used in KeyConditionExpression: <>"},
		{"pk = :p AND attribute_exists(sk)", p + "Invalid operator used in KeyConditionExpression: attribute_exists"},
		{"pk = :p AND contains(sk, :a)", p + "Invalid operator used in KeyConditionExpression: contains"},
		{"pk = :p AND size(sk) = :a", p + "Invalid operator used in KeyConditionExpression: size"},
		{"pk = :p AND begins_with(sk, :n)", p + "Incorrect operand type for operator or function; operator or function: begins_with, operand type: N"},
		{"pk = :p AND sk BETWEEN :b AND :a", p + "The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: {N:9}, upper bound operand: AttributeValue: {N:1}"},
		{"pk = :p AND sk = :a AND x = :b", p + "Conditions can be of length 1 or 2 only"},
		{"pk = :p AND pk = :p", p + "KeyConditionExpressions must only contain one condition per key"},
		{"pk = :p AND a.b = :a", p + "KeyConditionExpressions cannot have conditions on nested attributes"},
		{"pk = sk", "Query key condition not supported"},
		{"sk > :a", "Query key condition not supported"},
		{"pk = :nope", p + "An expression attribute value used in expression is not defined; attribute value: :nope"},
		{"name = :p", p + "Attribute name is a reserved keyword; reserved keyword: name"},
		{"", p + "The expression can not be empty;"},
		{"((pk = :p))", p + "The expression has redundant parentheses;"},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			_, err := ParseKeyCondition(tc.expr, params(t, "", vals))
			wantErr(t, err, tc.want)
		})
	}
}

// Sort-key matching: numbers numerically, strings and binaries bytewise (UTF-8 for S).
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.KeyConditionExpressions.html
func TestRangeCondMatch(t *testing.T) {
	n := func(s string) string { return `{"N":"` + s + `"}` }
	s := func(s string) string { return `{"S":"` + s + `"}` }
	val := func(js string) *attr.Value { return item(t, `{"v":`+js+`}`)["v"] }
	cases := []struct {
		op, a, b, v string
		want        bool
	}{
		{"=", n("5"), "", n("5.0"), true},
		{"=", n("5"), "", n("6"), false},
		{"<", n("5"), "", n("4.99"), true},
		{"<", n("5"), "", n("5"), false},
		{"<=", n("5"), "", n("5"), true},
		{">", n("-1"), "", n("0"), true},
		{">=", n("10"), "", n("9"), false},
		{">", s("b"), "", s("ab"), false},
		{">", s("B"), "", s("a"), true}, // bytewise: "a" > "B"
		{"BETWEEN", n("1"), n("9"), n("1"), true},
		{"BETWEEN", n("1"), n("9"), n("9"), true},
		{"BETWEEN", n("1"), n("9"), n("10"), false},
		{"BETWEEN", s("a"), s("c"), s("bz"), true},
		{"begins_with", s("2024-"), "", s("2024-01-01"), true},
		{"begins_with", s("2024-"), "", s("2023-12-31"), false},
		{"begins_with", `{"B":"AAE="}`, "", `{"B":"AAEC"}`, true},
		{"begins_with", `{"B":"AAE="}`, "", s("AAEC"), false},
		{"=", n("5"), "", s("5"), false}, // types differ
		{"<", s("5"), "", n("4"), false},
	}
	for _, tc := range cases {
		r := &RangeCond{Op: tc.op, A: val(tc.a)}
		if tc.b != "" {
			r.B = val(tc.b)
		}
		if got := r.Match(val(tc.v)); got != tc.want {
			t.Errorf("%s %s %s ~ %s: got %v, want %v", tc.v, tc.op, tc.a, tc.b, got, tc.want)
		}
	}
	if (&RangeCond{Op: "=", A: val(n("1"))}).Match(nil) {
		t.Errorf("nil value matched")
	}
}
