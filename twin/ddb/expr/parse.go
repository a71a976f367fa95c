package expr

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// Limits from https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html#limits-expression-parameters
const (
	maxExprBytes   = 4096 // any expression string
	maxInOperands  = 100  // IN comparator
	maxOperators   = 300  // operators or functions in one expression
	maxPathElems   = 32   // nested attribute depth
	maxIndexDigits = 9    // a list index that fits an int everywhere
)

// elem is one step of a document path: a map key (or top-level attribute name), or a
// list index when index >= 0.
type elem struct {
	name  string
	index int
}

// path is a document path: a.b[2].#c resolved to names and indexes.
type path []elem

// String writes the path as AWS's messages do: [a, b, [2]].
func (pa path) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, e := range pa {
		if i > 0 {
			b.WriteString(", ")
		}
		if e.index >= 0 {
			b.WriteString("[" + strconv.Itoa(e.index) + "]")
		} else {
			b.WriteString(e.name)
		}
	}
	b.WriteByte(']')
	return b.String()
}

func (pa path) equal(o path) bool {
	if len(pa) != len(o) {
		return false
	}
	for i := range pa {
		if pa[i] != o[i] {
			return false
		}
	}
	return true
}

type operandKind uint8

const (
	oPath  operandKind = iota
	oValue             // an expression attribute value
	oFunc              // size, if_not_exists, list_append
	oArith             // a + b or a - b (UpdateExpression SET only)
)

// operand is a value an expression computes: a document path, a value, or a function.
type operand struct {
	kind operandKind
	path path
	val  *attr.Value
	name string // the function's name, "+" or "-"; the placeholder for oValue
	args []*operand
}

type condKind uint8

const (
	cOr condKind = iota
	cAnd
	cNot
	cCmp     // a <op> b
	cBetween // a BETWEEN b AND c
	cIn      // a IN (b, c, …)
	cFunc    // attribute_exists, attribute_not_exists, attribute_type, begins_with, contains
	cOperand // a parenthesized operand still waiting for its comparator (parse only)
)

// cond is a node of a parsed condition.
type cond struct {
	kind   condKind
	op     tokKind // comparator of cCmp
	fn     string  // function of cFunc
	kids   []*cond
	args   []*operand
	parens uint8 // how many parentheses wrap this node directly
}

// Function names are case-sensitive in DynamoDB expressions; keywords are not.
var funcArity = map[string]int{
	"attribute_exists":     1,
	"attribute_not_exists": 1,
	"attribute_type":       2,
	"begins_with":          2,
	"contains":             2,
	"size":                 1,
	"if_not_exists":        2,
	"list_append":          2,
}

func isCondFunc(name string) bool {
	switch name {
	case "attribute_exists", "attribute_not_exists", "attribute_type", "begins_with", "contains":
		return true
	}
	return false
}

// parser is a recursive-descent parser over a token slice. Errors unwind by panicking
// with *Error, recovered in run; the first error that is not a syntax error (reserved
// word, undefined placeholder, …) is held until the whole expression has parsed, so
// a syntax error anywhere wins, as it does on AWS.
type parser struct {
	src    string
	kind   string // "ConditionExpression", "UpdateExpression", …
	toks   []token
	pos    int
	p      *Params
	later  *Error
	update bool // UpdateExpression: if_not_exists, list_append, + and - are allowed
	depth  int  // open parentheses
	ops    int  // operators and functions seen

	// Slabs the parse tree is carved from, so a small expression costs a few
	// allocations rather than one per node.
	opSlab   []operand
	condSlab []cond
	opPtrs   []*operand
	condPtrs []*cond
	elems    []elem
	scratch  path
	tokBuf   [32]token
}

func (ps *parser) op(o operand) *operand { return slabNew(&ps.opSlab, o) }

func (ps *parser) cnd(c cond) *cond { return slabNew(&ps.condSlab, c) }

// slabNew stores v in the next free element of *slab (allocating eight at a time) and
// returns a pointer to it.
func slabNew[T any](slab *[]T, v T) *T {
	if len(*slab) == 0 {
		*slab = make([]T, 8)
	}
	p := &(*slab)[0]
	*p = v
	*slab = (*slab)[1:]
	return p
}

