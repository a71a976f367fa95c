package ddb_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/twin/ddb"
)

const maxItem = 400 * 1024 // "The maximum item size in DynamoDB is 400 KB"; 1 KB = 1024 bytes

// TestParityItemSizeBoundary puts items of exactly 400 KB by AWS's size rule (accepted)
// and one byte more (rejected). Sizes: pk "k" is 2+1 = 3 bytes; each attribute adds its
// name's UTF-8 bytes; strings their UTF-8 bytes, binaries their raw bytes, numbers one
// byte per two significant digits plus one, lists and maps 3 bytes plus 1 per element.
func TestParityItemSizeBoundary(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{})
	const num38 = "12345678901234567890123456789012345678" // 38 digits: 19+1 = 20 bytes
	cases := []struct {
		name  string
		build func(pad int) item // pad is the variable part; the item is 400 KB at pad=base
		base  int
	}{
		{"string", func(x int) item { return item{"d": s(strings.Repeat("x", x))} }, maxItem - 3 - 1},
		{"multibyte string counts UTF-8 bytes", func(x int) item {
			return item{"d": s(strings.Repeat("\u00e9", x/2) + strings.Repeat("x", x%2))}
		}, maxItem - 3 - 1},
		{"multibyte attribute name", func(x int) item { return item{"\u00fc": s(strings.Repeat("x", x))} }, maxItem - 3 - 2},
		{"binary counts raw bytes", func(x int) item { return item{"d": &types.AttributeValueMemberB{Value: make([]byte, x)}} }, maxItem - 3 - 1},
		{"38-digit number is 20 bytes", func(x int) item {
			return item{"n": n(num38), "d": s(strings.Repeat("x", x))}
		}, maxItem - 3 - (1 + 20) - 1},
		{"number with trailing zeros counts significant digits", func(x int) item {
			return item{"n": n("1000000000000000000000000000000000000000"), "d": s(strings.Repeat("x", x))} // 1E39: 1 digit, 2 bytes
		}, maxItem - 3 - (1 + 2) - 1},
		{"map overhead 3 + 1 per element", func(x int) item {
			return item{"m": mapv(item{"a": s(strings.Repeat("x", x))})}
		}, maxItem - 3 - (1 + 3 + 1 + 1)},
		{"list overhead 3 + 1 per element", func(x int) item {
			return item{"l": list(s(strings.Repeat("x", x)), boolv(true))}
		}, maxItem - 3 - (1 + 3 + 1 + 1 + 1)},
		{"BOOL and NULL are 1 byte", func(x int) item {
			return item{"t": boolv(true), "z": null(), "d": s(strings.Repeat("x", x))}
		}, maxItem - 3 - 2 - 2 - 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			at := c.build(c.base)
			at["pk"] = s("k")
			_, err := p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: at})
			wantOK(t, fmt.Sprintf("%s: item of exactly %d bytes", c.name, maxItem), err, docItemSizes)

			over := c.build(c.base + 1)
			over["pk"] = s("k")
			_, err = p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: over})
			wantErr(t, fmt.Sprintf("%s: item of %d bytes", c.name, maxItem+1), err, "ValidationException", docConstraints,
				"Item size has exceeded the maximum allowed size")
		})
	}

	big := item{"pk": s("k"), "d": s(strings.Repeat("x", maxItem-4+1))}
	t.Run("BatchWriteItem", func(t *testing.T) {
		_, err := p.c.BatchWriteItem(p.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
			tbl: {{PutRequest: &types.PutRequest{Item: big}}},
		}})
		wantErr(t, "BatchWriteItem of a 400 KB + 1 item", err, "ValidationException", docConstraints, "Item size has exceeded the maximum allowed size")
	})
	t.Run("TransactWriteItems", func(t *testing.T) {
		_, err := p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(tbl), Item: big}},
		}})
		// Either refused up front or cancelled with a ValidationError reason: the
		// TransactionCanceledException page lists "An item size becomes too large".
		code, msg := apiErr(err)
		var tce *types.TransactionCanceledException
		switch {
		case code == "ValidationException" && strings.Contains(msg, "Item size has exceeded the maximum allowed size"):
		case asTCE(err, &tce) && len(tce.CancellationReasons) == 1 && aws.ToString(tce.CancellationReasons[0].Code) == "ValidationError":
		default:
			t.Errorf("TransactWriteItems of a 400 KB + 1 item: got %s: %s, want ValidationException or a ValidationError cancellation (doc %s)", code, msg, docAPITxWrite)
		}
	})
	t.Run("UpdateItem growing an item past 400 KB", func(t *testing.T) {
		p.put(tbl, item{"pk": s("u"), "d": s(strings.Repeat("x", maxItem-1000))})
		_, err := p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(tbl), Key: item{"pk": s("u")},
			UpdateExpression: aws.String("SET e = :e"), ExpressionAttributeValues: item{":e": s(strings.Repeat("y", 2000))},
		})
		wantErr(t, "UpdateItem past 400 KB", err, "ValidationException", docConstraints, "Item size to update has exceeded the maximum allowed size")
		got := p.get(tbl, item{"pk": s("u")})
		if _, has := got["e"]; has {
			t.Errorf("UpdateItem past 400 KB: got attribute e stored, want the item unchanged (doc %s)", docConstraints)
		}
	})
}

