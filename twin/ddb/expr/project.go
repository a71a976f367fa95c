package expr

import (
	"slices"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// Projection expressions: attributes, nested map members and list elements.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ProjectionExpressions.html

// projNode is a trie of the projected paths. Overlapping paths are refused at parse
// time, so a leaf has no children.
type projNode struct {
	leaf  bool
	names map[string]*projNode
	idx   []idxChild // ascending index
}

type idxChild struct {
	i int
	n *projNode
}

func buildProjection(paths []path) *projNode {
	root := &projNode{}
	for _, pa := range paths {
		n := root
		for _, e := range pa {
			n = n.child(e)
		}
		n.leaf = true
	}
	return root
}

func (n *projNode) child(e elem) *projNode {
	if e.index >= 0 {
		i, found := slices.BinarySearchFunc(n.idx, e.index, func(c idxChild, t int) int { return c.i - t })
		if !found {
			n.idx = slices.Insert(n.idx, i, idxChild{i: e.index, n: &projNode{}})
		}
		return n.idx[i].n
	}
	if n.names == nil {
		n.names = make(map[string]*projNode)
	}
	c := n.names[e.name]
	if c == nil {
		c = &projNode{}
		n.names[e.name] = c
	}
	return c
}

func applyProjection(root *projNode, item attr.Item) attr.Item {
	if item == nil {
		return nil
	}
	out := make(attr.Item, len(root.names))
	for name, c := range root.names {
		if v := item[name]; v != nil {
			if p := project(v, c); p != nil {
				out[name] = p
			}
		}
	}
	return out
}

// project returns the part of v that n selects (a copy), or nil when nothing is there.
func project(v *attr.Value, n *projNode) *attr.Value {
	if n.leaf {
		return v.Clone()
	}
	switch {
	case v.Kind == attr.KindM && len(n.names) > 0:
		m := make(map[string]*attr.Value, len(n.names))
		for name, c := range n.names {
			if e := v.M[name]; e != nil {
				if p := project(e, c); p != nil {
					m[name] = p
				}
			}
		}
		if len(m) > 0 {
			return attr.Map(m)
		}
	case v.Kind == attr.KindL && len(n.idx) > 0:
		var l []*attr.Value
		for _, c := range n.idx {
			if c.i < len(v.L) {
				if p := project(v.L[c.i], c.n); p != nil {
					l = append(l, p)
				}
			}
		}
		if len(l) > 0 {
			return attr.List(l)
		}
	}
	return nil
}
