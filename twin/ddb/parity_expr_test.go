package ddb_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/twin/ddb"
)

// exprSeed is the item every expression case reads or updates: one attribute of every
// type, nested maps and lists, a name with a dot and a reserved word as a name.
func exprSeed(pk string) item {
	return item{
		"pk":     s(pk),
		"s":      s("hello world"),
		"n":      n("10"),
		"neg":    n("-5"),
		"b":      bin(1, 2, 3),
		"t":      boolv(true),
		"nul":    null(),
		"l":      list(s("a"), n("2"), mapv(item{"m": s("x")})),
		"m":      mapv(item{"a": mapv(item{"b": mapv(item{"c": s("deep")})}), "n": n("1")}),
		"ss":     ss("a", "b", "c"),
		"ns":     ns("1", "2", "3"),
		"bs":     bs([]byte{1}, []byte{2}),
		"a.b":    s("dotted"),
		"status": s("active"),
		"es":     s(""),
	}
}

// exprValues are the ExpressionAttributeValues the condition cases draw from (each case
// sends only those it uses, since AWS rejects unused ones).
var exprValues = item{
	":one": n("1"), ":two": n("2"), ":three": n("3"), ":nine": n("9"), ":ten": n("10"), ":eleven": n("11"),
	":tenS": s("10"), ":hw": s("hello world"), ":hel": s("hel"), ":wor": s("wor"), ":t": s("t"), ":a": s("a"),
	":z": s("z"), ":x": s("x"), ":deep": s("deep"), ":nope": s("nope"), ":dotted": s("dotted"),
	":b12": bin(1, 2), ":b4": bin(4), ":active": s("active"), ":N": s("N"), ":SS": s("SS"), ":NULL": s("NULL"),
	":L": s("L"), ":M": s("M"), ":BOOL": s("BOOL"), ":S": s("S"), ":B": s("B"), ":NS": s("NS"), ":BS": s("BS"),
	":ssrev": ss("c", "b", "a"), ":lrev": list(mapv(item{"m": s("x")}), n("2"), s("a")), ":mab": mapv(item{"b": mapv(item{"c": s("deep")})}),
	":true": boolv(true), ":negfive": n("-5"), ":zero": n("0"), ":empty": s(""), ":minusten": n("-10"),
}

// used returns the values named in keys.
func used(keys ...string) item {
	out := item{}
	for _, k := range keys {
		v, ok := exprValues[k]
		if !ok {
			panic("no expression value " + k)
		}
		out[k] = v
	}
	return out
}

