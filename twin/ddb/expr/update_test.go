package expr

import (
	"slices"
	"strings"
	"testing"
)

const updValues = `{
	":one": {"N": "1"}, ":two": {"N": "2"}, ":neg": {"N": "-3"}, ":half": {"N": "0.5"}, ":x": {"S": "x"},
	":big": {"N": "99999999999999999999999999999999999999"}, ":tiny": {"N": "0.1"},
	":max": {"N": "9.9999999999999999999999999999999999999E+125"},
	":l1": {"L": [{"S": "a"}]}, ":l2": {"L": [{"S": "b"}, {"S": "c"}]}, ":empty": {"L": []},
	":ss": {"SS": ["b", "c"]}, ":ss2": {"SS": ["a", "z"]}, ":ns": {"NS": ["1", "5"]}, ":bs": {"BS": ["AQ=="]},
	":m": {"M": {"k": {"S": "v"}}}, ":t": {"BOOL": true}
}`

const updItem = `{
	"pk": {"S": "p"}, "n": {"N": "10"}, "s": {"S": "str"},
	"l": {"L": [{"S": "a0"}, {"S": "a1"}, {"S": "a2"}, {"S": "a3"}]},
	"m": {"M": {"a": {"N": "1"}, "l": {"L": [{"N": "0"}, {"M": {"x": {"S": "deep"}}}]}}},
	"ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2"]}, "bs": {"BS": ["AQ==", "Ag=="]}
}`

