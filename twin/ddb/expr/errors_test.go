package expr

import (
	"strings"
	"testing"
)

// Syntax errors name the offending token and the text from the token before it to
// the token after it. The expected messages are real AWS answers quoted in public
// bug reports: github.com/floci-io/floci/issues/1512 ("a-b"), github.com/aws/aws-cdk/issues/7591
// ("ADD hits : incr"), github.com/truora/minidyn/issues/21 (NOT without an operand),
// github.com/nubo-db/dynoxide/issues/12 ("INVALID SYNTAX HERE"),
// github.com/ServiceStack/ServiceStack.Aws/issues/5 ("()").
func TestSyntaxErrors(t *testing.T) {
	cases := []struct {
		kind, expr, want string
	}{
		{"ConditionExpression", "a-b", `Invalid ConditionExpression: Syntax error; token: "-", near: "a-b"`},
		{"FilterExpression", "a-b", `Invalid FilterExpression: Syntax error; token: "-", near: "a-b"`},
		{"KeyConditionExpression", "a-b", `Invalid KeyConditionExpression: Syntax error; token: "-", near: "a-b"`},
		{"UpdateExpression", "a-b", `Invalid UpdateExpression: Syntax error; token: "a", near: "a-"`},
		{"UpdateExpression", "ADD hits : incr", `Invalid UpdateExpression: Syntax error; token: ":", near: "hits : incr"`},
		{"UpdateExpression", "INVALID SYNTAX HERE", `Invalid UpdateExpression: Syntax error; token: "INVALID", near: "INVALID SYNTAX"`},
		{"UpdateExpression", "SET path = VALUE 1", `Invalid UpdateExpression: Syntax error; token: "1", near: "VALUE 1"`},
		{"ConditionExpression", "attribute_exists(car_id) AND NOT #h", `Invalid ConditionExpression: Syntax error; token: "<EOF>", near: "#h"`},
		{"KeyConditionExpression", "contains()", `Invalid KeyConditionExpression: Syntax error; token: ")", near: "()"`},
		{"ConditionExpression", "a = = b", `Invalid ConditionExpression: Syntax error; token: "=", near: "= = b"`},
		{"ConditionExpression", "a = :v AND", `Invalid ConditionExpression: Syntax error; token: "<EOF>", near: "AND"`},
		{"ConditionExpression", "a = :v b = :v", `Invalid ConditionExpression: Syntax error; token: "b", near: ":v b ="`},
		{"ConditionExpression", "a & b", `Invalid ConditionExpression: Syntax error; token: "&", near: "a & b"`},
		{"ConditionExpression", "a = :v)", `Invalid ConditionExpression: Syntax error; token: ")", near: ":v)"`},
		{"ConditionExpression", "(a = :v", `Invalid ConditionExpression: Syntax error; token: "<EOF>", near: ":v"`},
		{"ConditionExpression", "a[x] = :v", `Invalid ConditionExpression: Syntax error; token: "x", near: "[x]"`},
		{"ConditionExpression", "a[-1] = :v", `Invalid ConditionExpression: Syntax error; token: "-", near: "[-1"`},
		{"ConditionExpression", "a BETWEEN :v OR :v", `Invalid ConditionExpression: Syntax error; token: "OR", near: ":v OR :v"`},
		{"ConditionExpression", "a IN :v", `Invalid ConditionExpression: Syntax error; token: ":v", near: "IN :v"`},
		{"ConditionExpression", "a IN ()", `Invalid ConditionExpression: Syntax error; token: ")", near: "()"`},
		{"ConditionExpression", "a", `Invalid ConditionExpression: Syntax error; token: "<EOF>", near: "a"`},
		{"ConditionExpression", "a = :v # b", `Invalid ConditionExpression: Syntax error; token: "#", near: ":v # b"`},
		{"ConditionExpression", "a = 1", `Invalid ConditionExpression: Syntax error; token: "1", near: "= 1"`},
		{"ConditionExpression", "a.1 = :v", `Invalid ConditionExpression: Syntax error; token: "1", near: ".1 ="`},
		{"ConditionExpression", "NOT (a)", `Invalid ConditionExpression: Syntax error; token: "<EOF>", near: ")"`},
		{"ConditionExpression", "a = :v é", `Invalid ConditionExpression: Syntax error; token: "é", near: ":v é"`},
		{"UpdateExpression", "SET a = :v b = :v", `Invalid UpdateExpression: Syntax error; token: "b", near: ":v b ="`},
		{"UpdateExpression", "SET a = (:v)", `Invalid UpdateExpression: Syntax error; token: "(", near: "= (:v"`},
		{"UpdateExpression", "SET", `Invalid UpdateExpression: Syntax error; token: "<EOF>", near: "SET"`},
		{"UpdateExpression", "SET a", `Invalid UpdateExpression: Syntax error; token: "<EOF>", near: "a"`},
		{"UpdateExpression", "REMOVE a b", `Invalid UpdateExpression: Syntax error; token: "b", near: "a b"`},
		{"UpdateExpression", "ADD a b", `Invalid UpdateExpression: Syntax error; token: "b", near: "a b"`},
		{"UpdateExpression", "SET a = :v + :v + :v", `Invalid UpdateExpression: Syntax error; token: "+", near: ":v + :v"`},
		{"ProjectionExpression", "a b", `Invalid ProjectionExpression: Syntax error; token: "b", near: "a b"`},
		{"ProjectionExpression", "a,", `Invalid ProjectionExpression: Syntax error; token: "<EOF>", near: ","`},
		{"ProjectionExpression", "a = :v", `Invalid ProjectionExpression: Syntax error; token: "=", near: "a = :v"`},
	}
	for _, tc := range cases {
		t.Run(tc.kind+"/"+tc.expr, func(t *testing.T) {
			wantErr(t, parseAny(t, tc.kind, tc.expr, params(t, `{"#h":"h"}`, `{":v":{"N":"1"},":incr":{"N":"1"}}`)), tc.want)
		})
	}
}

