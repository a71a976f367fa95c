package ddb

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
	"github.com/fourlanes/fourlanes/twin/ddb/expr"
)

// Limits of the data plane, as AWS documents them.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html
const (
	maxItemSize      = 400 * 1024 // bytes, by attr's Size rule
	maxHashKeySize   = 2048
	maxRangeKeySize  = 1024
	maxNestingDepth  = 32
	maxPageBytes     = 1 << 20 // Query/Scan read at most 1 MB per page
	maxBatchGetKeys  = 100
	maxBatchGetBytes = 16 << 20
	maxBatchWrites   = 25
	maxTxnActions    = 100
	maxTxnBytes      = 4 << 20
	// maxAttrNameLen: an attribute name is 1 to 64 KB long; AWS refuses 65,536
	// bytes itself, so 65,535 is the longest (observed by public compatibility
	// suites run against AWS).
	maxAttrNameLen = 65535
)

// checkAttrName refuses an empty or over-long attribute name.
func checkAttrName(name string) error {
	if name == "" {
		return validationf("One or more parameter values were invalid: Empty attribute name")
	}
	if len(name) > maxAttrNameLen {
		return validationf("One or more parameter values were invalid: Attribute name is too large, must be less than %d bytes", maxAttrNameLen+1)
	}
	return nil
}

// decodeInput decodes an operation's input; an attribute value DynamoDB refuses (a
// bad number, an empty set) is a ValidationException with AWS's wording.
func decodeInput(body []byte, v any) error {
	err := json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	var inv *attr.InvalidError
	if errors.As(err, &inv) {
		return validationf("%s", inv.Msg)
	}
	var ser *attr.SerializationError
	if errors.As(err, &ser) {
		return newError(http.StatusBadRequest, CodeSerialization, "%s", ser.Msg)
	}
	return newError(http.StatusBadRequest, CodeSerialization, "%v", err)
}