// operands returns an empty slice with room for n operands; appending past n
// reallocates, so slices carved from one slab never overlap.
func (ps *parser) operands(n int) []*operand {
	if len(ps.opPtrs) < n {
		ps.opPtrs = make([]*operand, max(n, 32))
	}
	s := ps.opPtrs[:0:n]
	ps.opPtrs = ps.opPtrs[n:]
	return s
}

func (ps *parser) conds(cs ...*cond) []*cond {
	if len(ps.condPtrs) < len(cs) {
		ps.condPtrs = make([]*cond, 16)
	}
	s := ps.condPtrs[:len(cs):len(cs)]
	copy(s, cs)
	ps.condPtrs = ps.condPtrs[len(cs):]
	return s
}

// keepPath copies a path out of the scratch buffer into the element slab.
func (ps *parser) keepPath(pa path) path {
	if len(ps.elems) < len(pa) {
		ps.elems = make([]elem, max(len(pa), 16))
	}
	s := ps.elems[:len(pa):len(pa)]
	copy(s, pa)
	ps.elems = ps.elems[len(pa):]
	return s
}

func newParser(s, kind string, p *Params) *parser {
	if p == nil {
		p = NewParams(nil, nil)
	}
	ps := &parser{src: s, kind: kind, p: p}
	ps.toks = lex(s, ps.tokBuf[:0])
	return ps
}

// run calls f, turning a panicking *Error into the returned error, and then returns
// the first deferred error. Empty and oversized expressions are refused first.
func (ps *parser) run(f func()) (err error) {
	if len(ps.src) > maxExprBytes {
		return ps.errf("Expression size has exceeded the maximum allowed size; expression size: %d", len(ps.src))
	}
	if ps.toks[0].kind == tEOF {
		return ps.errf("The expression can not be empty;")
	}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*Error)
			if !ok {
				panic(r)
			}
			err = e
		}
	}()
	f()
	if ps.later != nil {
		return ps.later
	}
	if ps.ops > maxOperators {
		return ps.errf("The expression contains too many operators; operator count: %d", ps.ops)
	}
	return nil
}

func (ps *parser) errf(format string, args ...any) *Error {
	return &Error{Msg: "Invalid " + ps.kind + ": " + fmt.Sprintf(format, args...)}
}

func (ps *parser) fail(format string, args ...any) { panic(ps.errf(format, args...)) }

// defer records err unless an earlier one is held.
func (ps *parser) deferErr(format string, args ...any) {
	if ps.later == nil {
		ps.later = ps.errf(format, args...)
	}
}

func (ps *parser) cur() token          { return ps.toks[ps.pos] }
func (ps *parser) peek(n int) tokKind  { return ps.toks[min(ps.pos+n, len(ps.toks)-1)].kind }
func (ps *parser) text(t token) string { return ps.src[t.start:t.end] }
func (ps *parser) next() token {
	t := ps.toks[ps.pos]
	if t.kind != tEOF {
		ps.pos++
	}
	return t
}

// keyword reports whether the current token is the keyword kw (kw in upper case).
func (ps *parser) keyword(kw string) bool {
	t := ps.cur()
	return t.kind == tIdent && strings.EqualFold(ps.text(t), kw)
}

func (ps *parser) expect(k tokKind) token {
	if ps.cur().kind != k {
		ps.syntaxError()
	}
	return ps.next()
}

// syntaxError reports the current token as AWS does: the token, and "near" the
// source from the token before it to the token after it.
func (ps *parser) syntaxError() {
	t := ps.cur()
	tok := "<EOF>"
	start, end := t.start, t.end
	if t.kind != tEOF {
		tok = ps.text(t)
		if nt := ps.toks[ps.pos+1]; nt.kind != tEOF {
			end = nt.end
		}
	}
	if ps.pos > 0 {
		pt := ps.toks[ps.pos-1]
		start = pt.start
		if t.kind == tEOF {
			end = pt.end
		}
	}
	panic(ps.errf(`Syntax error; token: "%s", near: "%s"`, tok, ps.src[start:end]))
}