func parseAny(t testing.TB, kind, expr string, p *Params) error {
	t.Helper()
	var err error
	switch kind {
	case "UpdateExpression":
		_, err = ParseUpdate(expr, p)
	case "ProjectionExpression":
		_, err = ParseProjection(expr, p)
	case "KeyConditionExpression":
		_, err = ParseKeyCondition(expr, p)
	default:
		_, err = ParseCondition(expr, kind, p)
	}
	return err
}

// Errors AWS gives for expressions that parse but are wrong, by the documentation of
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.OperatorsAndFunctions.html
// and the limits of
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html#limits-expression-parameters
// Wordings marked (seen) are quoted from real AWS answers in public bug reports; the
// others follow AWS's message pattern and are not verified against AWS.
func TestConditionErrors(t *testing.T) {
	const vals = `{":v":{"N":"1"},":s":{"S":"x"},":five":{"N":"5"},":one":{"N":"1"},":bad":{"S":"XX"},":l":{"L":[]}}`
	long := "a = :v" + strings.Repeat(" ", 4091)
	in101 := "a IN (:v" + strings.Repeat(", :v", 100) + ")"
	ops301 := "a = :v" + strings.Repeat(" OR a = :v", 150) // 151 comparisons + 150 ORs
	deep := "a" + strings.Repeat(".b", 32) + " = :v"
	cases := []struct {
		expr, want string
	}{
		{"", "Invalid ConditionExpression: The expression can not be empty;"},
		{"   ", "Invalid ConditionExpression: The expression can not be empty;"},
		{long, "Invalid ConditionExpression: Expression size has exceeded the maximum allowed size; expression size: 4097"}, // (seen) github.com/pynamodb/PynamoDB/issues/979
		{in101, "Invalid ConditionExpression: The IN operator is provided with too many operands; number of operands: 101"}, // (seen) github.com/reapit/foundations/issues/8255
		{ops301, "Invalid ConditionExpression: The expression contains too many operators; operator count: 301"},            // (seen) github.com/aws/aws-sdk-js/issues/3721
		{"((a = :v))", "Invalid ConditionExpression: The expression has redundant parentheses;"},                            // (seen) github.com/ExtendDB/extenddb/issues/64
		{"a = :v AND ((b = :v OR c = :v))", "Invalid ConditionExpression: The expression has redundant parentheses;"},       // (seen) github.com/SamVerschueren/dynongo/issues/35
		{"status = :v", "Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: status"},      // (seen)
		{"a.Name = :v", "Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: Name"},
		{"a = :nope", "Invalid ConditionExpression: An expression attribute value used in expression is not defined; attribute value: :nope"}, // (seen) github.com/dynamoose/dynamoose/issues/1403
		{"#nope = :v", "Invalid ConditionExpression: An expression attribute name used in the document path is not defined; attribute name: #nope"},
		{"a = :v AND b = ", `Invalid ConditionExpression: Syntax error; token: "<EOF>", near: "="`}, // a syntax error wins over others
		{"foo(a)", "Invalid ConditionExpression: Invalid function name; function: foo"},
		{"ATTRIBUTE_EXISTS(a)", "Invalid ConditionExpression: Invalid function name; function: ATTRIBUTE_EXISTS"},
		{"size(a)", "Invalid ConditionExpression: The function is not allowed to be used this way in an expression; function: size"},
		{"attribute_exists(a) = :v", "Invalid ConditionExpression: The function is not allowed to be used this way in an expression; function: attribute_exists"},
		{"if_not_exists(a, :v) = :v", "Invalid ConditionExpression: The function is not allowed to be used this way in an expression; function: if_not_exists"},
		{"contains(size(a), :v)", "Invalid ConditionExpression: The function is not allowed to be used this way in an expression; function: size"},
		{"begins_with(a)", "Invalid ConditionExpression: Incorrect number of operands for operator or function; operator or function: begins_with, number of operands: 1"},
		{"attribute_exists(a, b)", "Invalid ConditionExpression: Incorrect number of operands for operator or function; operator or function: attribute_exists, number of operands: 2"},
		{"attribute_exists(:v)", "Invalid ConditionExpression: Operator or function requires a document path; operator or function: attribute_exists"},
		{"size(:v) = :v", "Invalid ConditionExpression: Incorrect operand type for operator or function; operator or function: size, operand type: N"},
		{"begins_with(:v, a)", "Invalid ConditionExpression: Incorrect operand type for operator or function; operator or function: begins_with, operand type: N"},
		{"a < :l", "Invalid ConditionExpression: Incorrect operand type for operator or function; operator or function: <, operand type: L"},
		{":l >= a", "Invalid ConditionExpression: Incorrect operand type for operator or function; operator or function: >=, operand type: L"},
		{"a BETWEEN :l AND :v", "Invalid ConditionExpression: Incorrect operand type for operator or function; operator or function: BETWEEN, operand type: L"},
		{"begins_with(a, :v)", "Invalid ConditionExpression: Incorrect operand type for operator or function; operator or function: begins_with, operand type: N"},
		{"attribute_type(a, :bad)", "Invalid ConditionExpression: Invalid attribute type name found; type: XX, valid types: { B, NULL, SS, BOOL, L, BS, N, NS, S, M }"},
		{"attribute_type(a, :v)", "Invalid ConditionExpression: Incorrect operand type for operator or function; operator or function: attribute_type, operand type: N"},
		{"a BETWEEN :five AND :one", "Invalid ConditionExpression: The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: {N:5}, upper bound operand: AttributeValue: {N:1}"},
		{"a = a", "Invalid ConditionExpression: The first operand must be distinct from the remaining operands for this operator or function; operator: =, first operand: [a]"},
		{"contains(a.b, a.b)", "Invalid ConditionExpression: The first operand must be distinct from the remaining operands for this operator or function; operator: contains, first operand: [a, b]"},
		{deep, "Invalid ConditionExpression: The document path has too many nesting levels; nesting levels: 33"},
	}
	for _, tc := range cases {
		name := tc.expr
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			_, err := ParseCondition(tc.expr, "ConditionExpression", params(t, "", vals))
			wantErr(t, err, tc.want)
		})
	}
	// At the limits: exactly 4096 bytes, 100 IN operands, 300 operators, 32 path elements.
	for _, ok := range []string{
		long[:4096],
		"a IN (:v" + strings.Repeat(", :v", 99) + ")",
		"NOT a = :v" + strings.Repeat(" OR a = :v", 149),
		"a" + strings.Repeat(".b", 31) + " = :v",
		"(a = :v) AND (b = :v OR c = :v)",
		"((a = :v) AND (b = :v)) OR (c = :v)",
	} {
		if _, err := ParseCondition(ok, "ConditionExpression", params(t, "", vals)); err != nil {
			t.Errorf("%.40s…: %v", ok, err)
		}
	}
}