// SET, REMOVE, ADD and DELETE as documented in
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.UpdateExpressions.html
func TestUpdateApply(t *testing.T) {
	cases := []struct {
		name, expr string
		in         string // "" is no item
		want       string // the attributes that differ from in are listed in full
	}{
		{"set new", "SET a = :one", `{"pk":{"S":"p"}}`, `{"pk":{"S":"p"},"a":{"N":"1"}}`},
		{"set on no item", "SET a = :one, b = :x", "", `{"a":{"N":"1"},"b":{"S":"x"}}`},
		{"set replace", "SET s = :one", `{"s":{"S":"old"}}`, `{"s":{"N":"1"}}`},
		{"set copy attribute", "SET c = s", `{"s":{"S":"v"}}`, `{"s":{"S":"v"},"c":{"S":"v"}}`},
		{"set reads the old item", "SET a = b, b = a", `{"a":{"N":"1"},"b":{"N":"2"}}`, `{"a":{"N":"2"},"b":{"N":"1"}}`},
		{"set map member", "SET m.b = :x", `{"m":{"M":{"a":{"N":"1"}}}}`, `{"m":{"M":{"a":{"N":"1"},"b":{"S":"x"}}}}`},
		{"set nested list element", "SET m.l[1].x = :x", updItem, ""},
		{"set list element", "SET l[1] = :x", `{"l":{"L":[{"N":"0"},{"N":"1"}]}}`, `{"l":{"L":[{"N":"0"},{"S":"x"}]}}`},
		{"set past the end appends", "SET l[10] = :x", `{"l":{"L":[{"N":"0"}]}}`, `{"l":{"L":[{"N":"0"},{"S":"x"}]}}`},
		{"set past the end in index order", "SET l[5] = :x, l[3] = :one", `{"l":{"L":[{"N":"0"}]}}`, `{"l":{"L":[{"N":"0"},{"N":"1"},{"S":"x"}]}}`},
		{"set map value", "SET a = :m", "", `{"a":{"M":{"k":{"S":"v"}}}}`},
		{"set names", "SET #a.#b = :x", `{"A":{"M":{}}}`, `{"A":{"M":{"dotted.name":{"S":"x"}}}}`},
		{"plus", "SET n = n + :one", `{"n":{"N":"10"}}`, `{"n":{"N":"11"}}`},
		{"minus", "SET n = n - :neg", `{"n":{"N":"10"}}`, `{"n":{"N":"13"}}`},
		{"plus decimals", "SET n = n + :half", `{"n":{"N":"10"}}`, `{"n":{"N":"10.5"}}`},
		{"value minus attribute", "SET n = :one - n", `{"n":{"N":"10"}}`, `{"n":{"N":"-9"}}`},
		{"38 digits exact", "SET n = :big - :one", "", `{"n":{"N":"99999999999999999999999999999999999998"}}`},
		{"exact decimal", "SET n = :tiny + :tiny", "", `{"n":{"N":"0.2"}}`},
		{"attribute plus attribute", "SET c = a + b", `{"a":{"N":"1"},"b":{"N":"2"}}`, `{"a":{"N":"1"},"b":{"N":"2"},"c":{"N":"3"}}`},
		{"if_not_exists absent", "SET c = if_not_exists(c, :one)", `{}`, `{"c":{"N":"1"}}`},
		{"if_not_exists present", "SET n = if_not_exists(n, :one)", `{"n":{"N":"10"}}`, `{"n":{"N":"10"}}`},
		{"counter from nothing", "SET n = if_not_exists(n, :one) + :two", "", `{"n":{"N":"3"}}`},
		{"if_not_exists other path", "SET a = if_not_exists(b, s)", `{"s":{"S":"v"}}`, `{"s":{"S":"v"},"a":{"S":"v"}}`},
		{"list_append end", "SET l = list_append(l, :l2)", `{"l":{"L":[{"S":"a"}]}}`, `{"l":{"L":[{"S":"a"},{"S":"b"},{"S":"c"}]}}`},
		{"list_append front", "SET l = list_append(:l2, l)", `{"l":{"L":[{"S":"a"}]}}`, `{"l":{"L":[{"S":"b"},{"S":"c"},{"S":"a"}]}}`},
		{"list_append new list", "SET l = list_append(if_not_exists(l, :empty), :l1)", "", `{"l":{"L":[{"S":"a"}]}}`},
		{"list_append two values", "SET l = list_append(:l1, :l2)", "", `{"l":{"L":[{"S":"a"},{"S":"b"},{"S":"c"}]}}`},
		{"remove attribute", "REMOVE s", `{"s":{"S":"x"},"n":{"N":"1"}}`, `{"n":{"N":"1"}}`},
		{"remove absent", "REMOVE s", `{"n":{"N":"1"}}`, `{"n":{"N":"1"}}`},
		{"remove several", "REMOVE a, b", `{"a":{"N":"1"},"b":{"N":"1"},"c":{"N":"1"}}`, `{"c":{"N":"1"}}`},
		{"remove map member", "REMOVE m.a", `{"m":{"M":{"a":{"N":"1"},"b":{"N":"2"}}}}`, `{"m":{"M":{"b":{"N":"2"}}}}`},
		{"remove absent member", "REMOVE m.z", `{"m":{"M":{"a":{"N":"1"}}}}`, `{"m":{"M":{"a":{"N":"1"}}}}`},
		{"remove list element shifts", "REMOVE l[1]", `{"l":{"L":[{"N":"0"},{"N":"1"},{"N":"2"}]}}`, `{"l":{"L":[{"N":"0"},{"N":"2"}]}}`},
		{"remove elements by original index", "REMOVE l[0], l[2]", `{"l":{"L":[{"N":"0"},{"N":"1"},{"N":"2"},{"N":"3"}]}}`, `{"l":{"L":[{"N":"1"},{"N":"3"}]}}`},
		{"remove elements any order", "REMOVE l[2], l[0], l[3]", `{"l":{"L":[{"N":"0"},{"N":"1"},{"N":"2"},{"N":"3"}]}}`, `{"l":{"L":[{"N":"1"}]}}`},
		{"remove past the end", "REMOVE l[9]", `{"l":{"L":[{"N":"0"}]}}`, `{"l":{"L":[{"N":"0"}]}}`},
		{"add number", "ADD n :two", `{"n":{"N":"10"}}`, `{"n":{"N":"12"}}`},
		{"add negative", "ADD n :neg", `{"n":{"N":"1"}}`, `{"n":{"N":"-2"}}`},
		{"add creates number", "ADD n :two", `{}`, `{"n":{"N":"2"}}`},
		{"add creates on no item", "ADD n :one, s :ss", "", `{"n":{"N":"1"},"s":{"SS":["b","c"]}}`},
		{"add set union", "ADD s :ss", `{"s":{"SS":["a","b"]}}`, `{"s":{"SS":["a","b","c"]}}`},
		{"add number set", "ADD s :ns", `{"s":{"NS":["1","2"]}}`, `{"s":{"NS":["1","2","5"]}}`},
		{"add binary set", "ADD s :bs", `{"s":{"BS":["Ag=="]}}`, `{"s":{"BS":["Ag==","AQ=="]}}`},
		{"add nested", "ADD m.n :one", `{"m":{"M":{"n":{"N":"4"}}}}`, `{"m":{"M":{"n":{"N":"5"}}}}`},
		{"delete from set", "DELETE s :ss", `{"s":{"SS":["a","b","c"]}}`, `{"s":{"SS":["a"]}}`},
		{"delete absent members", "DELETE s :ss2", `{"s":{"SS":["b"]}}`, `{"s":{"SS":["b"]}}`},
		{"delete last member removes", "DELETE s :ss", `{"s":{"SS":["b","c"]},"n":{"N":"1"}}`, `{"n":{"N":"1"}}`},
		{"delete absent attribute", "DELETE s :ss", `{"n":{"N":"1"}}`, `{"n":{"N":"1"}}`},
		{"delete number set", "DELETE s :ns", `{"s":{"NS":["1","2","5"]}}`, `{"s":{"NS":["2"]}}`},
		{"delete binary set", "DELETE s :bs", `{"s":{"BS":["AQ==","Ag=="]}}`, `{"s":{"BS":["Ag=="]}}`},
		{"all four clauses", "SET a = :one REMOVE b ADD c :two DELETE d :ss",
			`{"b":{"N":"0"},"c":{"N":"1"},"d":{"SS":["b","q"]}}`, `{"a":{"N":"1"},"c":{"N":"3"},"d":{"SS":["q"]}}`},
		{"clauses any order and case", "delete d :ss add c :two remove b set a = :one",
			`{"b":{"N":"0"},"c":{"N":"1"},"d":{"SS":["b","q"]}}`, `{"a":{"N":"1"},"c":{"N":"3"},"d":{"SS":["q"]}}`},
	}
	names := `{"#a":"A","#b":"dotted.name"}`
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := ParseUpdate(tc.expr, params(t, names, updValues))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			in := item(t, tc.in)
			before := itemJSON(t, in)
			got, err := u.Apply(in)
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			if after := itemJSON(t, in); after != before {
				t.Fatalf("Apply changed its input:\n got %s\nwant %s", after, before)
			}
			want := tc.want
			if want == "" {
				want = strings.Replace(tc.in, `{"x": {"S": "deep"}}`, `{"x": {"S": "x"}}`, 1)
			}
			if g, w := itemJSON(t, got), canon(t, want); g != w {
				t.Fatalf("got  %s\nwant %s", g, w)
			}
		})
	}
}