// TestParityKeyLimits: key lengths (partition 1–2,048 bytes, sort 1–1,024), empty
// keys, missing keys, key types.
func TestParityKeyLimits(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{hash: "pk", hashType: "S", rng: "sk", rngType: "S"})
	btbl := p.table(tableSpec{hash: "pk", hashType: "B", rng: "sk", rngType: "B"})
	cases := []struct {
		name      string
		table     string
		it        item
		ok        bool
		fragments []string
		doc       string
	}{
		{"partition key of 2048 bytes", tbl, item{"pk": s(strings.Repeat("p", 2048)), "sk": s("s")}, true, nil, docConstraints},
		{"partition key of 2049 bytes", tbl, item{"pk": s(strings.Repeat("p", 2049)), "sk": s("s")}, false,
			[]string{"Size of hashkey has exceeded the maximum size limit of"}, docConstraints},
		{"partition key of 1024 two-byte runes", tbl, item{"pk": s(strings.Repeat("\u00e9", 1024)), "sk": s("s")}, true, nil, docConstraints},
		{"partition key of 1025 two-byte runes", tbl, item{"pk": s(strings.Repeat("\u00e9", 1025)), "sk": s("s")}, false,
			[]string{"Size of hashkey has exceeded the maximum size limit of"}, docConstraints},
		{"sort key of 1024 bytes", tbl, item{"pk": s("p"), "sk": s(strings.Repeat("s", 1024))}, true, nil, docConstraints},
		{"sort key of 1025 bytes", tbl, item{"pk": s("p"), "sk": s(strings.Repeat("s", 1025))}, false,
			[]string{"Aggregated size of all range keys has exceeded the size limit of 1024 bytes"}, docConstraints},
		{"binary partition key of 2049 bytes", btbl, item{"pk": &types.AttributeValueMemberB{Value: make([]byte, 2049)}, "sk": bin(1)}, false,
			[]string{"Size of hashkey has exceeded the maximum size limit of"}, docConstraints},
		{"empty string partition key", tbl, item{"pk": s(""), "sk": s("s")}, false,
			[]string{"One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: pk"}, docDataTypes},
		{"empty string sort key", tbl, item{"pk": s("p"), "sk": s("")}, false,
			[]string{"The AttributeValue for a key attribute cannot contain an empty string value. Key: sk"}, docDataTypes},
		{"empty binary sort key", btbl, item{"pk": bin(1), "sk": &types.AttributeValueMemberB{Value: []byte{}}}, false,
			[]string{"The AttributeValue for a key attribute cannot contain an empty binary value. Key: sk"}, docDataTypes},
		{"empty string non-key attribute", tbl, item{"pk": s("p"), "sk": s("e"), "v": s(""), "w": &types.AttributeValueMemberB{Value: []byte{}}}, true, nil, docDataTypes},
		{"empty list and map", tbl, item{"pk": s("p"), "sk": s("lm"), "l": list(), "m": mapv(item{})}, true, nil, docDataTypes},
		{"missing sort key", tbl, item{"pk": s("p")}, false,
			[]string{"One or more parameter values were invalid: Missing the key sk in the item"}, docAPIPut},
		{"missing partition key", tbl, item{"sk": s("s")}, false,
			[]string{"One or more parameter values were invalid: Missing the key pk in the item"}, docAPIPut},
		{"key of the wrong type", tbl, item{"pk": n("1"), "sk": s("s")}, false,
			[]string{"One or more parameter values were invalid: Type mismatch for key pk expected: S actual: N"}, docAPIPut},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(c.table), Item: c.it})
			if c.ok {
				wantOK(t, c.name, err, c.doc)
				return
			}
			wantErr(t, c.name, err, "ValidationException", c.doc, c.fragments...)
		})
	}
	t.Run("GetItem with a key that is not the schema", func(t *testing.T) {
		for _, key := range []item{
			{"pk": s("p")},
			{"pk": s("p"), "sk": s("s"), "extra": s("x")},
			{"pk": n("1"), "sk": s("s")},
		} {
			_, err := p.c.GetItem(p.ctx, &dynamodb.GetItemInput{TableName: aws.String(tbl), Key: key})
			wantErr(t, "GetItem "+render(key), err, "ValidationException", docAPIGet, "The provided key element does not match the schema")
		}
	})
	t.Run("unknown table", func(t *testing.T) {
		_, err := p.c.GetItem(p.ctx, &dynamodb.GetItemInput{TableName: aws.String("no-such-table"), Key: item{"pk": s("p")}})
		wantErr(t, "GetItem on a missing table", err, "ResourceNotFoundException", docErrors, "Requested resource not found")
	})
}