// TestParityConditionOperators evaluates one condition per case as a FilterExpression
// on a Query of the seed item (Count 1: true, 0: false). Filter and condition
// expressions share one grammar (Expressions.OperatorsAndFunctions).
func TestParityConditionOperators(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{})
	p.put(tbl, exprSeed("e1"))

	cases := []struct {
		expr   string
		names  map[string]string
		values []string
		want   bool
		doc    string
	}{
		{"n = :ten", nil, []string{":ten"}, true, docOperators},
		{"n <> :ten", nil, []string{":ten"}, false, docOperators},
		{"n < :eleven", nil, []string{":eleven"}, true, docOperators},
		{"n <= :ten", nil, []string{":ten"}, true, docOperators},
		{"n > :nine", nil, []string{":nine"}, true, docOperators},
		{"n >= :eleven", nil, []string{":eleven"}, false, docOperators},
		{"neg < :zero", nil, []string{":zero"}, true, docOperators},
		{"neg > :minusten", nil, []string{":minusten"}, true, docOperators},
		{"s < :t", nil, []string{":t"}, true, docOperators},        // "hello world" < "t" bytewise
		{"b < :b4", nil, []string{":b4"}, true, docOperators},      // 0x010203 < 0x04
		{"n = :tenS", nil, []string{":tenS"}, false, docOperators}, // N vs S: different types are never equal
		{"n < :tenS", nil, []string{":tenS"}, false, docOperators},
		{"n BETWEEN :nine AND :eleven", nil, []string{":nine", ":eleven"}, true, docOperators},
		{"s BETWEEN :a AND :z", nil, []string{":a", ":z"}, true, docOperators},
		{"n IN (:one, :ten)", nil, []string{":one", ":ten"}, true, docOperators},
		{"n IN (:one, :two)", nil, []string{":one", ":two"}, false, docOperators},
		{"attribute_exists(m.a.b.c)", nil, nil, true, docOperators},
		{"attribute_exists(m.a.zz)", nil, nil, false, docOperators},
		{"attribute_not_exists(nope)", nil, nil, true, docOperators},
		{"attribute_exists(l[2].m)", nil, nil, true, docDocPaths},
		{"attribute_exists(l[3])", nil, nil, false, docDocPaths},
		{"attribute_exists(es)", nil, nil, true, docDataTypes}, // an empty non-key string is a value
		{"attribute_type(n, :N)", nil, []string{":N"}, true, docOperators},
		{"attribute_type(n, :S)", nil, []string{":S"}, false, docOperators},
		{"attribute_type(ss, :SS)", nil, []string{":SS"}, true, docOperators},
		{"attribute_type(ns, :NS)", nil, []string{":NS"}, true, docOperators},
		{"attribute_type(bs, :BS)", nil, []string{":BS"}, true, docOperators},
		{"attribute_type(nul, :NULL)", nil, []string{":NULL"}, true, docOperators},
		{"attribute_type(l, :L)", nil, []string{":L"}, true, docOperators},
		{"attribute_type(m, :M)", nil, []string{":M"}, true, docOperators},
		{"attribute_type(t, :BOOL)", nil, []string{":BOOL"}, true, docOperators},
		{"attribute_type(b, :B)", nil, []string{":B"}, true, docOperators},
		{"begins_with(s, :hel)", nil, []string{":hel"}, true, docOperators},
		{"begins_with(s, :wor)", nil, []string{":wor"}, false, docOperators},
		{"begins_with(b, :b12)", nil, []string{":b12"}, true, docOperators},
		{"contains(s, :wor)", nil, []string{":wor"}, true, docOperators}, // substring
		{"contains(ss, :a)", nil, []string{":a"}, true, docOperators},    // set member
		{"contains(ss, :z)", nil, []string{":z"}, false, docOperators},
		{"contains(ns, :two)", nil, []string{":two"}, true, docOperators},   // number set member
		{"contains(l, :a)", nil, []string{":a"}, true, docOperators},        // list element
		{"size(s) = :eleven", nil, []string{":eleven"}, true, docOperators}, // "hello world"
		{"size(b) = :three", nil, []string{":three"}, true, docOperators},
		{"size(l) = :three", nil, []string{":three"}, true, docOperators},
		{"size(m) = :two", nil, []string{":two"}, true, docOperators},
		{"size(ss) = :three", nil, []string{":three"}, true, docOperators},
		{"size(es) = :zero", nil, []string{":zero"}, true, docOperators},
		{"NOT n = :ten", nil, []string{":ten"}, false, docOperators},
		{"NOT attribute_exists(nope)", nil, nil, true, docOperators},
		{"n = :ten AND s = :hw", nil, []string{":ten", ":hw"}, true, docOperators},
		{"n = :one OR s = :hw", nil, []string{":one", ":hw"}, true, docOperators},
		// Precedence: AND binds tighter than OR.
		{"n = :ten OR n = :one AND s = :nope", nil, []string{":ten", ":one", ":nope"}, true, docOperators},
		{"(n = :ten OR n = :one) AND s = :nope", nil, []string{":ten", ":one", ":nope"}, false, docOperators},
		// NOT binds tighter than AND.
		{"NOT n = :ten AND s = :nope", nil, []string{":ten", ":nope"}, false, docOperators},
		{"m.a.b.c = :deep", nil, []string{":deep"}, true, docDocPaths},
		{"l[2].m = :x", nil, []string{":x"}, true, docDocPaths},
		{"l[0] = :a", nil, []string{":a"}, true, docDocPaths},
		{"#d = :dotted", map[string]string{"#d": "a.b"}, []string{":dotted"}, true, docAttrNames},
		{"attribute_not_exists(a.b)", nil, nil, true, docAttrNames}, // a.b unquoted is a path into map a
		{"#st = :active", map[string]string{"#st": "status"}, []string{":active"}, true, docReserved},
		{"#m.#a.b.c = :deep", map[string]string{"#m": "m", "#a": "a"}, []string{":deep"}, true, docAttrNames},
		{"t = :true", nil, []string{":true"}, true, docOperators},
		{"ss = :ssrev", nil, []string{":ssrev"}, true, docOperators}, // a set is unordered
		{"l = :lrev", nil, []string{":lrev"}, false, docOperators},   // a list is ordered
		{"m.a = :mab", nil, []string{":mab"}, true, docOperators},
		{"size(nope) = :zero", nil, []string{":zero"}, false, docOperators},
		{"nope = :zero", nil, []string{":zero"}, false, docOperators},
	}
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			in := &dynamodb.QueryInput{
				TableName:                 aws.String(tbl),
				KeyConditionExpression:    aws.String("pk = :pk"),
				FilterExpression:          aws.String(c.expr),
				ExpressionAttributeValues: used(c.values...),
				ConsistentRead:            aws.Bool(true),
			}
			in.ExpressionAttributeValues[":pk"] = s("e1")
			if c.names != nil {
				in.ExpressionAttributeNames = c.names
			}
			out, err := p.c.Query(p.ctx, in)
			if !wantOK(t, c.expr, err, c.doc) {
				return
			}
			if got := out.Count == 1; got != c.want {
				t.Errorf("%s: got %v, want %v (doc %s)", c.expr, got, c.want, c.doc)
			}
			if out.ScannedCount != 1 {
				t.Errorf("%s: ScannedCount got %d, want 1 (filter applies after the read) (doc %s)", c.expr, out.ScannedCount, docQueryOther)
			}
		})
	}
}