// ---- document paths and operands ----

func (ps *parser) parsePath() path {
	pa := append(ps.scratch[:0], elem{name: ps.pathName(), index: -1})
	for {
		switch ps.cur().kind {
		case tDot:
			ps.next()
			pa = append(pa, elem{name: ps.pathName(), index: -1})
		case tLBracket:
			ps.next()
			t := ps.cur()
			if t.kind != tNumber || t.end-t.start > maxIndexDigits {
				ps.syntaxError()
			}
			n, _ := strconv.Atoi(ps.text(t))
			ps.next()
			ps.expect(tRBracket)
			pa = append(pa, elem{index: n})
		default:
			if len(pa) > maxPathElems {
				ps.deferErr("The document path has too many nesting levels; nesting levels: %d", len(pa))
			}
			ps.scratch = pa[:0]
			return ps.keepPath(pa)
		}
	}
}

// pathName reads one attribute name of a path: a plain name (not a reserved word) or
// a #placeholder.
func (ps *parser) pathName() string {
	t := ps.cur()
	switch t.kind {
	case tIdent:
		ps.next()
		s := ps.text(t)
		if isReserved(s) {
			ps.deferErr("Attribute name is a reserved keyword; reserved keyword: %s", s)
		}
		return s
	case tName:
		ps.next()
		return ps.p.name(ps, ps.text(t))
	}
	ps.syntaxError()
	return ""
}

func (ps *parser) parseValue() *operand {
	t := ps.expect(tValue)
	key := ps.text(t)
	return ps.op(operand{kind: oValue, val: ps.p.value(ps, key), name: key})
}

// parseOperand reads a path, a value or a function call; in a condition it may be
// wrapped in parentheses.
func (ps *parser) parseOperand() *operand {
	t := ps.cur()
	switch t.kind {
	case tValue:
		return ps.parseValue()
	case tName:
		return ps.op(operand{kind: oPath, path: ps.parsePath()})
	case tIdent:
		if ps.peek(1) == tLParen {
			return ps.parseCall()
		}
		return ps.op(operand{kind: oPath, path: ps.parsePath()})
	case tLParen:
		if !ps.update {
			ps.next()
			o := ps.parseOperand()
			ps.expect(tRParen)
			return o
		}
	}
	ps.syntaxError()
	return nil
}

func (ps *parser) parseCall() *operand {
	name := ps.text(ps.next())
	arity, known := funcArity[name]
	if !known {
		ps.fail("Invalid function name; function: %s", name)
	}
	ps.ops++
	ps.expect(tLParen)
	o := ps.op(operand{kind: oFunc, name: name, args: ps.operands(arity)})
	for {
		if ps.update {
			o.args = append(o.args, ps.parseSetOperand())
		} else {
			o.args = append(o.args, ps.parseOperand())
		}
		if ps.cur().kind != tComma {
			break
		}
		ps.next()
	}
	ps.expect(tRParen)
	if len(o.args) != arity {
		ps.fail("Incorrect number of operands for operator or function; operator or function: %s, number of operands: %d", name, len(o.args))
	}
	ps.checkCall(o)
	return o
}

