package expr

import (
	"errors"

	"github.com/fourlanes/fourlanes/internal/twin/ddb/attr"
)

// Error is an expression the caller got wrong; Msg is AWS's ValidationException wording,
// e.g. `Invalid ConditionExpression: Syntax error; token: "=", near: "a = = b"`.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

var errTODO = errors.New("expr: not implemented yet")

// Params are one request's ExpressionAttributeNames and ExpressionAttributeValues. Parsing
// records which were used, so that after parsing all of a request's expressions the server
// calls CheckUnused.
type Params struct {
	names      map[string]string
	values     map[string]*attr.Value
	usedNames  map[string]bool
	usedValues map[string]bool
}

// NewParams wraps one request's ExpressionAttributeNames and ExpressionAttributeValues.
func NewParams(names map[string]string, values map[string]*attr.Value) *Params {
	return &Params{names: names, values: values}
}

// CheckUnused returns AWS's error for a name or value the request supplied but no
// expression used.
func (p *Params) CheckUnused() error { return nil }

// Condition is a parsed ConditionExpression or FilterExpression.
type Condition struct{}

// ParseCondition parses a ConditionExpression or FilterExpression; kind is that parameter's
// name, used in error messages ("Invalid ConditionExpression: …").
func ParseCondition(s, kind string, p *Params) (*Condition, error) { return nil, errTODO }

// Eval evaluates against item (nil: no such item). Comparisons of different types are false.
func (c *Condition) Eval(item attr.Item) (bool, error) { return false, errTODO }

// Update is a parsed UpdateExpression.
type Update struct{}

// ParseUpdate parses an UpdateExpression.
func ParseUpdate(s string, p *Params) (*Update, error) { return nil, errTODO }

// Apply returns the updated item (item nil: a new item), never changing item or anything
// it shares. Runtime errors are *Error with AWS's wording.
func (u *Update) Apply(item attr.Item) (attr.Item, error) { return nil, errTODO }

// TopLevel returns the top-level attribute names the update sets or removes.
func (u *Update) TopLevel() []string { return nil }

// Projection is a parsed ProjectionExpression.
type Projection struct{}

// ParseProjection parses a ProjectionExpression.
func ParseProjection(s string, p *Params) (*Projection, error) { return nil, errTODO }

// Apply returns the projected copy of item (nested map paths and list indexes as AWS does).
func (pr *Projection) Apply(item attr.Item) attr.Item { return nil }

// KeyCondition is a parsed KeyConditionExpression: partition key equality and an optional
// sort-key condition. The server checks the names against the table/index key schema.
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
func ParseKeyCondition(s string, p *Params) (*KeyCondition, error) { return nil, errTODO }

// Match reports whether the sort-key value v satisfies r.
func (r *RangeCond) Match(v *attr.Value) bool { return false }