// TestParityExpressionErrors: the ValidationException wording for names and values a
// request gets wrong.
func TestParityExpressionErrors(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{})
	p.put(tbl, exprSeed("e1"))
	key := item{"pk": s("e1")}

	type call func() error
	update := func(expr string, names map[string]string, values item) call {
		return func() error {
			in := &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: key, UpdateExpression: aws.String(expr)}
			if names != nil {
				in.ExpressionAttributeNames = names
			}
			if values != nil {
				in.ExpressionAttributeValues = values
			}
			_, err := p.c.UpdateItem(p.ctx, in)
			return err
		}
	}
	condPut := func(expr string, names map[string]string, values item) call {
		return func() error {
			in := &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: exprSeed("e1"), ConditionExpression: aws.String(expr)}
			if names != nil {
				in.ExpressionAttributeNames = names
			}
			if values != nil {
				in.ExpressionAttributeValues = values
			}
			_, err := p.c.PutItem(p.ctx, in)
			return err
		}
	}
	getProj := func(expr string, names map[string]string) call {
		return func() error {
			in := &dynamodb.GetItemInput{TableName: aws.String(tbl), Key: key, ProjectionExpression: aws.String(expr)}
			if names != nil {
				in.ExpressionAttributeNames = names
			}
			_, err := p.c.GetItem(p.ctx, in)
			return err
		}
	}

	cases := []struct {
		name      string
		do        call
		fragments []string
		doc       string
	}{
		{"reserved word in condition", condPut("status = :active", nil, used(":active")),
			[]string{"Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: status"}, docReserved},
		{"reserved word in update", update("SET status = :active", nil, used(":active")),
			[]string{"Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: status"}, docReserved},
		{"reserved word in projection", getProj("status", nil),
			[]string{"Invalid ProjectionExpression: Attribute name is a reserved keyword; reserved keyword: status"}, docReserved},
		{"undefined value", condPut("n = :missing", nil, used(":ten")),
			[]string{"An expression attribute value used in expression is not defined; attribute value: :missing"}, docAttrValues},
		{"undefined name", condPut("#missing = :ten", map[string]string{"#n": "n"}, used(":ten")),
			[]string{"An expression attribute name used in the document path is not defined; attribute name: #missing"}, docAttrNames},
		{"unused value", condPut("n = :ten", nil, used(":ten", ":one")),
			[]string{"Value provided in ExpressionAttributeValues unused in expressions: keys: {:one}"}, docAttrValues},
		{"unused name", condPut("n = :ten", map[string]string{"#unused": "x"}, used(":ten")),
			[]string{"Value provided in ExpressionAttributeNames unused in expressions: keys: {#unused}"}, docAttrNames},
		{"unused name in GetItem projection", getProj("s", map[string]string{"#unused": "x"}),
			[]string{"Value provided in ExpressionAttributeNames unused in expressions: keys: {#unused}"}, docAttrNames},
		{"syntax error", condPut("n = = :ten", nil, used(":ten")),
			[]string{"Invalid ConditionExpression: Syntax error; token:"}, docOperators},
		// "The maximum number of operands for the IN comparator is 100."
		{"IN with 101 operands", condPut("n IN ("+inList(101)+")", nil, inValues(101)),
			[]string{"The IN operator is provided with too many operands; number of operands: 101"}, docConstraints},
		{"projection: paths overlap", getProj("m, m.a", nil),
			[]string{"Invalid ProjectionExpression: Two document paths overlap with each other; must remove or rewrite one of these paths"}, docProjection},
		{"projection: same path twice", getProj("s, s", nil),
			[]string{"Two document paths overlap with each other"}, docProjection},
		{"update: two paths overlap", update("SET m.a = :x REMOVE m.a.b", nil, used(":x")),
			[]string{"Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths"}, docUpdateExpr},
		{"update: same path twice", update("SET n = :one, n = :two", nil, used(":one", ":two")),
			[]string{"Two document paths overlap with each other"}, docUpdateExpr},
		{"update: key attribute", update("SET pk = :x", nil, used(":x")),
			[]string{"Cannot update attribute pk. This attribute is part of the key"}, docAPIUpdate},
		{"update: path through a missing map", update("SET m.zz.yy = :x", nil, used(":x")),
			[]string{"The document path provided in the update expression is invalid for update"}, docUpdateExpr},
		{"update: list index into a string", update("SET s[0] = :x", nil, used(":x")),
			[]string{"The document path provided in the update expression is invalid for update"}, docUpdateExpr},
		{"update: map key into a list", update("SET l.x = :x", nil, used(":x")),
			[]string{"The document path provided in the update expression is invalid for update"}, docUpdateExpr},
		{"update: + on a missing attribute", update("SET x = nope + :one", nil, used(":one")),
			[]string{"The provided expression refers to an attribute that does not exist in the item"}, docUpdateExpr},
		{"update: list_append of a missing attribute", update("SET x = list_append(nope, :a)", nil, item{":a": list(s("a"))}),
			[]string{"The provided expression refers to an attribute that does not exist in the item"}, docUpdateExpr},
		{"update: ADD a number set to a string set", update("ADD ss :v", nil, item{":v": ns("1")}),
			[]string{"An operand in the update expression has an incorrect data type"}, docUpdateExpr},
		{"update: + on a string", update("SET n = s + :one", nil, used(":one")),
			[]string{"An operand in the update expression has an incorrect data type"}, docUpdateExpr},
		{"update: ADD a number to a string", update("ADD s :one", nil, used(":one")),
			[]string{"An operand in the update expression has an incorrect data type"}, docUpdateExpr},
		{"update: ADD a list", update("ADD l :a", nil, item{":a": list(s("a"))}),
			[]string{"Invalid UpdateExpression: Incorrect operand type for operator or function; operator: ADD, operand type: LIST"}, docUpdateExpr},
		{"update: DELETE from a string", update("DELETE s :a", nil, item{":a": ss("a")}),
			[]string{"An operand in the update expression has an incorrect data type"}, docUpdateExpr},
		{"update: list_append on a number", update("SET l = list_append(n, :a)", nil, item{":a": list(s("a"))}),
			[]string{"An operand in the update expression has an incorrect data type"}, docUpdateExpr},
		{"BETWEEN with bounds reversed", condPut("n BETWEEN :eleven AND :nine", nil, used(":nine", ":eleven")),
			[]string{"The BETWEEN operator requires upper bound to be greater than or equal to lower bound"}, docOperators},
		{"update: clause twice", update("SET n = :one SET s = :x", nil, used(":one", ":x")),
			[]string{"Invalid UpdateExpression: The \"SET\" section can only be used once in an update expression"}, docUpdateExpr},
		{"empty ExpressionAttributeValues", condPut("attribute_exists(n)", nil, item{}),
			[]string{"ExpressionAttributeValues must not be empty"}, docAttrValues},
		{"empty ExpressionAttributeNames", condPut("attribute_exists(n)", map[string]string{}, nil),
			[]string{"ExpressionAttributeNames must not be empty"}, docAttrNames},
		{"value placeholder without a colon", condPut("n = :ten", nil, item{":ten": n("10"), "ten": n("10")}),
			[]string{"ExpressionAttributeValues contains invalid key: Syntax error; key: \"ten\""}, docAttrValues},
		// "An expression attribute name must begin with a pound sign (#), and be followed
		// by one or more alphanumeric characters"; values likewise after a colon.
		{"name placeholder with a hyphen", condPut("#a-b = :ten", map[string]string{"#a-b": "n"}, used(":ten")),
			[]string{"ExpressionAttributeNames contains invalid key: Syntax error; key: \"#a-b\""}, docAttrNames},
		{"value placeholder with a hyphen", condPut("n = :t-en", nil, item{":t-en": n("10")}),
			[]string{"ExpressionAttributeValues contains invalid key: Syntax error; key: \":t-en\""}, docAttrValues},
		{"name placeholder without a hash", condPut("#n = :ten", map[string]string{"#n": "n", "n": "n"}, used(":ten")),
			[]string{"ExpressionAttributeNames contains invalid key: Syntax error; key: \"n\""}, docAttrNames},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantErr(t, c.name, c.do(), "ValidationException", c.doc, c.fragments...)
		})
	}
	// None of the failed requests changed the item.
	wantItem(t, "item after failed requests", p.get(tbl, key), exprSeed("e1"), docErrors)
}