// checkCall checks a function's operands as AWS does when it parses them.
func (ps *parser) checkCall(o *operand) {
	name := o.name
	update := name == "if_not_exists" || name == "list_append"
	if update != ps.update {
		ps.fail("The function is not allowed to be used this way in an expression; function: %s", name)
	}
	for _, a := range o.args {
		if a.kind == oFunc && !ps.update {
			ps.fail("The function is not allowed to be used this way in an expression; function: %s", a.name)
		}
	}
	// begins_with, size and attribute_type take a value as their first operand too
	// (AWS accepts `begins_with(:v, a)` and `size(:v)`, whatever its guide's
	// examples show); the others need a document path.
	valueFirst := name == "list_append" || name == "begins_with" || name == "size" || name == "attribute_type"
	if !valueFirst && o.args[0].kind != oPath {
		ps.fail("Operator or function requires a document path; operator or function: %s", name)
	}
	if v := o.args[0]; v.kind == oValue && v.val != nil {
		switch name {
		case "size":
			if sizeOf(v.val) == nil {
				ps.fail("Incorrect operand type for operator or function; operator or function: %s, operand type: %s", name, v.val.Kind)
			}
		case "begins_with":
			if v.val.Kind != attr.KindS && v.val.Kind != attr.KindB {
				ps.fail("Incorrect operand type for operator or function; operator or function: %s, operand type: %s", name, v.val.Kind)
			}
		}
	}
	switch name {
	case "attribute_type":
		if v := o.args[1]; v.kind == oValue && v.val != nil {
			if v.val.Kind != attr.KindS {
				ps.fail("Incorrect operand type for operator or function; operator or function: %s, operand type: %s", name, v.val.Kind)
			}
			if attr.KindOf(v.val.S) == attr.KindInvalid {
				ps.fail("Invalid attribute type name found; type: %s, valid types: { B, NULL, SS, BOOL, L, BS, N, NS, S, M }", v.val.S)
			}
		}
	case "begins_with":
		if v := o.args[1]; v.kind == oValue && v.val != nil && v.val.Kind != attr.KindS && v.val.Kind != attr.KindB {
			ps.fail("Incorrect operand type for operator or function; operator or function: %s, operand type: %s", name, v.val.Kind)
		}
	case "list_append":
		for _, v := range o.args {
			if v.kind == oValue && v.val != nil && v.val.Kind != attr.KindL {
				ps.fail("Incorrect operand type for operator or function; operator or function: %s, operand type: %s", name, v.val.Kind)
			}
		}
	}
	if name == "contains" || name == "begins_with" {
		ps.checkDistinct(name, o.args)
	}
}

// checkDistinct refuses `a = a`, `contains(a, a)` and the like, as AWS does.
func (ps *parser) checkDistinct(op string, args []*operand) {
	first := args[0]
	if first.kind != oPath {
		return
	}
	for _, a := range args[1:] {
		if a.kind == oPath && a.path.equal(first.path) {
			ps.deferErr("The first operand must be distinct from the remaining operands for this operator or function; operator: %s, first operand: %s", op, first.path)
			return
		}
	}
}

// ---- conditions: OR < AND < NOT < comparisons, functions and parentheses ----

func (ps *parser) parseOr() *cond { return ps.parseChain("OR", cOr, ps.parseAnd) }

func (ps *parser) parseAnd() *cond { return ps.parseChain("AND", cAnd, ps.parseNot) }

// parseChain parses operands (each by operand) joined by the keyword kw, left to right,
// into conditions of kind.
func (ps *parser) parseChain(kw string, kind condKind, operand func() *cond) *cond {
	c := operand()
	for ps.keyword(kw) {
		ps.next()
		ps.ops++
		c = ps.cnd(cond{kind: kind, kids: ps.conds(c, operand())})
	}
	return c
}

func (ps *parser) parseNot() *cond {
	if ps.keyword("NOT") {
		ps.next()
		ps.ops++
		c := ps.parseNot()
		if c.kind == cOperand {
			ps.syntaxError()
		}
		return ps.cnd(cond{kind: cNot, kids: ps.conds(c)})
	}
	return ps.parsePrimary()
}

func (ps *parser) parsePrimary() *cond {
	if ps.cur().kind == tLParen {
		ps.next()
		ps.depth++
		c := ps.parseOr()
		ps.expect(tRParen)
		ps.depth--
		if c.kind == cOperand {
			// "(size(a)) < :v": the parentheses held an operand, not a condition.
			return ps.parseCompare(c.args[0])
		}
		if c.parens > 0 {
			ps.fail("The expression has redundant parentheses;")
		}
		c.parens++
		return c
	}
	return ps.parseCompare(ps.parseOperand())
}