// deep wraps a leaf in depth single-key maps (depth 1: {"n": leaf}).
func deep(depth int, wrap func(types.AttributeValue) types.AttributeValue) types.AttributeValue {
	v := s("leaf")
	for i := 0; i < depth; i++ {
		v = wrap(v)
	}
	return v
}

// TestParityValueLimits: nesting depth 32, numbers (38 significant digits, magnitude
// 1E-130 to 9.99…E+125), empty and duplicate sets.
func TestParityValueLimits(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{})
	asMap := func(v types.AttributeValue) types.AttributeValue { return mapv(item{"n": v}) }
	asList := func(v types.AttributeValue) types.AttributeValue { return list(v) }
	cases := []struct {
		name      string
		v         types.AttributeValue
		ok        bool
		fragments []string
		doc       string
	}{
		// "DynamoDB supports nested attributes up to 32 levels deep", the top-level
		// attribute being level 1: 31 maps around a scalar is 32 levels.
		{"31 nested maps", deep(31, asMap), true, nil, docConstraints},
		{"32 nested maps", deep(32, asMap), false, []string{"Nesting Levels have exceeded supported limits"}, docConstraints},
		{"31 nested lists", deep(31, asList), true, nil, docConstraints},
		{"32 nested lists", deep(32, asList), false, []string{"Nesting Levels have exceeded supported limits"}, docConstraints},
		{"38 significant digits", n("12345678901234567890123456789012345678"), true, nil, docDataTypes},
		{"38 digits with a point", n("1234567890123456789.0123456789012345678"), true, nil, docDataTypes},
		{"39 significant digits", n("123456789012345678901234567890123456789"), false,
			[]string{"Attempting to store more than 38 significant digits in a Number"}, docDataTypes},
		{"trailing zeros are not significant", n("1000000000000000000000000000000000000000000"), true, nil, docDataTypes},
		{"largest positive", n("9.9999999999999999999999999999999999999E+125"), true, nil, docDataTypes},
		{"smallest positive", n("1E-130"), true, nil, docDataTypes},
		{"largest negative", n("-1E-130"), true, nil, docDataTypes},
		{"smallest negative", n("-9.9999999999999999999999999999999999999E+125"), true, nil, docDataTypes},
		{"overflow", n("1E+126"), false, []string{"Number overflow. Attempting to store a number with magnitude larger than supported range"}, docDataTypes},
		{"negative overflow", n("-1E+126"), false, []string{"Number overflow"}, docDataTypes},
		{"underflow", n("1E-131"), false, []string{"Number underflow. Attempting to store a number with magnitude smaller than supported range"}, docDataTypes},
		{"not a number", n("12a"), false, []string{"The parameter cannot be converted to a numeric value"}, docDataTypes},
		{"NaN", n("NaN"), false, []string{"The parameter cannot be converted to a numeric value"}, docDataTypes},
		{"Infinity", n("Infinity"), false, []string{"The parameter cannot be converted to a numeric value"}, docDataTypes},
		{"empty number", n(""), false, nil, docDataTypes},
		{"number set member overflow", ns("1", "1E+126"), false, []string{"Number overflow"}, docDataTypes},
		{"empty string set", ss(), false, []string{"may not be empty"}, docDataTypes},
		{"empty number set", ns(), false, []string{"may not be empty"}, docDataTypes},
		{"empty binary set", bs(), false, []string{"may not be empty"}, docDataTypes},
		{"duplicate string set members", ss("a", "b", "a"), false, []string{"Input collection", "contains duplicates"}, docDataTypes},
		{"duplicate number set members (numerically equal)", ns("1", "1.0"), false, []string{"contains duplicates"}, docDataTypes},
		{"duplicate binary set members", bs([]byte{1}, []byte{1}), false, []string{"contains duplicates"}, docDataTypes},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: item{"pk": s(strconv.Itoa(i)), "v": c.v}})
			if c.ok {
				if wantOK(t, c.name, err, c.doc) {
					if got := p.get(tbl, item{"pk": s(strconv.Itoa(i))}); got == nil {
						t.Errorf("%s: got no item after PutItem, want it stored (doc %s)", c.name, c.doc)
					}
				}
				return
			}
			wantErr(t, c.name, err, "ValidationException", c.doc, c.fragments...)
		})
	}

	t.Run("arithmetic overflow", func(t *testing.T) {
		p.put(tbl, item{"pk": s("big"), "v": n("9.9999999999999999999999999999999999999E+125")})
		_, err := p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: item{"pk": s("big")},
			UpdateExpression: aws.String("ADD v :v"), ExpressionAttributeValues: item{":v": n("9.9999999999999999999999999999999999999E+125")}})
		wantErr(t, "ADD past 9.99…E+125", err, "ValidationException", docDataTypes, "Number overflow")
		_, err = p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: item{"pk": s("big")},
			UpdateExpression: aws.String("SET v = v + :v"), ExpressionAttributeValues: item{":v": n("9.9999999999999999999999999999999999999E+125")}})
		wantErr(t, "SET v = v + 9.99…E+125", err, "ValidationException", docDataTypes, "Number overflow")
	})
	t.Run("arithmetic at 38 digits is exact", func(t *testing.T) {
		p.put(tbl, item{"pk": s("prec"), "v": n("12345678901234567890123456789012345677")})
		out, err := p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: item{"pk": s("prec")},
			UpdateExpression: aws.String("ADD v :one"), ExpressionAttributeValues: item{":one": n("1")}, ReturnValues: types.ReturnValueUpdatedNew})
		if wantOK(t, "ADD 1 at 38 digits", err, docDataTypes) {
			wantItem(t, "ADD 1 at 38 digits", out.Attributes, item{"v": n("12345678901234567890123456789012345678")}, docDataTypes)
		}
	})
	t.Run("expression values are checked too", func(t *testing.T) {
		_, err := p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: item{"pk": s("ev")},
			UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: item{":v": ss("a", "a")}})
		wantErr(t, "duplicate set in ExpressionAttributeValues", err, "ValidationException", docDataTypes, "contains duplicates")
		_, err = p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: item{"pk": s("ev")},
			UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: item{":v": deep(32, asMap)}})
		wantErr(t, "32 nested maps in ExpressionAttributeValues", err, "ValidationException", docConstraints, "Nesting Levels have exceeded supported limits")
	})
}

