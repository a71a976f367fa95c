package expr

import (
	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// Key condition expressions: the partition key with =, and optionally the sort key with
// one of = < <= > >= BETWEEN begins_with, joined by AND.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.KeyConditionExpressions.html

type keyPart struct {
	name string
	rc   RangeCond
}

// keyCondition checks the shape of a parsed key condition and extracts its parts.
func (ps *parser) keyCondition(root *cond) *KeyCondition {
	var parts []keyPart
	var walk func(c *cond)
	walk = func(c *cond) {
		switch c.kind {
		case cAnd:
			walk(c.kids[0])
			walk(c.kids[1])
		case cOr:
			ps.fail("Invalid operator used in KeyConditionExpression: OR")
		case cNot:
			ps.fail("Invalid operator used in KeyConditionExpression: NOT")
		case cIn:
			ps.fail("Invalid operator used in KeyConditionExpression: IN")
		default:
			parts = append(parts, ps.keyPart(c))
		}
	}
	walk(root)
	if len(parts) > 2 {
		ps.fail("Conditions can be of length 1 or 2 only")
	}
	if len(parts) == 2 && parts[0].name == parts[1].name {
		ps.fail("KeyConditionExpressions must only contain one condition per key")
	}
	if ps.later != nil {
		panic(ps.later)
	}
	h := -1
	for i, pt := range parts {
		if pt.rc.Op == "=" {
			h = i
			break
		}
	}
	if h < 0 {
		panic(errKeyNotSupported)
	}
	kc := &KeyCondition{HashName: parts[h].name, Hash: parts[h].rc.A}
	if len(parts) == 2 {
		r := parts[1-h]
		kc.RangeName, kc.Range = r.name, &RangeCond{Op: r.rc.Op, A: r.rc.A, B: r.rc.B}
	}
	return kc
}

var flipped = map[tokKind]tokKind{tEq: tEq, tLt: tGt, tLe: tGe, tGt: tLt, tGe: tLe}

var opText = map[tokKind]string{tEq: "=", tNe: "<>", tLt: "<", tLe: "<=", tGt: ">", tGe: ">="}

func (ps *parser) keyPart(c *cond) keyPart {
	var name string
	keyPath := func(o *operand) bool {
		if o.kind != oPath {
			return false
		}
		if len(o.path) > 1 || o.path[0].index >= 0 {
			ps.fail("KeyConditionExpressions cannot have conditions on nested attributes")
		}
		name = o.path[0].name
		return true
	}
	value := func(o *operand) *attr.Value {
		if o.kind == oFunc {
			ps.fail("Invalid operator used in KeyConditionExpression: %s", o.name)
		}
		if o.kind != oValue {
			panic(errKeyNotSupported)
		}
		return o.val
	}
	switch c.kind {
	case cCmp:
		op, ok := flipped[c.op]
		if !ok {
			ps.fail("Invalid operator used in KeyConditionExpression: %s", opText[c.op])
		}
		l, r := c.args[0], c.args[1]
		if l.kind == oFunc {
			ps.fail("Invalid operator used in KeyConditionExpression: %s", l.name)
		}
		if keyPath(l) {
			return keyPart{name, RangeCond{Op: opText[c.op], A: value(r)}}
		}
		if keyPath(r) {
			return keyPart{name, RangeCond{Op: opText[op], A: value(l)}}
		}
		panic(errKeyNotSupported)
	case cBetween:
		if !keyPath(c.args[0]) {
			panic(errKeyNotSupported)
		}
		return keyPart{name, RangeCond{Op: "BETWEEN", A: value(c.args[1]), B: value(c.args[2])}}
	case cFunc:
		if c.fn != "begins_with" {
			ps.fail("Invalid operator used in KeyConditionExpression: %s", c.fn)
		}
		keyPath(c.args[0])
		return keyPart{name, RangeCond{Op: "begins_with", A: value(c.args[1])}}
	}
	panic(errKeyNotSupported)
}

func (r *RangeCond) match(v *attr.Value) bool {
	if v == nil || r.A == nil {
		return false
	}
	switch r.Op {
	case "begins_with":
		return beginsWith(v, r.A)
	case "BETWEEN":
		lo, ok1 := attr.Compare(v, r.A)
		hi, ok2 := attr.Compare(v, r.B)
		return ok1 && ok2 && lo >= 0 && hi <= 0
	}
	n, ok := attr.Compare(v, r.A)
	if !ok {
		return false
	}
	switch r.Op {
	case "=":
		return n == 0
	case "<":
		return n < 0
	case "<=":
		return n <= 0
	case ">":
		return n > 0
	case ">=":
		return n >= 0
	}
	return false
}

// errKeyNotSupported is AWS's answer, without the "Invalid KeyConditionExpression"
// prefix, to a key condition that names no partition key equality.
var errKeyNotSupported = &Error{Msg: "Query key condition not supported"}