// parseCompare reads what follows a condition's first operand.
func (ps *parser) parseCompare(left *operand) *cond {
	t := ps.cur()
	switch {
	case t.kind >= tEq && t.kind <= tGe:
		ps.next()
		ps.ops++
		right := ps.parseOperand()
		c := ps.cnd(cond{kind: cCmp, op: t.kind, args: append(ps.operands(2), left, right)})
		ps.checkComparable(c)
		if t.kind != tEq && t.kind != tNe {
			ps.checkOrdered(ps.text(t), c.args)
		}
		ps.checkDistinct(ps.text(t), c.args)
		return c
	case ps.keyword("BETWEEN"):
		ps.next()
		ps.ops++
		lo := ps.parseOperand()
		if !ps.keyword("AND") {
			ps.syntaxError()
		}
		ps.next()
		hi := ps.parseOperand()
		c := ps.cnd(cond{kind: cBetween, args: append(ps.operands(3), left, lo, hi)})
		ps.checkComparable(c)
		ps.checkOrdered("BETWEEN", c.args)
		ps.checkDistinct("BETWEEN", c.args)
		if lo.kind == oValue && hi.kind == oValue && lo.val != nil && hi.val != nil {
			if n, ok := attr.Compare(lo.val, hi.val); ok && n > 0 {
				ps.fail("The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: {%s}, upper bound operand: AttributeValue: {%s}", showValue(lo.val), showValue(hi.val))
			}
		}
		return c
	case ps.keyword("IN"):
		ps.next()
		ps.ops++
		ps.expect(tLParen)
		c := ps.cnd(cond{kind: cIn, args: append(ps.operands(4), left)})
		for {
			c.args = append(c.args, ps.parseOperand())
			if ps.cur().kind != tComma {
				break
			}
			ps.next()
		}
		ps.expect(tRParen)
		if n := len(c.args) - 1; n > maxInOperands {
			ps.fail("The IN operator is provided with too many operands; number of operands: %d", n)
		}
		ps.checkComparable(c)
		ps.checkDistinct("IN", c.args)
		return c
	}
	if left.kind == oFunc && isCondFunc(left.name) {
		return ps.cnd(cond{kind: cFunc, fn: left.name, args: left.args})
	}
	if ps.depth > 0 && t.kind == tRParen {
		return ps.cnd(cond{kind: cOperand, args: append(ps.operands(1), left)})
	}
	if left.kind == oFunc {
		ps.fail("The function is not allowed to be used this way in an expression; function: %s", left.name)
	}
	ps.syntaxError()
	return nil
}

// checkComparable refuses a condition function used as a comparator's operand.
func (ps *parser) checkComparable(c *cond) {
	for _, a := range c.args {
		if a.kind == oFunc && a.name != "size" {
			ps.fail("The function is not allowed to be used this way in an expression; function: %s", a.name)
		}
	}
}

// checkOrdered refuses an order comparison (<, <=, >, >=, BETWEEN) with a value of
// a type that has no order: AWS answers `a < :list` with a ValidationException,
// while an attribute of such a type in the item only makes the comparison false.
func (ps *parser) checkOrdered(op string, args []*operand) {
	for _, a := range args {
		if a.kind != oValue || a.val == nil {
			continue
		}
		switch a.val.Kind {
		case attr.KindS, attr.KindN, attr.KindB:
		default:
			ps.fail("Incorrect operand type for operator or function; operator or function: %s, operand type: %s", op, a.val.Kind)
		}
	}
}

// showValue writes a value as AWS's BETWEEN message does: N:5, S:abc.
func showValue(v *attr.Value) string {
	switch v.Kind {
	case attr.KindS, attr.KindN:
		return v.Kind.String() + ":" + v.S
	case attr.KindB:
		return "B:" + string(v.B)
	}
	return v.Kind.String()
}

// ---- update expressions ----

type actionKind uint8

const (
	aSet actionKind = iota
	aRemove
	aAdd
	aDelete
)

var clauseNames = [...]string{"SET", "REMOVE", "ADD", "DELETE"}

type action struct {
	kind actionKind
	path path
	val  *operand // SET: the value; ADD and DELETE: the operand
}

