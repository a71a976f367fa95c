package expr

import (
	"slices"
	"strings"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// Error is an expression the caller got wrong; Msg is AWS's ValidationException wording,
// e.g. `Invalid ConditionExpression: Syntax error; token: "=", near: "a = = b"`.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// Params are one request's ExpressionAttributeNames and ExpressionAttributeValues. Parsing
// records which were used, so that after parsing all of a request's expressions the server
// calls CheckUnused.
type Params struct {
	names      map[string]string
	values     map[string]*attr.Value
	usedNames  []string // a request has few placeholders: a slice beats a map
	usedValues []string
}

// NewParams wraps one request's ExpressionAttributeNames and ExpressionAttributeValues
// (either may be nil). The maps are read, never changed.
func NewParams(names map[string]string, values map[string]*attr.Value) *Params {
	return &Params{names: names, values: values}
}

// name resolves a #placeholder, recording its use.
func (p *Params) name(ps *parser, key string) string {
	n, ok := p.names[key]
	if !ok {
		ps.deferErr("An expression attribute name used in the document path is not defined; attribute name: %s", key)
		return key
	}
	if !slices.Contains(p.usedNames, key) {
		p.usedNames = append(p.usedNames, key)
	}
	return n
}

// value resolves a :placeholder, recording its use; nil when it is not defined.
func (p *Params) value(ps *parser, key string) *attr.Value {
	v, ok := p.values[key]
	if !ok || v == nil {
		ps.deferErr("An expression attribute value used in expression is not defined; attribute value: %s", key)
		return nil
	}
	if !slices.Contains(p.usedValues, key) {
		p.usedValues = append(p.usedValues, key)
	}
	return v
}

// CheckUnused returns AWS's error for names or values the request supplied but no
// expression used: "Value provided in ExpressionAttributeNames unused in expressions:
// keys: {#a, #b}" (names are checked before values; keys sorted).
func (p *Params) CheckUnused() error {
	if keys := unused(p.names, p.usedNames); keys != "" {
		return &Error{Msg: "Value provided in ExpressionAttributeNames unused in expressions: keys: {" + keys + "}"}
	}
	if keys := unused(p.values, p.usedValues); keys != "" {
		return &Error{Msg: "Value provided in ExpressionAttributeValues unused in expressions: keys: {" + keys + "}"}
	}
	return nil
}

func unused[V any](m map[string]V, used []string) string {
	var keys []string
	for k := range m {
		if !slices.Contains(used, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

// Condition is a parsed ConditionExpression or FilterExpression.
type Condition struct {
	root *cond
}

// ParseCondition parses a ConditionExpression or FilterExpression; kind is that parameter's
// name, used in error messages ("Invalid ConditionExpression: …").
func ParseCondition(s, kind string, p *Params) (*Condition, error) {
	ps := newParser(s, kind, p)
	var root *cond
	if err := ps.run(func() {
		root = ps.parseOr()
		if ps.cur().kind != tEOF {
			ps.syntaxError()
		}
	}); err != nil {
		return nil, err
	}
	return &Condition{root: root}, nil
}

// Eval evaluates against item (nil: no such item). Comparisons of different types are
// false. A condition that parsed has no runtime errors on AWS, so err is always nil
// today; it is there so the server's call sites need not change if one appears.
func (c *Condition) Eval(item attr.Item) (bool, error) {
	return evalCond(c.root, item), nil
}

// TopLevel returns the top-level attribute names the condition reads, each once, in the
// order written: a for a.b[1], #n resolved. The server refuses a Query filter on a key
// attribute with it ("Filter Expression can only contain non-primary key attributes").
func (c *Condition) TopLevel() []string {
	var out []string
	var walkOperand func(o *operand)
	walkOperand = func(o *operand) {
		if o.kind == oPath {
			if !slices.Contains(out, o.path[0].name) {
				out = append(out, o.path[0].name)
			}
			return
		}
		for _, a := range o.args {
			walkOperand(a)
		}
	}
	var walk func(n *cond)
	walk = func(n *cond) {
		for _, o := range n.args {
			walkOperand(o)
		}
		for _, k := range n.kids {
			walk(k)
		}
	}
	walk(c.root)
	return out
}

// Update is a parsed UpdateExpression.
type Update struct {
	acts []action
	top  []string
}

// ParseUpdate parses an UpdateExpression.
func ParseUpdate(s string, p *Params) (*Update, error) {
	ps := newParser(s, "UpdateExpression", p)
	ps.update = true
	var acts []action
	if err := ps.run(func() { acts = ps.parseUpdate() }); err != nil {
		return nil, err
	}
	u := &Update{acts: acts}
	for _, a := range acts {
		if !slices.Contains(u.top, a.path[0].name) {
			u.top = append(u.top, a.path[0].name)
		}
	}
	return u, nil
}

// Apply returns the updated item (item nil: a new item), never changing item or anything
// it shares (it copies what it changes). Runtime errors are *Error with AWS's wording
// ("The provided expression refers to an attribute that does not exist in the item",
// "An operand in the update expression has an incorrect data type", …).
func (u *Update) Apply(item attr.Item) (attr.Item, error) {
	return applyUpdate(u.acts, item)
}

// DeletesOnly reports whether every action of the update removes something (REMOVE,
// DELETE): such an update of a missing item creates nothing, as on AWS.
func (u *Update) DeletesOnly() bool {
	for _, a := range u.acts {
		if a.kind != aRemove && a.kind != aDelete {
			return false
		}
	}
	return len(u.acts) > 0
}

// TopLevel returns the top-level attribute names the update sets or removes (so the server
// refuses "Cannot update attribute pk. This attribute is part of the key").
func (u *Update) TopLevel() []string { return u.top }

// UpdatedPaths returns a projection of exactly the document paths the update sets,
// removes, adds to or deletes from: what ReturnValues UPDATED_OLD and UPDATED_NEW
// return (SET m.a.b = :v returns {m: {a: {b}}}, not all of m).
func (u *Update) UpdatedPaths() *Projection {
	paths := make([]path, len(u.acts))
	for i, a := range u.acts {
		paths[i] = a.path
	}
	return &Projection{root: buildProjection(paths)}
}

// Projection is a parsed ProjectionExpression.
type Projection struct {
	root *projNode
}

// ParseProjection parses a ProjectionExpression.
func ParseProjection(s string, p *Params) (*Projection, error) {
	ps := newParser(s, "ProjectionExpression", p)
	var paths []path
	if err := ps.run(func() { paths = ps.parseProjection() }); err != nil {
		return nil, err
	}
	return &Projection{root: buildProjection(paths)}, nil
}

// Apply returns the projected copy of item: only the attributes, map members and list
// elements the expression names (list elements keep their order and close up, as AWS
// returns them). A nil item gives nil.
func (pr *Projection) Apply(item attr.Item) attr.Item {
	return applyProjection(pr.root, item)
}

// KeyCondition is a parsed KeyConditionExpression: partition key equality and an optional
// sort-key condition. The server checks the names against the table/index key schema.
//
// The parser cannot know which attribute is the partition key: it takes the equality
// when only one condition is an equality, and the first condition written when both are
// (then Range.Op is "=", and the server swaps the two if the schema says otherwise).
type KeyCondition struct {
	HashName  string
	Hash      *attr.Value
	RangeName string // "" without a sort-key condition
	Range     *RangeCond
}

// RangeCond is a sort-key condition.
type RangeCond struct {
	Op   string      // "=", "<", "<=", ">", ">=", "BETWEEN", "begins_with"
	A, B *attr.Value // B only for BETWEEN
}

// ParseKeyCondition parses a KeyConditionExpression.
func ParseKeyCondition(s string, p *Params) (*KeyCondition, error) {
	ps := newParser(s, "KeyConditionExpression", p)
	var kc *KeyCondition
	if err := ps.run(func() {
		root := ps.parseOr()
		if ps.cur().kind != tEOF {
			ps.syntaxError()
		}
		kc = ps.keyCondition(root)
	}); err != nil {
		return nil, err
	}
	return kc, nil
}

// Match reports whether the sort-key value v satisfies r. Values of another type
// than the condition's never match.
func (r *RangeCond) Match(v *attr.Value) bool {
	return r.match(v)
}