// TestParityUpdateExpressions applies one update per case to a fresh seed item and
// compares the whole item after it (ReturnValues ALL_NEW and a strongly consistent read).
func TestParityUpdateExpressions(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{})

	with := func(changes item, remove ...string) item {
		it := exprSeed("u")
		for k, v := range changes {
			it[k] = v
		}
		for _, k := range remove {
			delete(it, k)
		}
		return it
	}
	cases := []struct {
		name   string
		expr   string
		names  map[string]string
		values item
		want   item
		doc    string
	}{
		{"SET number plus", "SET n = n + :one", nil, used(":one"), with(item{"n": n("11")}), docUpdateExpr},
		{"SET number minus", "SET n = n - :one", nil, used(":one"), with(item{"n": n("9")}), docUpdateExpr},
		{"SET value plus value", "SET x = :one + :two", nil, used(":one", ":two"), with(item{"x": n("3")}), docUpdateExpr},
		// Numbers are decimal with 38 digits of precision, not binary floating point.
		{"decimal arithmetic", "SET x = :a + :b", nil, item{":a": n("0.1"), ":b": n("0.2")}, with(item{"x": n("0.3")}), docDataTypes},
		{"decimal arithmetic at 38 digits", "SET x = :a - :b", nil, item{":a": n("1"), ":b": n("0.0000000000000000000000000000000000001")},
			with(item{"x": n("0.9999999999999999999999999999999999999")}), docDataTypes},
		{"SET new attribute", "SET x = :x", nil, used(":x"), with(item{"x": s("x")}), docUpdateExpr},
		{"SET copies another attribute", "SET x = s", nil, nil, with(item{"x": s("hello world")}), docUpdateExpr},
		{"SET nested map path", "SET m.a.b.c = :x", nil, used(":x"),
			with(item{"m": mapv(item{"a": mapv(item{"b": mapv(item{"c": s("x")})}), "n": n("1")})}), docUpdateExpr},
		{"SET new key in nested map", "SET m.a.z = :x", nil, used(":x"),
			with(item{"m": mapv(item{"a": mapv(item{"b": mapv(item{"c": s("deep")}), "z": s("x")}), "n": n("1")})}), docUpdateExpr},
		{"SET list element", "SET l[1] = :x", nil, used(":x"),
			with(item{"l": list(s("a"), s("x"), mapv(item{"m": s("x")}))}), docUpdateExpr},
		{"SET list index past the end appends", "SET l[10] = :x", nil, used(":x"),
			with(item{"l": list(s("a"), n("2"), mapv(item{"m": s("x")}), s("x"))}), docUpdateExpr},
		{"SET inside list element map", "SET l[2].m = :a", nil, used(":a"),
			with(item{"l": list(s("a"), n("2"), mapv(item{"m": s("a")}))}), docUpdateExpr},
		{"list_append at the end", "SET l = list_append(l, :more)", nil, item{":more": list(s("y"), s("z"))},
			with(item{"l": list(s("a"), n("2"), mapv(item{"m": s("x")}), s("y"), s("z"))}), docUpdateExpr},
		{"list_append at the front", "SET l = list_append(:more, l)", nil, item{":more": list(s("y"))},
			with(item{"l": list(s("y"), s("a"), n("2"), mapv(item{"m": s("x")}))}), docUpdateExpr},
		{"if_not_exists on a missing attribute", "SET c = if_not_exists(c, :zero)", nil, used(":zero"),
			with(item{"c": n("0")}), docUpdateExpr},
		{"if_not_exists on a present attribute", "SET n = if_not_exists(n, :zero)", nil, used(":zero"),
			exprSeed("u"), docUpdateExpr},
		{"if_not_exists plus", "SET c = if_not_exists(c, :zero) + :one", nil, used(":zero", ":one"),
			with(item{"c": n("1")}), docUpdateExpr},
		{"REMOVE attribute", "REMOVE s", nil, nil, with(nil, "s"), docUpdateExpr},
		{"REMOVE missing attribute is no error", "REMOVE nope", nil, nil, exprSeed("u"), docUpdateExpr},
		{"REMOVE list element shifts", "REMOVE l[0]", nil, nil,
			with(item{"l": list(n("2"), mapv(item{"m": s("x")}))}), docUpdateExpr},
		{"REMOVE past the end of a list is no error", "REMOVE l[10]", nil, nil, exprSeed("u"), docUpdateExpr},
		{"REMOVE two list elements", "REMOVE l[0], l[2]", nil, nil, with(item{"l": list(n("2"))}), docUpdateExpr},
		{"REMOVE nested", "REMOVE m.a.b.c", nil, nil,
			with(item{"m": mapv(item{"a": mapv(item{"b": mapv(item{})}), "n": n("1")})}), docUpdateExpr},
		{"ADD to number", "ADD n :one", nil, used(":one"), with(item{"n": n("11")}), docUpdateExpr},
		{"ADD negative", "ADD n :negfive", nil, used(":negfive"), with(item{"n": n("5")}), docUpdateExpr},
		{"ADD creates number", "ADD c :two", nil, used(":two"), with(item{"c": n("2")}), docUpdateExpr},
		{"ADD to string set", "ADD ss :v", nil, item{":v": ss("c", "d")}, with(item{"ss": ss("a", "b", "c", "d")}), docUpdateExpr},
		{"ADD to number set", "ADD ns :v", nil, item{":v": ns("4")}, with(item{"ns": ns("1", "2", "3", "4")}), docUpdateExpr},
		{"ADD creates set", "ADD newss :v", nil, item{":v": ss("q")}, with(item{"newss": ss("q")}), docUpdateExpr},
		{"DELETE from set", "DELETE ss :v", nil, item{":v": ss("a", "z")}, with(item{"ss": ss("b", "c")}), docUpdateExpr},
		{"DELETE from binary set", "DELETE bs :v", nil, item{":v": bs([]byte{1})}, with(item{"bs": bs([]byte{2})}), docUpdateExpr},
		{"DELETE every member removes the set", "DELETE ss :v", nil, item{":v": ss("a", "b", "c")}, with(nil, "ss"), docUpdateExpr},
		{"all four clauses", "SET x = :x REMOVE s ADD n :one DELETE ss :v", nil, item{":x": s("x"), ":one": n("1"), ":v": ss("a")},
			with(item{"x": s("x"), "n": n("11"), "ss": ss("b", "c")}, "s"), docUpdateExpr},
		{"clauses in any order", "DELETE ss :v ADD n :one REMOVE s SET x = :x", nil, item{":x": s("x"), ":one": n("1"), ":v": ss("a")},
			with(item{"x": s("x"), "n": n("11"), "ss": ss("b", "c")}, "s"), docUpdateExpr},
		{"names with a dot and a reserved word", "SET #d = :x, #st = :x", map[string]string{"#d": "a.b", "#st": "status"}, used(":x"),
			with(item{"a.b": s("x"), "status": s("x")}), docAttrNames},
		{"SET BOOL and NULL", "SET t = :f, nul = :x", nil, item{":f": boolv(false), ":x": null()},
			with(item{"t": boolv(false), "nul": null()}), docUpdateExpr},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p.put(tbl, exprSeed("u"))
			in := &dynamodb.UpdateItemInput{
				TableName: aws.String(tbl), Key: item{"pk": s("u")},
				UpdateExpression: aws.String(c.expr), ReturnValues: types.ReturnValueAllNew,
			}
			if c.names != nil {
				in.ExpressionAttributeNames = c.names
			}
			if c.values != nil {
				in.ExpressionAttributeValues = c.values
			}
			out, err := p.c.UpdateItem(p.ctx, in)
			if !wantOK(t, c.expr, err, c.doc) {
				return
			}
			wantItem(t, c.expr+" (ALL_NEW)", out.Attributes, c.want, c.doc)
			wantItem(t, c.expr+" (stored)", p.get(tbl, item{"pk": s("u")}), c.want, c.doc)
		})
	}

	t.Run("update creates the item (upsert)", func(t *testing.T) {
		out, err := p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(tbl), Key: item{"pk": s("fresh")},
			UpdateExpression: aws.String("SET a = :x ADD c :one"), ExpressionAttributeValues: used(":x", ":one"),
			ReturnValues: types.ReturnValueAllNew,
		})
		if wantOK(t, "upsert", err, docAPIUpdate) {
			wantItem(t, "upsert", out.Attributes, item{"pk": s("fresh"), "a": s("x"), "c": n("1")}, docAPIUpdate)
		}
	})
}

