package expr

import (
	"errors"
	"testing"
)

// FuzzParse feeds any text to every parser, and what parses to its evaluator: none
// may panic, and every error must be an *Error (a ValidationException for the server).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"a = :s", "attribute_not_exists(pk) OR (n < :n AND NOT contains(ss, :s))",
		"size(l) BETWEEN :n AND :n2", "a.b[2].#c IN (:s, :n, :l)", "((a = :s))", "(size(a)) = :n",
		"begins_with(#a, :s) and attribute_type(m.x, :t)", "a-b", "NOT", "(((", "a[99999999999]",
		"SET a = if_not_exists(a, :n) + :n, l = list_append(:l, l) REMOVE b[1], b[0] ADD c :ss DELETE d :ss",
		"SET #a.#b[0] = :m", "REMOVE a.b.c", "ADD n :n", "pk = :s AND sk BETWEEN :n AND :n2",
		"pk = :s AND begins_with(sk, :s)", "a, b.c, d[3]", "#a, #b", ":s", "#", ":", "é", "a[0][1][2]",
	} {
		f.Add(s)
	}
	const it = `{"a":{"S":"x"},"n":{"N":"5"},"l":{"L":[{"N":"1"},{"M":{"x":{"S":"y"}}}]},
		"m":{"M":{"x":{"L":[]},"A":{"M":{}}}},"ss":{"SS":["x"]},"b":{"L":[{"N":"1"},{"N":"2"}]},"d":{"SS":["x","z"]}}`
	f.Fuzz(func(t *testing.T, s string) {
		check := func(err error) {
			var e *Error
			if err != nil && !errors.As(err, &e) {
				t.Fatalf("%q: error %T %v is not *Error", s, err, err)
			}
		}
		newP := func() *Params {
			return params(t, `{"#a":"a","#b":"b","#c":"c"}`,
				`{":s":{"S":"x"},":n":{"N":"1"},":n2":{"N":"9"},":l":{"L":[{"N":"1"}]},":ss":{"SS":["x","y"]},":m":{"M":{}},":t":{"S":"SS"}}`)
		}
		src := item(t, it)
		before := itemJSON(t, src)
		c, err := ParseCondition(s, "ConditionExpression", newP())
		check(err)
		if err == nil {
			_, err = c.Eval(src)
			check(err)
			_, err = c.Eval(nil)
			check(err)
		}
		u, err := ParseUpdate(s, newP())
		check(err)
		if err == nil {
			out, err := u.Apply(src)
			check(err)
			if err == nil {
				_, err = u.Apply(out)
				check(err)
			}
			_, err = u.Apply(nil)
			check(err)
			_ = u.TopLevel()
		}
		pr, err := ParseProjection(s, newP())
		check(err)
		if err == nil {
			_ = pr.Apply(src)
		}
		kc, err := ParseKeyCondition(s, newP())
		check(err)
		if err == nil && kc.Range != nil {
			_ = kc.Range.Match(src["n"])
		}
		if after := itemJSON(t, src); after != before {
			t.Fatalf("%q changed the item", s)
		}
	})
}