func (ps *parser) parseUpdate() []action {
	var seen [4]bool
	acts := make([]action, 0, 4)
	for ps.cur().kind != tEOF {
		t := ps.cur()
		if t.kind != tIdent {
			ps.syntaxError()
		}
		k := aSet
		for ; k <= aDelete; k++ {
			if strings.EqualFold(ps.text(t), clauseNames[k]) {
				break
			}
		}
		if k > aDelete {
			ps.syntaxError()
		}
		if seen[k] {
			ps.fail(`The "%s" section can only be used once in an update expression;`, clauseNames[k])
		}
		seen[k] = true
		ps.next()
		for {
			a := action{kind: k, path: ps.parsePath()}
			switch k {
			case aSet:
				ps.expect(tEq)
				a.val = ps.parseSetValue()
			case aAdd, aDelete:
				a.val = ps.parseValue()
				ps.checkAddDelete(k, a.val.val)
			}
			acts = append(acts, a)
			if ps.cur().kind != tComma {
				break
			}
			ps.next()
		}
	}
	for i := range acts {
		for j := i + 1; j < len(acts); j++ {
			ps.checkOverlap(acts[i].path, acts[j].path)
		}
	}
	return acts
}

// parseSetValue reads operand [+|- operand].
func (ps *parser) parseSetValue() *operand {
	a := ps.parseSetOperand()
	k := ps.cur().kind
	if k != tPlus && k != tMinus {
		return a
	}
	op := ps.text(ps.next())
	b := ps.parseSetOperand()
	for _, o := range [2]*operand{a, b} {
		if o.kind == oValue && o.val != nil && o.val.Kind != attr.KindN {
			ps.fail("Incorrect operand type for operator or function; operator or function: %s, operand type: %s", op, o.val.Kind)
		}
	}
	return ps.op(operand{kind: oArith, name: op, args: append(ps.operands(2), a, b)})
}

func (ps *parser) parseSetOperand() *operand {
	t := ps.cur()
	if t.kind == tIdent && ps.peek(1) == tLParen {
		return ps.parseCall()
	}
	if t.kind == tLParen {
		ps.syntaxError()
	}
	return ps.parseOperand()
}

var typeWords = map[attr.Kind]string{
	attr.KindS: "STRING", attr.KindN: "NUMBER", attr.KindB: "BINARY", attr.KindBOOL: "BOOLEAN",
	attr.KindNULL: "NULL", attr.KindM: "MAP", attr.KindL: "LIST",
	attr.KindSS: "STRING_SET", attr.KindNS: "NUMBER_SET", attr.KindBS: "BINARY_SET",
}

func isSet(k attr.Kind) bool { return k == attr.KindSS || k == attr.KindNS || k == attr.KindBS }

func (ps *parser) checkAddDelete(k actionKind, v *attr.Value) {
	if v == nil {
		return
	}
	if k == aAdd && !isSet(v.Kind) && v.Kind != attr.KindN {
		ps.fail("Incorrect operand type for operator or function; operator: ADD, operand type: %s, typeSet: ALLOWED_FOR_ADD_OPERAND", typeWords[v.Kind])
	}
	if k == aDelete && !isSet(v.Kind) {
		ps.fail("Incorrect operand type for operator or function; operator: DELETE, operand type: %s, typeSet: ALLOWED_FOR_DELETE_OPERAND", typeWords[v.Kind])
	}
}

// checkOverlap refuses two paths of one expression where one is a prefix of the
// other (or they are equal), or where they part at a step that is a map key in one
// and a list index in the other.
func (ps *parser) checkOverlap(a, b path) {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] == b[i] {
			continue
		}
		if (a[i].index >= 0) != (b[i].index >= 0) {
			ps.fail("Two document paths conflict with each other; must remove or rewrite one of these paths; path one: %s, path two: %s", a, b)
		}
		return
	}
	ps.fail("Two document paths overlap with each other; must remove or rewrite one of these paths; path one: %s, path two: %s", a, b)
}

// ---- projection expressions ----

func (ps *parser) parseProjection() []path {
	paths := make([]path, 0, 4)
	for {
		paths = append(paths, ps.parsePath())
		if ps.cur().kind != tComma {
			break
		}
		ps.next()
	}
	if ps.cur().kind != tEOF {
		ps.syntaxError()
	}
	for i := range paths {
		for j := i + 1; j < len(paths); j++ {
			ps.checkOverlap(paths[i], paths[j])
		}
	}
	return paths
}