// Expression attribute names and values must each be used, and used ones defined.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ExpressionAttributeNames.html
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ExpressionAttributeValues.html
func TestParamsUnused(t *testing.T) {
	p := params(t, `{"#a":"a","#b":"b","#c":"c"}`, `{":v":{"N":"1"},":w":{"N":"2"},":x":{"N":"3"}}`)
	if _, err := ParseCondition("#a = :v", "ConditionExpression", p); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseUpdate("SET #b = :w", p); err != nil {
		t.Fatal(err)
	}
	wantErr(t, p.CheckUnused(), "Value provided in ExpressionAttributeNames unused in expressions: keys: {#c}")
	if _, err := ParseProjection("#c", p); err != nil {
		t.Fatal(err)
	}
	wantErr(t, p.CheckUnused(), "Value provided in ExpressionAttributeValues unused in expressions: keys: {:x}")

	p = params(t, `{"#z":"z","#y":"y"}`, "")
	wantErr(t, p.CheckUnused(), "Value provided in ExpressionAttributeNames unused in expressions: keys: {#y, #z}")

	p = params(t, `{"#a":"a"}`, `{":v":{"N":"1"}}`)
	if _, err := ParseKeyCondition("#a = :v", p); err != nil {
		t.Fatal(err)
	}
	if err := p.CheckUnused(); err != nil {
		t.Fatalf("all used: got %v", err)
	}
	if err := NewParams(nil, nil).CheckUnused(); err != nil {
		t.Fatalf("no params: got %v", err)
	}
}

// Every word of https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ReservedWords.html
// is refused unescaped, in any case, and accepted as a #name.
func TestReservedWords(t *testing.T) {
	words := strings.Fields(reservedWords)
	if len(words) != 573 {
		t.Fatalf("got %d reserved words, want the page's 573", len(words))
	}
	for _, w := range append(words, "status", "Size", "name") {
		_, err := ParseProjection(w, nil)
		wantErr(t, err, "Invalid ProjectionExpression: Attribute name is a reserved keyword; reserved keyword: "+w)
	}
	for _, ok := range []string{"statuses", "nam", "pk", "sk", "a_status", "ABORTED", "zones"} {
		if _, err := ParseProjection(ok, nil); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	p := params(t, `{"#s":"status"}`, `{":v":{"S":"x"}}`)
	if _, err := ParseCondition("#s = :v", "FilterExpression", p); err != nil {
		t.Fatal(err)
	}
}