// exprError turns an expression error into the ValidationException AWS sends.
func exprError(err error) error {
	if err == nil {
		return nil
	}
	var xe *expr.Error
	if errors.As(err, &xe) {
		return validationf("%s", xe.Msg)
	}
	var inv *attr.InvalidError
	if errors.As(err, &inv) {
		return validationf("%s", inv.Msg)
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return validationf("%v", err)
}

// legacyParams are the pre-expression parameters. This server serves expressions only;
// a request that uses one of these gets a ValidationException naming the replacement.
type legacyParams struct {
	Expected            json.RawMessage
	AttributesToGet     json.RawMessage
	KeyConditions       json.RawMessage
	QueryFilter         json.RawMessage
	ScanFilter          json.RawMessage
	AttributeUpdates    json.RawMessage
	ConditionalOperator json.RawMessage
}

func (l *legacyParams) check() error {
	for _, p := range []struct {
		name string
		v    json.RawMessage
		use  string
	}{
		{"Expected", l.Expected, "ConditionExpression"},
		{"AttributesToGet", l.AttributesToGet, "ProjectionExpression"},
		{"KeyConditions", l.KeyConditions, "KeyConditionExpression"},
		{"QueryFilter", l.QueryFilter, "FilterExpression"},
		{"ScanFilter", l.ScanFilter, "FilterExpression"},
		{"AttributeUpdates", l.AttributeUpdates, "UpdateExpression"},
		{"ConditionalOperator", l.ConditionalOperator, "AND/OR inside ConditionExpression or FilterExpression"},
	} {
		if len(p.v) > 0 && string(p.v) != "null" {
			return validationf("The legacy parameter %s is not supported by this local DynamoDB: use %s instead", p.name, p.use)
		}
	}
	return nil
}

// exprParams is what every operation with expressions carries.
type exprParams struct {
	ExpressionAttributeNames  map[string]string
	ExpressionAttributeValues map[string]*attr.Value
}

func (x *exprParams) params() (*expr.Params, error) {
	if x.ExpressionAttributeNames != nil && len(x.ExpressionAttributeNames) == 0 {
		return nil, validationf("ExpressionAttributeNames must not be empty")
	}
	if x.ExpressionAttributeValues != nil && len(x.ExpressionAttributeValues) == 0 {
		return nil, validationf("ExpressionAttributeValues must not be empty")
	}
	for _, k := range sortedNames(x.ExpressionAttributeNames) {
		if !placeholderOK(k, '#') {
			return nil, validationf("ExpressionAttributeNames contains invalid key: Syntax error; key: %q", k)
		}
		if v := x.ExpressionAttributeNames[k]; v == "" {
			return nil, validationf("ExpressionAttributeNames contains invalid value: Empty attribute name for key %s", k)
		} else if len(v) > maxAttrNameLen {
			return nil, validationf("ExpressionAttributeNames contains invalid value: Attribute name is too large, must be less than %d bytes for key %s", maxAttrNameLen+1, k)
		}
	}
	for _, k := range sortedNames(x.ExpressionAttributeValues) {
		if !placeholderOK(k, ':') {
			return nil, validationf("ExpressionAttributeValues contains invalid key: Syntax error; key: %q", k)
		}
		if err := checkDepth(x.ExpressionAttributeValues[k]); err != nil {
			return nil, err
		}
	}
	return expr.NewParams(x.ExpressionAttributeNames, x.ExpressionAttributeValues), nil
}

// placeholderOK reports whether k is lead followed by one or more alphanumeric
// characters or underscores, as AWS requires of expression placeholders.
func placeholderOK(k string, lead byte) bool {
	if len(k) < 2 || k[0] != lead {
		return false
	}
	for i := 1; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// validateKey checks that key holds exactly the table's key attributes, each of its
// declared type, non-empty and within the size limits.
func (t *Table) validateKey(key attr.Item) error {
	want := 1
	if t.Range.Name != "" {
		want = 2
	}
	if len(key) != want {
		return validationf("The provided key element does not match the schema")
	}
	for _, kd := range []KeyDef{t.Hash, t.Range} {
		if kd.Name == "" {
			continue
		}
		v := key[kd.Name]
		if v == nil || v.Kind != kd.Type {
			return validationf("The provided key element does not match the schema")
		}
		if err := checkKeyValue(kd, v, kd == t.Hash, ""); err != nil {
			return err
		}
	}
	return nil
}

func checkKeyValue(kd KeyDef, v *attr.Value, hash bool, index string) error {
	n := v.Size()
	if n == 0 {
		if index != "" {
			return validationf("One or more parameter values are not valid. A value specified for a secondary index key is not supported. The AttributeValue for a key attribute cannot contain an empty %s value. IndexName: %s, IndexKey: %s", emptyWord(v), index, kd.Name)
		}
		return validationf("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty %s value. Key: %s", emptyWord(v), kd.Name)
	}
	if hash && n > maxHashKeySize {
		return validationf("One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of %d bytes", maxHashKeySize)
	}
	if !hash && n > maxRangeKeySize {
		return validationf("One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of %d bytes", maxRangeKeySize)
	}
	return nil
}

func emptyWord(v *attr.Value) string {
	if v.Kind == attr.KindB {
		return "binary"
	}
	return "string"
}

// validateItem checks a whole item about to be stored: key attributes present and of
// their types, index key attributes of their declared types, size and nesting depth.
// update words the size error as UpdateItem does.
func (t *Table) validateItem(item attr.Item, update bool) error {
	for _, kd := range []KeyDef{t.Hash, t.Range} {
		if kd.Name == "" {
			continue
		}
		v := item[kd.Name]
		if v == nil {
			return validationf("One or more parameter values were invalid: Missing the key %s in the item", kd.Name)
		}
		if v.Kind != kd.Type {
			return validationf("One or more parameter values were invalid: Type mismatch for key %s expected: %s actual: %s", kd.Name, kd.Type, v.Kind)
		}
		if err := checkKeyValue(kd, v, kd == t.Hash, ""); err != nil {
			return err
		}
	}
	for _, ix := range t.indexes() {
		for _, kd := range []KeyDef{ix.Hash, ix.Range} {
			if kd.Name == "" {
				continue
			}
			v := item[kd.Name]
			if v == nil {
				continue
			}
			if v.Kind != kd.Type {
				return validationf("One or more parameter values were invalid: Type mismatch for Index Key %s Expected: %s Actual: %s IndexName: %s", kd.Name, kd.Type, v.Kind, ix.Name)
			}
			if err := checkKeyValue(kd, v, kd == ix.Hash, ix.Name); err != nil {
				return err
			}
		}
	}
	for name, v := range item {
		if err := checkAttrName(name); err != nil {
			return err
		}
		if err := checkDepth(v); err != nil {
			return err
		}
	}
	if item.Size() > maxItemSize {
		if update {
			return validationf("Item size to update has exceeded the maximum allowed size")
		}
		return validationf("Item size has exceeded the maximum allowed size")
	}
	return nil
}

// checkDepth refuses a value nested deeper than AWS allows: "nested attributes up to 32
// levels deep", the top-level attribute being level 1 (so 31 maps or lists around a
// scalar is the most).
func checkDepth(v *attr.Value) error {
	if 1+depth(v) > maxNestingDepth {
		return validationf("Nesting Levels have exceeded supported limits")
	}
	return nil
}

// depth is how deeply v nests lists and maps (a scalar is 0, a map of scalars 1).
func depth(v *attr.Value) int {
	d := 0
	switch v.Kind {
	case attr.KindM:
		for _, e := range v.M {
			d = max(d, depth(e))
		}
		return d + 1
	case attr.KindL:
		for _, e := range v.L {
			d = max(d, depth(e))
		}
		return d + 1
	}
	return 0
}

// keyString encodes a key (hash and optional range value) as a map key: kind, length,
// bytes for each, so distinct keys never collide.
func keyString(hk, rk *attr.Value) string {
	b := make([]byte, 0, 32)
	for _, v := range []*attr.Value{hk, rk} {
		if v == nil {
			b = append(b, 0)
			continue
		}
		b = append(b, byte(v.Kind))
		raw := v.B
		if v.Kind != attr.KindB {
			raw = []byte(v.S)
		}
		b = binary.AppendUvarint(b, uint64(len(raw)))
		b = append(b, raw...)
	}
	return string(b)
}

// checkEnum returns AWS's validation error when v is not one of allowed ("" is allowed:
// the parameter's default).
func checkEnum(param, v string, allowed ...string) error {
	if v == "" {
		return nil
	}
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return validationf("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy enum value set: %v", v, param, allowed)
}

// conditionFailed is ConditionalCheckFailedException, with the old item when asked.
func conditionFailed(old attr.Item, returnOld string) *Error {
	e := newError(http.StatusBadRequest, CodeConditionalCheckFailed, "The conditional request failed")
	if returnOld == "ALL_OLD" && old != nil {
		e.Item = old
	}
	return e
}
