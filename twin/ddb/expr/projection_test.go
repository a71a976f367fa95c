package expr

import "testing"

// Projection expressions as documented in
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ProjectionExpressions.html
// with document paths as in
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.Attributes.html
func TestProjection(t *testing.T) {
	const in = `{
		"Id": {"N": "123"}, "Title": {"S": "Bicycle 123"}, "Price": {"N": "500"},
		"RelatedItems": {"L": [{"N": "341"}, {"N": "472"}, {"N": "649"}]},
		"Pictures": {"M": {"FrontView": {"S": "f.jpg"}, "RearView": {"S": "r.jpg"}, "SideView": {"S": "s.jpg"}}},
		"ProductReviews": {"M": {
			"FiveStar": {"L": [{"S": "Excellent!"}, {"S": "Do yourself a favor"}]},
			"OneStar": {"L": [{"S": "Terrible product!"}, {"S": "No good"}]}}},
		"Safety.Warning": {"S": "Always wear a helmet"},
		"Matrix": {"L": [{"L": [{"N": "1"}, {"N": "2"}]}, {"L": [{"N": "3"}, {"N": "4"}]}]},
		"Things": {"L": [{"M": {"a": {"N": "1"}, "b": {"N": "2"}}}, {"M": {"a": {"N": "3"}}}]}
	}`
	names := `{"#pr": "ProductReviews", "#1star": "OneStar", "#sw": "Safety.Warning", "#c": "Comment"}`
	cases := []struct{ expr, want string }{
		{"Title, Price", `{"Title": {"S": "Bicycle 123"}, "Price": {"N": "500"}}`},
		{"Title, Absent", `{"Title": {"S": "Bicycle 123"}}`},
		{"Absent", `{}`},
		{"RelatedItems[0]", `{"RelatedItems": {"L": [{"N": "341"}]}}`},
		{"RelatedItems[2], RelatedItems[0]", `{"RelatedItems": {"L": [{"N": "341"}, {"N": "649"}]}}`},
		{"RelatedItems[1], RelatedItems[9]", `{"RelatedItems": {"L": [{"N": "472"}]}}`},
		{"RelatedItems[9]", `{}`},
		{"Pictures.FrontView, Pictures.SideView", `{"Pictures": {"M": {"FrontView": {"S": "f.jpg"}, "SideView": {"S": "s.jpg"}}}}`},
		{"Pictures.Absent", `{}`},
		{"#pr.FiveStar[1], #pr.#1star", `{"ProductReviews": {"M": {
			"FiveStar": {"L": [{"S": "Do yourself a favor"}]},
			"OneStar": {"L": [{"S": "Terrible product!"}, {"S": "No good"}]}}}}`},
		{"#sw", `{"Safety.Warning": {"S": "Always wear a helmet"}}`},
		{"Matrix[1][0], Matrix[0][1]", `{"Matrix": {"L": [{"L": [{"N": "2"}]}, {"L": [{"N": "3"}]}]}}`},
		{"Things[0].b, Things[1].b", `{"Things": {"L": [{"M": {"b": {"N": "2"}}}]}}`},
		{"Things[1].a, Things[0].a", `{"Things": {"L": [{"M": {"a": {"N": "1"}}}, {"M": {"a": {"N": "3"}}}]}}`},
		{"Title.x, Price[0], Pictures[0]", `{}`},
		{"Id,Title , Price", `{"Id": {"N": "123"}, "Title": {"S": "Bicycle 123"}, "Price": {"N": "500"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			p := params(t, names, "")
			pr, err := ParseProjection(tc.expr, p)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			src := item(t, in)
			got := pr.Apply(src)
			if g, w := itemJSON(t, got), canon(t, tc.want); g != w {
				t.Fatalf("got  %s\nwant %s", g, w)
			}
			// The projection is a copy: changing it leaves the item alone.
			for _, v := range got {
				if v.M != nil {
					for k := range v.M {
						delete(v.M, k)
					}
				}
				for i := range v.L {
					v.L[i] = nil
				}
			}
			if g, w := itemJSON(t, src), canon(t, in); g != w {
				t.Fatalf("changing the projection changed the item")
			}
		})
	}
	pr, err := ParseProjection("Title", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := pr.Apply(nil); got != nil {
		t.Fatalf("no item: got %v, want nil", got)
	}
}

// Overlapping paths, reserved words and undefined names are refused in projections too.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ProjectionExpressions.html
func TestProjectionErrors(t *testing.T) {
	const p = "Invalid ProjectionExpression: "
	cases := []struct{ expr, want string }{
		{"a, a", p + "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a], path two: [a]"},
		{"a.b, a", p + "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a, b], path two: [a]"},
		{"a[0], a.b", p + "Two document paths conflict with each other; must remove or rewrite one of these paths; path one: [a, [0]], path two: [a, b]"},
		{"Comment", p + "Attribute name is a reserved keyword; reserved keyword: Comment"},
		{"#x", p + "An expression attribute name used in the document path is not defined; attribute name: #x"},
		{":v", p + `Syntax error; token: ":v", near: ":v"`},
		{"", p + "The expression can not be empty;"},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			_, err := ParseProjection(tc.expr, params(t, "", `{":v":{"N":"1"}}`))
			wantErr(t, err, tc.want)
		})
	}
}