// TestParityProjection: ProjectionExpression through GetItem, Query and Scan.
func TestParityProjection(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{})
	p.put(tbl, exprSeed("e1"))
	cases := []struct {
		expr  string
		names map[string]string
		want  item
		doc   string
	}{
		{"s, n", nil, item{"s": s("hello world"), "n": n("10")}, docProjection},
		{"m.a.b.c", nil, item{"m": mapv(item{"a": mapv(item{"b": mapv(item{"c": s("deep")})})})}, docProjection},
		{"m.n, m.a.b", nil, item{"m": mapv(item{"n": n("1"), "a": mapv(item{"b": mapv(item{"c": s("deep")})})})}, docProjection},
		{"l[2].m, l[0]", nil, item{"l": list(s("a"), mapv(item{"m": s("x")}))}, docProjection},
		{"l[1]", nil, item{"l": list(n("2"))}, docProjection},
		{"#d", map[string]string{"#d": "a.b"}, item{"a.b": s("dotted")}, docAttrNames},
		{"#st, ss", map[string]string{"#st": "status"}, item{"status": s("active"), "ss": ss("a", "b", "c")}, docReserved},
		{"nope, s", nil, item{"s": s("hello world")}, docProjection},
	}
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			in := &dynamodb.GetItemInput{TableName: aws.String(tbl), Key: item{"pk": s("e1")}, ProjectionExpression: aws.String(c.expr)}
			if c.names != nil {
				in.ExpressionAttributeNames = c.names
			}
			out, err := p.c.GetItem(p.ctx, in)
			if wantOK(t, c.expr, err, c.doc) {
				wantItem(t, "GetItem "+c.expr, out.Item, c.want, c.doc)
			}
			sin := &dynamodb.ScanInput{TableName: aws.String(tbl), ProjectionExpression: aws.String(c.expr)}
			if c.names != nil {
				sin.ExpressionAttributeNames = c.names
			}
			sout, err := p.c.Scan(p.ctx, sin)
			if wantOK(t, c.expr, err, c.doc) {
				if len(sout.Items) != 1 {
					t.Errorf("Scan %s: got %d items, want 1 (doc %s)", c.expr, len(sout.Items), c.doc)
				} else {
					wantItem(t, "Scan "+c.expr, sout.Items[0], c.want, c.doc)
				}
			}
		})
	}
}