// TestParityRequestLimits: 100 actions and 4 MB per transaction, one action per item,
// 25 writes per BatchWriteItem, 4 KB expressions.
func TestParityRequestLimits(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{})
	puts := func(k int, size int) []types.TransactWriteItem {
		out := make([]types.TransactWriteItem, k)
		for i := range out {
			it := item{"pk": s(fmt.Sprintf("t%03d", i))}
			if size > 0 {
				it["d"] = s(strings.Repeat("x", size-(2+4)-1))
			}
			out[i] = types.TransactWriteItem{Put: &types.Put{TableName: aws.String(tbl), Item: it}}
		}
		return out
	}
	t.Run("100 actions", func(t *testing.T) {
		_, err := p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: puts(100, 0)})
		wantOK(t, "TransactWriteItems of 100 actions", err, docAPITxWrite)
	})
	t.Run("101 actions", func(t *testing.T) {
		_, err := p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: puts(101, 0)})
		wantErr(t, "TransactWriteItems of 101 actions", err, "ValidationException", docAPITxWrite, "Member must have length less than or equal to 100")
	})
	t.Run("no actions", func(t *testing.T) {
		_, err := p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{}})
		wantErr(t, "TransactWriteItems of 0 actions", err, "ValidationException", docAPITxWrite)
	})
	t.Run("ClientRequestToken of 36 and 37 characters", func(t *testing.T) {
		// "Length Constraints: Minimum length of 1. Maximum length of 36."
		one := func(token, key string) error {
			_, err := p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String(token),
				TransactItems: []types.TransactWriteItem{{Put: &types.Put{TableName: aws.String(tbl), Item: item{"pk": s(key)}}}}})
			return err
		}
		wantOK(t, "token of 36 characters", one(strings.Repeat("t", 36), "tok36"), docAPITxWrite)
		wantErr(t, "token of 37 characters", one(strings.Repeat("t", 37), "tok37"), "ValidationException", docAPITxWrite)
	})
	t.Run("two actions on one item", func(t *testing.T) {
		items := puts(2, 0)
		items[1] = types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(tbl),
			Key: item{"pk": s("t000")}, ConditionExpression: aws.String("attribute_not_exists(pk)")}}
		_, err := p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		wantErr(t, "two actions on one item", err, "ValidationException", docAPITxWrite, "Transaction request cannot include multiple operations on one item")
	})
	t.Run("4 MB", func(t *testing.T) {
		// Ten items of 400 KB are 4,096,000 bytes, under 4 MB (4,194,304); eleven are over.
		_, err := p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: puts(10, maxItem)})
		wantOK(t, "ten 400 KB puts (4,096,000 bytes)", err, docAPITxWrite)
		_, err = p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: puts(11, maxItem)})
		wantErr(t, "eleven 400 KB puts (4,505,600 bytes)", err, "ValidationException", docAPITxWrite)
	})
	t.Run("BatchWriteItem 25 and 26", func(t *testing.T) {
		reqs := func(k int) []types.WriteRequest {
			out := make([]types.WriteRequest, k)
			for i := range out {
				out[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: item{"pk": s(fmt.Sprintf("b%02d", i))}}}
			}
			return out
		}
		_, err := p.c.BatchWriteItem(p.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{tbl: reqs(25)}})
		wantOK(t, "BatchWriteItem of 25", err, "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html")
		_, err = p.c.BatchWriteItem(p.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{tbl: reqs(26)}})
		wantErr(t, "BatchWriteItem of 26", err, "ValidationException", "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html",
			"Member must have length less than or equal to 25")
	})
	t.Run("duplicate keys in one batch", func(t *testing.T) {
		dup := []types.WriteRequest{
			{PutRequest: &types.PutRequest{Item: item{"pk": s("dup"), "v": n("1")}}},
			{PutRequest: &types.PutRequest{Item: item{"pk": s("dup"), "v": n("2")}}},
		}
		_, err := p.c.BatchWriteItem(p.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{tbl: dup}})
		wantErr(t, "BatchWriteItem with one key twice", err, "ValidationException", "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html",
			"Provided list of item keys contains duplicates")
		keys := make([]item, 101)
		for i := range keys {
			keys[i] = item{"pk": s(fmt.Sprintf("g%03d", i))}
		}
		_, err = p.c.BatchGetItem(p.ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{tbl: {Keys: keys}}})
		wantErr(t, "BatchGetItem of 101 keys", err, "ValidationException", docBatchGet, "Too many items requested for the BatchGetItem call")
		_, err = p.c.BatchGetItem(p.ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{tbl: {Keys: []item{{"pk": s("x")}, {"pk": s("x")}}}}})
		wantErr(t, "BatchGetItem with one key twice", err, "ValidationException", docBatchGet, "Provided list of item keys contains duplicates")
		gets := make([]types.TransactGetItem, 101)
		for i := range gets {
			gets[i] = types.TransactGetItem{Get: &types.Get{TableName: aws.String(tbl), Key: item{"pk": s(fmt.Sprintf("g%03d", i))}}}
		}
		_, err = p.c.TransactGetItems(p.ctx, &dynamodb.TransactGetItemsInput{TransactItems: gets})
		wantErr(t, "TransactGetItems of 101", err, "ValidationException", docAPITxGet, "Member must have length less than or equal to 100")
	})
	t.Run("BatchGetItem answers at most 16 MB", func(t *testing.T) {
		// "A single operation can retrieve up to 16 MB of data ... BatchGetItem returns a
		// partial result if the response size limit is exceeded": 45 items of 400 KB are
		// about 18 MB; at most 40 fit in 16 MB (16,777,216 bytes).
		const k = 45
		var keys []item
		for i := 0; i < k; i++ {
			key := fmt.Sprintf("big%02d", i)
			p.put(tbl, sized(key, maxItem))
			keys = append(keys, item{"pk": s(key)})
		}
		seen := map[string]bool{}
		req := map[string]types.KeysAndAttributes{tbl: {Keys: keys}}
		for round := 0; len(req) > 0 && round < 10; round++ {
			out, err := p.c.BatchGetItem(p.ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if !wantOK(t, "BatchGetItem", err, docBatchGet) {
				return
			}
			got := out.Responses[tbl]
			if len(got) > 40 {
				t.Errorf("BatchGetItem round %d: got %d items of 400 KB, want at most 40 (16 MB) (doc %s)", round, len(got), docBatchGet)
			}
			if round == 0 && len(out.UnprocessedKeys) == 0 {
				t.Errorf("BatchGetItem of 18 MB: got no UnprocessedKeys, want the rest (doc %s)", docBatchGet)
			}
			for _, it := range got {
				seen[render(it["pk"])] = true
			}
			req = out.UnprocessedKeys
		}
		if len(seen) != k {
			t.Errorf("BatchGetItem with its UnprocessedKeys: got %d items in all, want %d (doc %s)", len(seen), k, docBatchGet)
		}
	})
	t.Run("expression of 4 KB", func(t *testing.T) {
		// "The maximum length of any expression string is 4 KB. For example, the size of
		// the ConditionExpression a=b is 3 bytes." Spaces pad the expression to size.
		pad := func(size int) string {
			e := "attribute_not_exists(pk)"
			return e + strings.Repeat(" ", size-len(e))
		}
		_, err := p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: item{"pk": s("x1")}, ConditionExpression: aws.String(pad(4096))})
		wantOK(t, "condition of 4,096 bytes", err, docConstraints)
		_, err = p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: item{"pk": s("x2")}, ConditionExpression: aws.String(pad(4097))})
		wantErr(t, "condition of 4,097 bytes", err, "ValidationException", docConstraints, "Expression size has exceeded the maximum allowed size")
	})
	t.Run("300 operators", func(t *testing.T) {
		// "The maximum number of operators or functions allowed in any expression is
		// 300": 400 comparisons joined by 399 ORs is well over, in under 4 KB.
		expr := strings.Repeat("v = :a OR ", 399) + "v = :a"
		_, err := p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: item{"pk": s("x3")},
			ConditionExpression: aws.String(expr), ExpressionAttributeValues: item{":a": n("1")}})
		wantErr(t, fmt.Sprintf("condition of 799 operators in %d bytes", len(expr)), err, "ValidationException", docConstraints)
	})
}
