package expr

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// resolve returns the value at pa in item, or nil when any step is missing or of the
// wrong type (a map key into a list, an index into a map, an index past the end).
func resolve(item attr.Item, pa path) *attr.Value {
	v := item[pa[0].name]
	for _, e := range pa[1:] {
		if v == nil {
			return nil
		}
		if e.index >= 0 {
			if v.Kind != attr.KindL || e.index >= len(v.L) {
				return nil
			}
			v = v.L[e.index]
		} else {
			if v.Kind != attr.KindM {
				return nil
			}
			v = v.M[e.name]
		}
	}
	return v
}

// evalOperand returns a condition operand's value, nil when it has none (a missing
// attribute, or size() of a type that has no size).
func evalOperand(o *operand, item attr.Item) *attr.Value {
	switch o.kind {
	case oPath:
		return resolve(item, o.path)
	case oValue:
		return o.val
	case oFunc: // size, the only function a condition uses as an operand
		return sizeOf(evalOperand(o.args[0], item))
	}
	return nil
}

// sizeOf is size(): the length of an S in characters (the page's example: "whether the
// string Brand is less than or equal to 20 characters"), of a B in bytes, the member
// count of a set, list or map; nil for other types, so a comparison with it is false.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.OperatorsAndFunctions.html#Expressions.OperatorsAndFunctions.Functions
func sizeOf(v *attr.Value) *attr.Value {
	if v == nil {
		return nil
	}
	n := 0
	switch v.Kind {
	case attr.KindS:
		n = utf8.RuneCountInString(v.S)
	case attr.KindB:
		n = len(v.B)
	case attr.KindSS, attr.KindNS:
		n = len(v.SS)
	case attr.KindBS:
		n = len(v.BS)
	case attr.KindL:
		n = len(v.L)
	case attr.KindM:
		n = len(v.M)
	default:
		return nil
	}
	return attr.Num(strconv.Itoa(n))
}

func evalCond(c *cond, item attr.Item) bool {
	switch c.kind {
	case cOr:
		return evalCond(c.kids[0], item) || evalCond(c.kids[1], item)
	case cAnd:
		return evalCond(c.kids[0], item) && evalCond(c.kids[1], item)
	case cNot:
		return !evalCond(c.kids[0], item)
	case cCmp:
		a, b := evalOperand(c.args[0], item), evalOperand(c.args[1], item)
		if c.op == tEq {
			return a != nil && b != nil && attr.Equal(a, b)
		}
		if c.op == tNe {
			// AWS: a <> :v is true when a does not exist.
			return !(a != nil && b != nil && attr.Equal(a, b))
		}
		n, ok := attr.Compare(a, b)
		return ok && cmpHolds(c.op, n)
	case cBetween:
		v := evalOperand(c.args[0], item)
		lo, ok1 := attr.Compare(v, evalOperand(c.args[1], item))
		hi, ok2 := attr.Compare(v, evalOperand(c.args[2], item))
		return ok1 && ok2 && lo >= 0 && hi <= 0
	case cIn:
		v := evalOperand(c.args[0], item)
		if v == nil {
			return false
		}
		for _, o := range c.args[1:] {
			if w := evalOperand(o, item); w != nil && attr.Equal(v, w) {
				return true
			}
		}
		return false
	case cFunc:
		return evalFunc(c.fn, c.args, item)
	}
	return false
}

func cmpHolds(op tokKind, n int) bool {
	switch op {
	case tEq:
		return n == 0
	case tLt:
		return n < 0
	case tLe:
		return n <= 0
	case tGt:
		return n > 0
	case tGe:
		return n >= 0
	}
	return false
}

func evalFunc(fn string, args []*operand, item attr.Item) bool {
	v := evalOperand(args[0], item)
	switch fn {
	case "attribute_exists":
		return v != nil
	case "attribute_not_exists":
		return v == nil
	}
	x := evalOperand(args[1], item)
	if v == nil || x == nil {
		return false
	}
	switch fn {
	case "attribute_type":
		return x.Kind == attr.KindS && v.Kind.String() == x.S
	case "begins_with":
		return beginsWith(v, x)
	case "contains":
		return contains(v, x)
	}
	return false
}

func beginsWith(v, prefix *attr.Value) bool {
	switch {
	case v.Kind == attr.KindS && prefix.Kind == attr.KindS:
		return strings.HasPrefix(v.S, prefix.S)
	case v.Kind == attr.KindB && prefix.Kind == attr.KindB:
		return bytes.HasPrefix(v.B, prefix.B)
	}
	return false
}

// contains: a substring of an S (or B), a member of a set of the operand's type, an
// element of a list equal to the operand.
func contains(v, x *attr.Value) bool {
	switch v.Kind {
	case attr.KindS:
		return x.Kind == attr.KindS && strings.Contains(v.S, x.S)
	case attr.KindB:
		return x.Kind == attr.KindB && bytes.Contains(v.B, x.B)
	case attr.KindSS:
		return x.Kind == attr.KindS && memberOf(v.SS, x.S)
	case attr.KindNS:
		return x.Kind == attr.KindN && memberOf(v.SS, x.S)
	case attr.KindBS:
		if x.Kind != attr.KindB {
			return false
		}
		for _, b := range v.BS {
			if bytes.Equal(b, x.B) {
				return true
			}
		}
	case attr.KindL:
		for _, e := range v.L {
			if attr.Equal(e, x) {
				return true
			}
		}
	}
	return false
}

func memberOf(set []string, s string) bool {
	for _, m := range set {
		if m == s {
			return true
		}
	}
	return false
}