// Runtime errors, with the wording AWS uses when an update meets the item (the actions
// and their operand types are those of
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.UpdateExpressions.html).
// The wordings are AWS's as commonly reported; not verified here against AWS itself.
func TestUpdateApplyErrors(t *testing.T) {
	const (
		missing  = "The provided expression refers to an attribute that does not exist in the item"
		badType  = "An operand in the update expression has an incorrect data type"
		badPath  = "The document path provided in the update expression is invalid for update"
		overflow = "Number overflow. Attempting to store a number with magnitude larger than supported range"
	)
	cases := []struct{ expr, in, want string }{
		{"SET a = b", `{}`, missing},
		{"SET a = b", "", missing},
		{"SET a = b + :one", `{"a":{"N":"1"}}`, missing},
		{"SET a = m.z", `{"m":{"M":{}}}`, missing},
		{"SET a = l[3]", `{"l":{"L":[]}}`, missing},
		{"SET a = s + :one", `{"s":{"S":"x"}}`, badType},
		{"SET a = :one - s", `{"s":{"S":"x"}}`, badType},
		{"SET a = list_append(s, :l1)", `{"s":{"S":"x"}}`, badType},
		{"SET a = list_append(:l1, s)", `{"s":{"SS":["x"]}}`, badType},
		{"SET m.a = :one", `{}`, badPath},
		{"SET m.a = :one", `{"m":{"S":"x"}}`, badPath},
		{"SET m[0] = :one", `{"m":{"M":{}}}`, badPath},
		{"SET l.a = :one", `{"l":{"L":[]}}`, badPath},
		{"SET m.a.b = :one", `{"m":{"M":{}}}`, badPath},
		{"REMOVE m.a", `{"m":{"S":"x"}}`, badPath},
		{"REMOVE m.a.b", `{"m":{"M":{}}}`, badPath},
		{"ADD n :one", `{"n":{"S":"x"}}`, badType},
		{"ADD s :ss", `{"s":{"NS":["1"]}}`, badType},
		{"ADD s :ss", `{"s":{"S":"b"}}`, badType},
		{"ADD m.n :one", `{}`, badPath},
		{"DELETE s :ss", `{"s":{"NS":["1"]}}`, badType},
		{"DELETE s :ss", `{"s":{"L":[]}}`, badType},
		{"SET n = n + :one", `{"n":{"N":"9.9999999999999999999999999999999999999E+125"}}`, overflow},
		{"SET n = :max + :max", ``, overflow},
		{"ADD n :big", `{"n":{"N":"1"}}`, "Number overflow. Attempting to store a number with magnitude larger than supported range"},
	}
	for _, tc := range cases {
		t.Run(tc.expr+" on "+tc.in, func(t *testing.T) {
			u, err := ParseUpdate(tc.expr, params(t, "", updValues))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			_, err = u.Apply(item(t, tc.in))
			wantErr(t, err, tc.want)
		})
	}
}