// TestParityKeyConditions: the sort-key operators of KeyConditionExpression, and the
// errors for what a key condition may not say.
func TestParityKeyConditions(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{hash: "pk", hashType: "S", rng: "sk", rngType: "S"})
	for _, sk := range []string{"c", "ab", "a", "b", "abc"} {
		p.put(tbl, item{"pk": s("p"), "sk": s(sk), "v": s("v" + sk)})
	}
	p.put(tbl, item{"pk": s("other"), "sk": s("a")})
	ntbl := p.table(tableSpec{hash: "pk", hashType: "S", rng: "sk", rngType: "N"})

	cases := []struct {
		expr   string
		values item
		want   []string
	}{
		{"pk = :p", item{}, []string{"a", "ab", "abc", "b", "c"}},
		{"pk = :p AND sk = :v", item{":v": s("ab")}, []string{"ab"}},
		{"pk = :p AND sk < :v", item{":v": s("b")}, []string{"a", "ab", "abc"}},
		{"pk = :p AND sk <= :v", item{":v": s("b")}, []string{"a", "ab", "abc", "b"}},
		{"pk = :p AND sk > :v", item{":v": s("ab")}, []string{"abc", "b", "c"}},
		{"pk = :p AND sk >= :v", item{":v": s("b")}, []string{"b", "c"}},
		{"pk = :p AND sk BETWEEN :v AND :w", item{":v": s("ab"), ":w": s("b")}, []string{"ab", "abc", "b"}},
		{"pk = :p AND begins_with(sk, :v)", item{":v": s("ab")}, []string{"ab", "abc"}},
		{"(pk = :p) AND (sk > :v)", item{":v": s("b")}, []string{"c"}},
		{"#p = :p AND #s > :v", item{":v": s("b")}, []string{"c"}},
	}
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			c.values[":p"] = s("p")
			in := &dynamodb.QueryInput{
				TableName: aws.String(tbl), KeyConditionExpression: aws.String(c.expr), ExpressionAttributeValues: c.values,
			}
			if strings.Contains(c.expr, "#") {
				in.ExpressionAttributeNames = map[string]string{"#p": "pk", "#s": "sk"}
			}
			out, err := p.c.Query(p.ctx, in)
			if !wantOK(t, c.expr, err, docKeyCondition) {
				return
			}
			var got []string
			for _, it := range out.Items {
				got = append(got, render(it["sk"]))
			}
			var want []string
			for _, w := range c.want {
				want = append(want, render(s(w)))
			}
			if joinComma(got) != joinComma(want) {
				t.Errorf("%s: got %v, want %v (doc %s)", c.expr, got, want, docKeyCondition)
			}
		})
	}

	errs := []struct {
		name      string
		in        *dynamodb.QueryInput
		fragments []string
		doc       string
	}{
		{"missing partition key", &dynamodb.QueryInput{KeyConditionExpression: aws.String("sk = :v"), ExpressionAttributeValues: item{":v": s("a")}},
			[]string{"Query condition missed key schema element"}, docKeyCondition},
		{"<> is not a key condition", &dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p AND sk <> :v"), ExpressionAttributeValues: item{":p": s("p"), ":v": s("a")}},
			nil, docKeyCondition},
		{"OR is not a key condition", &dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p OR sk = :v"), ExpressionAttributeValues: item{":p": s("p"), ":v": s("a")}},
			nil, docKeyCondition},
		{"partition key by range", &dynamodb.QueryInput{KeyConditionExpression: aws.String("pk > :p"), ExpressionAttributeValues: item{":p": s("p")}},
			nil, docKeyCondition},
		{"non-key attribute", &dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p AND v = :v"), ExpressionAttributeValues: item{":p": s("p"), ":v": s("a")}},
			nil, docKeyCondition},
		{"filter on a key attribute", &dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p"), FilterExpression: aws.String("sk = :v"), ExpressionAttributeValues: item{":p": s("p"), ":v": s("a")}},
			[]string{"Filter Expression can only contain non-primary key attributes: Primary key attribute: sk"}, docQueryFilter},
		{"BETWEEN with bounds reversed", &dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p AND sk BETWEEN :b AND :a"), ExpressionAttributeValues: item{":p": s("p"), ":a": s("a"), ":b": s("b")}},
			[]string{"The BETWEEN operator requires upper bound to be greater than or equal to lower bound"}, docKeyCondition},
		{"begins_with on a number sort key", &dynamodb.QueryInput{TableName: aws.String(ntbl), KeyConditionExpression: aws.String("pk = :p AND begins_with(sk, :v)"), ExpressionAttributeValues: item{":p": s("p"), ":v": n("1")}},
			[]string{"begins_with"}, docKeyCondition},
		{"key value of the wrong type", &dynamodb.QueryInput{KeyConditionExpression: aws.String("pk = :p"), ExpressionAttributeValues: item{":p": n("1")}},
			[]string{"Condition parameter type does not match schema type"}, docKeyCondition},
	}
	for _, c := range errs {
		t.Run(c.name, func(t *testing.T) {
			if c.in.TableName == nil {
				c.in.TableName = aws.String(tbl)
			}
			_, err := p.c.Query(p.ctx, c.in)
			wantErr(t, c.name, err, "ValidationException", c.doc, c.fragments...)
		})
	}
}

func joinComma(v []string) string {
	out := ""
	for i, s := range v {
		if i > 0 {
			out += ","
		}
		out += s
	}
	return out
}

// inList returns ":v0, :v1, …" with k placeholders; inValues their values.
func inList(k int) string {
	parts := make([]string, k)
	for i := range parts {
		parts[i] = ":v" + strconv.Itoa(i)
	}
	return strings.Join(parts, ", ")
}

func inValues(k int) item {
	out := item{}
	for i := 0; i < k; i++ {
		out[":v"+strconv.Itoa(i)] = n(strconv.Itoa(i))
	}
	return out
}
