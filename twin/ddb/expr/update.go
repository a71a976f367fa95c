package expr

import (
	"bytes"
	"slices"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// Update expressions: SET (with + and -, if_not_exists, list_append), REMOVE, ADD, DELETE.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.UpdateExpressions.html

var (
	errMissing     = &Error{Msg: "The provided expression refers to an attribute that does not exist in the item"}
	errOperandType = &Error{Msg: "An operand in the update expression has an incorrect data type"}
	errInvalidPath = &Error{Msg: "The document path provided in the update expression is invalid for update"}
)

// applyUpdate computes every SET value from the item as it was ("DynamoDB evaluates
// every action against the item's attribute values as they were before the update"),
// then applies SET (by path, so list elements past the end append in index order),
// ADD and DELETE, and REMOVE last, list indexes highest first, so each action's path
// means what it meant in the original item.
func applyUpdate(acts []action, item attr.Item) (attr.Item, error) {
	var vals []*attr.Value
	for i, a := range acts {
		if a.kind != aSet {
			continue
		}
		if vals == nil {
			vals = make([]*attr.Value, len(acts))
		}
		v, err := evalSet(a.val, item)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	w := writer{item: make(attr.Item, len(item)+len(acts))}
	for k, v := range item {
		w.item[k] = v
	}
	// "If you add multiple elements in a single SET operation, the elements are sorted
	// in order by element number": SET l[5], l[3] past the end append [3] first.
	order := make([]int, 0, len(acts))
	for i, a := range acts {
		if a.kind == aSet {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(i, j int) int { return comparePaths(acts[i].path, acts[j].path) })
	for _, i := range order {
		if err := w.set(acts[i].path, vals[i]); err != nil {
			return nil, err
		}
	}
	var removes []path
	for _, a := range acts {
		var err error
		switch a.kind {
		case aAdd:
			err = w.add(a.path, a.val.val)
		case aDelete:
			err = w.delete(a.path, a.val.val)
		case aRemove:
			removes = append(removes, a.path)
		}
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(removes, func(a, b path) int { return -comparePaths(a, b) })
	for _, pa := range removes {
		if err := w.remove(pa); err != nil {
			return nil, err
		}
	}
	return w.item, nil
}

func comparePaths(a, b path) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		switch {
		case x.index != y.index:
			if x.index < y.index {
				return -1
			}
			return 1
		case x.name != y.name:
			if x.name < y.name {
				return -1
			}
			return 1
		}
	}
	return len(a) - len(b)
}

// evalSetPair computes o's two operands (list_append's, or + and -'s), in order.
func evalSetPair(o *operand, item attr.Item) (a, b *attr.Value, err error) {
	if a, err = evalSet(o.args[0], item); err != nil {
		return nil, nil, err
	}
	if b, err = evalSet(o.args[1], item); err != nil {
		return nil, nil, err
	}
	return a, b, nil
}

// evalSet computes a SET value against the original item.
func evalSet(o *operand, item attr.Item) (*attr.Value, error) {
	switch o.kind {
	case oValue:
		return o.val, nil
	case oPath:
		if v := resolve(item, o.path); v != nil {
			return v, nil
		}
		return nil, errMissing
	case oFunc:
		if o.name == "if_not_exists" {
			if v := resolve(item, o.args[0].path); v != nil {
				return v, nil
			}
			return evalSet(o.args[1], item)
		}
		// list_append
		a, b, err := evalSetPair(o, item)
		if err != nil {
			return nil, err
		}
		if a.Kind != attr.KindL || b.Kind != attr.KindL {
			return nil, errOperandType
		}
		l := make([]*attr.Value, 0, len(a.L)+len(b.L))
		return attr.List(append(append(l, a.L...), b.L...)), nil
	case oArith:
		a, b, err := evalSetPair(o, item)
		if err != nil {
			return nil, err
		}
		if a.Kind != attr.KindN || b.Kind != attr.KindN {
			return nil, errOperandType
		}
		n, err := attr.AddNumbers(a.S, b.S, o.name == "-")
		if err != nil {
			return nil, &Error{Msg: err.Error()}
		}
		return attr.Num(n), nil
	}
	return nil, errOperandType
}

// writer changes a copy of an item: the top-level map is already a copy, and every
// map or list on the way to a change is copied once (fresh holds the copies), so the
// original item and everything it shares stay as they were.
type writer struct {
	item  attr.Item
	fresh map[*attr.Value]struct{}
}

func (w *writer) own(v *attr.Value) *attr.Value {
	if _, ok := w.fresh[v]; ok {
		return v
	}
	c := *v
	switch v.Kind {
	case attr.KindM:
		c.M = make(map[string]*attr.Value, len(v.M)+1)
		for k, e := range v.M {
			c.M[k] = e
		}
	case attr.KindL:
		c.L = append(make([]*attr.Value, 0, len(v.L)+1), v.L...)
	default:
		return v // scalars are replaced, never changed
	}
	if w.fresh == nil {
		w.fresh = make(map[*attr.Value]struct{})
	}
	w.fresh[&c] = struct{}{}
	return &c
}

// container returns, ready to change, the map or list holding the last step of pa.
func (w *writer) container(pa path) (*attr.Value, bool) {
	v := w.item[pa[0].name]
	if v == nil {
		return nil, false
	}
	v = w.own(v)
	w.item[pa[0].name] = v
	for _, e := range pa[1 : len(pa)-1] {
		var child *attr.Value
		if e.index >= 0 {
			if v.Kind != attr.KindL || e.index >= len(v.L) {
				return nil, false
			}
			child = w.own(v.L[e.index])
			v.L[e.index] = child
		} else {
			if v.Kind != attr.KindM || v.M[e.name] == nil {
				return nil, false
			}
			child = w.own(v.M[e.name])
			v.M[e.name] = child
		}
		v = child
	}
	return v, true
}

// set stores v at pa; an index past a list's end appends, as AWS does.
func (w *writer) set(pa path, v *attr.Value) error {
	if len(pa) == 1 {
		w.item[pa[0].name] = v
		return nil
	}
	c, ok := w.container(pa)
	if !ok {
		return errInvalidPath
	}
	last := pa[len(pa)-1]
	switch {
	case last.index >= 0 && c.Kind == attr.KindL:
		if last.index < len(c.L) {
			c.L[last.index] = v
		} else {
			c.L = append(c.L, v)
		}
	case last.index < 0 && c.Kind == attr.KindM:
		c.M[last.name] = v
	default:
		return errInvalidPath
	}
	return nil
}

// remove deletes pa; a missing attribute, member or element is no change, a list
// element's removal closes the gap.
func (w *writer) remove(pa path) error {
	if len(pa) == 1 {
		delete(w.item, pa[0].name)
		return nil
	}
	if resolve(w.item, pa) == nil {
		// Nothing to remove; still refuse a path through a missing or wrong-typed parent.
		if parent := resolve(w.item, pa[:len(pa)-1]); parent == nil || !fits(parent, pa[len(pa)-1]) {
			return errInvalidPath
		}
		return nil
	}
	c, ok := w.container(pa)
	if !ok {
		return errInvalidPath
	}
	last := pa[len(pa)-1]
	if last.index >= 0 {
		c.L = slices.Delete(c.L, last.index, last.index+1)
	} else {
		delete(c.M, last.name)
	}
	return nil
}

func fits(parent *attr.Value, e elem) bool {
	if e.index >= 0 {
		return parent.Kind == attr.KindL
	}
	return parent.Kind == attr.KindM
}

// add is ADD: a number adds, a set joins; a missing attribute is created.
func (w *writer) add(pa path, v *attr.Value) error {
	cur := resolve(w.item, pa)
	if cur == nil {
		return w.set(pa, v)
	}
	if cur.Kind != v.Kind {
		return errOperandType
	}
	switch v.Kind {
	case attr.KindN:
		n, err := attr.AddNumbers(cur.S, v.S, false)
		if err != nil {
			return &Error{Msg: err.Error()}
		}
		return w.set(pa, attr.Num(n))
	case attr.KindSS, attr.KindNS:
		out := &attr.Value{Kind: v.Kind, SS: slices.Clone(cur.SS)}
		for _, m := range v.SS {
			if !memberOf(out.SS, m) {
				out.SS = append(out.SS, m)
			}
		}
		return w.set(pa, out)
	case attr.KindBS:
		out := &attr.Value{Kind: v.Kind, BS: slices.Clone(cur.BS)}
		for _, m := range v.BS {
			if !slices.ContainsFunc(out.BS, func(b []byte) bool { return bytes.Equal(b, m) }) {
				out.BS = append(out.BS, m)
			}
		}
		return w.set(pa, out)
	}
	return errOperandType
}

// delete is DELETE: set difference; a set left empty is removed.
func (w *writer) delete(pa path, v *attr.Value) error {
	cur := resolve(w.item, pa)
	if cur == nil {
		return nil
	}
	if cur.Kind != v.Kind {
		return errOperandType
	}
	out := &attr.Value{Kind: v.Kind}
	n := 0
	switch v.Kind {
	case attr.KindSS, attr.KindNS:
		for _, m := range cur.SS {
			if !memberOf(v.SS, m) {
				out.SS = append(out.SS, m)
			}
		}
		n = len(out.SS)
	case attr.KindBS:
		for _, m := range cur.BS {
			if !slices.ContainsFunc(v.BS, func(b []byte) bool { return bytes.Equal(b, m) }) {
				out.BS = append(out.BS, m)
			}
		}
		n = len(out.BS)
	default:
		return errOperandType
	}
	if n == 0 {
		return w.remove(pa)
	}
	return w.set(pa, out)
}