// Parse-time errors of update expressions: each clause once, no overlapping paths,
// ADD numbers and sets only, DELETE sets only, functions only where the page allows them.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.UpdateExpressions.html
func TestUpdateParseErrors(t *testing.T) {
	const p = "Invalid UpdateExpression: "
	cases := []struct{ expr, want string }{
		{"SET a = :one SET b = :one", p + `The "SET" section can only be used once in an update expression;`},
		{"REMOVE a remove b", p + `The "REMOVE" section can only be used once in an update expression;`},
		{"SET a = :one, a = :two", p + "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a], path two: [a]"},
		{"SET a = :one REMOVE a.b", p + "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a], path two: [a, b]"},
		{"SET a[1].b = :one REMOVE a[1]", p + "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a, [1], b], path two: [a, [1]]"},
		{"SET a[1] = :one, a.b = :one", p + "Two document paths conflict with each other; must remove or rewrite one of these paths; path one: [a, [1]], path two: [a, b]"},
		{"ADD a :one DELETE a :ss", p + "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a], path two: [a]"},
		{"SET status = :one", p + "Attribute name is a reserved keyword; reserved keyword: status"},
		{"SET a = size", p + "Attribute name is a reserved keyword; reserved keyword: size"},
		{"SET a = :nope", p + "An expression attribute value used in expression is not defined; attribute value: :nope"},
		{"SET #nope = :one", p + "An expression attribute name used in the document path is not defined; attribute name: #nope"},
		{"SET a = :x + :one", p + "Incorrect operand type for operator or function; operator or function: +, operand type: S"},
		{"SET a = b - :ss", p + "Incorrect operand type for operator or function; operator or function: -, operand type: SS"},
		{"SET a = list_append(a, :x)", p + "Incorrect operand type for operator or function; operator or function: list_append, operand type: S"},
		{"SET a = list_append(a)", p + "Incorrect number of operands for operator or function; operator or function: list_append, number of operands: 1"},
		{"SET a = if_not_exists(:one, :one)", p + "Operator or function requires a document path; operator or function: if_not_exists"},
		{"SET a = size(b)", p + "The function is not allowed to be used this way in an expression; function: size"},
		{"SET a = attribute_exists(b)", p + "The function is not allowed to be used this way in an expression; function: attribute_exists"},
		{"SET a = concat(b, c)", p + "Invalid function name; function: concat"},
		{"ADD a :x", p + "Incorrect operand type for operator or function; operator: ADD, operand type: STRING, typeSet: ALLOWED_FOR_ADD_OPERAND"},
		{"ADD a :l1", p + "Incorrect operand type for operator or function; operator: ADD, operand type: LIST, typeSet: ALLOWED_FOR_ADD_OPERAND"},
		{"DELETE a :one", p + "Incorrect operand type for operator or function; operator: DELETE, operand type: NUMBER, typeSet: ALLOWED_FOR_DELETE_OPERAND"},
		{"", p + "The expression can not be empty;"},
		{"SET a = :one" + strings.Repeat(" ", 4090), p + "Expression size has exceeded the maximum allowed size; expression size: 4102"},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			_, err := ParseUpdate(tc.expr, params(t, "", updValues))
			wantErr(t, err, tc.want)
		})
	}
}

// TopLevel lists the attributes an update touches, so the server can refuse a key.
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateItem.html
func TestUpdateTopLevel(t *testing.T) {
	u, err := ParseUpdate("SET a.b = :one, #c[0] = :one REMOVE d, a.z ADD e :one DELETE f :ss", params(t, `{"#c":"pk"}`, updValues))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := u.TopLevel(), []string{"a", "pk", "d", "e", "f"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.UpdateExpressions.html
// Apply shares nothing it changes with its input: a second update of the result, and
// changes to nested maps and lists, leave the first item as it was.
func TestUpdateCopiesWhatItChanges(t *testing.T) {
	in := item(t, updItem)
	before := itemJSON(t, in)
	for _, expr := range []string{
		"SET m.l[1].x = :x, m.a = :two, l[0] = :x",
		"REMOVE m.l[0], l[1], l[3]",
		"ADD ss :ss, ns :ns, bs :bs, m.a :one",
		"DELETE ss :ss2, ns :ns, bs :bs",
		"SET l = list_append(l, :l1), m.dup = m",
	} {
		u, err := ParseUpdate(expr, params(t, "", updValues))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		out, err := u.Apply(in)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		// Applying again to the result must not change the result either.
		outBefore := itemJSON(t, out)
		if _, err := u.Apply(out); err != nil && !strings.HasPrefix(expr, "DELETE") && !strings.HasPrefix(expr, "REMOVE") {
			t.Fatalf("%s again: %v", expr, err)
		}
		if outAfter := itemJSON(t, out); outAfter != outBefore {
			t.Fatalf("%s changed its input the second time:\n got %s\nwant %s", expr, outAfter, outBefore)
		}
		if after := itemJSON(t, in); after != before {
			t.Fatalf("%s changed its input:\n got %s\nwant %s", expr, after, before)
		}
	}
}
