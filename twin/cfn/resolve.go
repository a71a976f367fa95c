package cfn

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Identities answers the two questions intrinsic functions ask of the
// resources of a stack: what Ref and Fn::GetAtt return for a logical ID.
// The local twin answers with the local resources it created.
type Identities interface {
	Ref(logicalID string) (string, error)
	GetAtt(logicalID, attribute string) (any, error)
}

// Pseudo holds the pseudo parameters (AWS::Region, …) a template may Ref.
type Pseudo struct {
	Region, AccountID, StackName, StackID string
}

// ErrUnsupported is wrapped by errors for intrinsic functions the resolver
// does not implement.
var ErrUnsupported = errors.New("unsupported")

// noValue stands for AWS::NoValue: the enclosing key or list item is removed.
type noValue struct{}

// Resolver evaluates intrinsic functions in property values.
type Resolver struct {
	T      *Template
	IDs    Identities
	Pseudo Pseudo
}

// Resolve returns v with every intrinsic function evaluated. Values are
// JSON-shaped (maps, slices, strings, float64, bools, nil).
func (rv *Resolver) Resolve(v any) (any, error) {
	out, err := rv.resolve(v)
	if err != nil {
		return nil, err
	}
	if _, ok := out.(noValue); ok {
		return nil, nil
	}
	return out, nil
}

// Prop resolves the property at path of r; ok is false when it is absent.
func (rv *Resolver) Prop(r *Resource, path ...string) (v any, ok bool, err error) {
	raw, ok := r.Prop(path...)
	if !ok {
		return nil, false, nil
	}
	v, err = rv.Resolve(raw)
	if err != nil {
		return nil, true, fmt.Errorf("%s.%s: %w", r.LogicalID, strings.Join(path, "."), err)
	}
	return v, true, nil
}

// Decode resolves the named top-level properties of r (all of them when
// none are named) and decodes them into out, a pointer to a struct whose
// fields carry the CloudFormation property names. Properties that are not
// named are never resolved, so a reference the twin cannot answer (an IAM
// role, say) only fails where it matters.
func (rv *Resolver) Decode(r *Resource, out any, names ...string) error {
	if len(names) == 0 {
		for k := range r.Properties {
			names = append(names, k)
		}
	}
	m := map[string]any{}
	for _, n := range names {
		v, ok, err := rv.Prop(r, n)
		if err != nil {
			return err
		}
		if ok && v != nil {
			m[n] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("%s: %w", r.LogicalID, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s (%s) properties: %w", r.LogicalID, r.Type, err)
	}
	return nil
}

func (rv *Resolver) resolve(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 1 {
			for k, arg := range t {
				if k == "Ref" || strings.HasPrefix(k, "Fn::") {
					return rv.intrinsic(k, arg)
				}
			}
		}
		out := make(map[string]any, len(t))
		for k, x := range t {
			r, err := rv.resolve(x)
			if err != nil {
				return nil, err
			}
			if _, skip := r.(noValue); skip {
				continue
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, 0, len(t))
		for _, x := range t {
			r, err := rv.resolve(x)
			if err != nil {
				return nil, err
			}
			if _, skip := r.(noValue); skip {
				continue
			}
			out = append(out, r)
		}
		return out, nil
	}
	return v, nil
}

func (rv *Resolver) intrinsic(fn string, arg any) (any, error) {
	switch fn {
	case "Ref":
		name, ok := arg.(string)
		if !ok {
			return nil, fmt.Errorf("Ref: want a name, got %v", arg)
		}
		return rv.ref(name)
	case "Fn::GetAtt":
		var id, attr string
		switch a := arg.(type) {
		case string:
			var ok bool
			id, attr, ok = strings.Cut(a, ".")
			if !ok {
				return nil, fmt.Errorf("Fn::GetAtt %q: want Resource.Attribute", a)
			}
		case []any:
			parts, err := rv.strings(a)
			if err != nil || len(parts) != 2 {
				return nil, fmt.Errorf("Fn::GetAtt %v: want [Resource, Attribute]", a)
			}
			id, attr = parts[0], parts[1]
		default:
			return nil, fmt.Errorf("Fn::GetAtt %v: want [Resource, Attribute]", arg)
		}
		if _, ok := rv.T.Resources[id]; !ok {
			return nil, fmt.Errorf("Fn::GetAtt: no resource %s", id)
		}
		v, err := rv.IDs.GetAtt(id, attr)
		if err != nil {
			return nil, fmt.Errorf("Fn::GetAtt %s.%s: %w", id, attr, err)
		}
		return v, nil
	case "Fn::Join":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("Fn::Join: want [delimiter, [values]]")
		}
		delim, ok := a[0].(string)
		if !ok {
			return nil, fmt.Errorf("Fn::Join: delimiter %v is not a string", a[0])
		}
		list, err := rv.resolve(a[1])
		if err != nil {
			return nil, err
		}
		items, ok := list.([]any)
		if !ok {
			return nil, fmt.Errorf("Fn::Join: values %v are not a list", list)
		}
		parts, err := rv.strings(items)
		if err != nil {
			return nil, fmt.Errorf("Fn::Join: %w", err)
		}
		return strings.Join(parts, delim), nil
	case "Fn::Select":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("Fn::Select: want [index, list]")
		}
		idx, err := rv.resolve(a[0])
		if err != nil {
			return nil, err
		}
		i, err := toInt(idx)
		if err != nil {
			return nil, fmt.Errorf("Fn::Select: index: %w", err)
		}
		list, err := rv.resolve(a[1])
		if err != nil {
			return nil, err
		}
		items, ok := list.([]any)
		if !ok {
			return nil, fmt.Errorf("Fn::Select: %v is not a list", list)
		}
		if i < 0 || i >= len(items) {
			return nil, fmt.Errorf("Fn::Select: index %d out of range (%d items)", i, len(items))
		}
		return items[i], nil
	case "Fn::Split":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("Fn::Split: want [delimiter, string]")
		}
		delim, ok := a[0].(string)
		if !ok {
			return nil, fmt.Errorf("Fn::Split: delimiter %v is not a string", a[0])
		}
		s, err := rv.resolve(a[1])
		if err != nil {
			return nil, err
		}
		str, ok := s.(string)
		if !ok {
			return nil, fmt.Errorf("Fn::Split: %v is not a string", s)
		}
		var out []any
		for _, p := range strings.Split(str, delim) {
			out = append(out, p)
		}
		return out, nil
	case "Fn::Sub":
		return rv.sub(arg)
	case "Fn::Base64":
		s, err := rv.resolve(arg)
		if err != nil {
			return nil, err
		}
		str, ok := s.(string)
		if !ok {
			return nil, fmt.Errorf("Fn::Base64: %v is not a string", s)
		}
		return base64.StdEncoding.EncodeToString([]byte(str)), nil
	case "Fn::FindInMap":
		a, ok := arg.([]any)
		if !ok || len(a) < 3 {
			return nil, fmt.Errorf("Fn::FindInMap: want [map, key, key]")
		}
		resolved, err := rv.resolve(a[:3])
		if err != nil {
			return nil, err
		}
		keys, err := rv.strings(resolved.([]any))
		if err != nil {
			return nil, fmt.Errorf("Fn::FindInMap: %w", err)
		}
		v, ok := rv.T.Mappings[keys[0]][keys[1]][keys[2]]
		if !ok {
			return nil, fmt.Errorf("Fn::FindInMap: no %s/%s/%s", keys[0], keys[1], keys[2])
		}
		return v, nil
	case "Fn::If":
		a, ok := arg.([]any)
		if !ok || len(a) != 3 {
			return nil, fmt.Errorf("Fn::If: want [condition, then, else]")
		}
		name, ok := a[0].(string)
		if !ok {
			return nil, fmt.Errorf("Fn::If: condition name %v is not a string", a[0])
		}
		c, err := rv.Condition(name)
		if err != nil {
			return nil, err
		}
		if c {
			return rv.resolve(a[1])
		}
		return rv.resolve(a[2])
	case "Fn::Equals", "Fn::And", "Fn::Or", "Fn::Not":
		return rv.evalCondition(map[string]any{fn: arg})
	}
	return nil, fmt.Errorf("intrinsic function %s: %w by the local twin", fn, ErrUnsupported)
}

func (rv *Resolver) ref(name string) (any, error) {
	switch name {
	case "AWS::Region":
		return rv.Pseudo.Region, nil
	case "AWS::AccountId":
		return rv.Pseudo.AccountID, nil
	case "AWS::Partition":
		return "aws", nil
	case "AWS::URLSuffix":
		return "amazonaws.com", nil
	case "AWS::StackName":
		return rv.Pseudo.StackName, nil
	case "AWS::StackId":
		return rv.Pseudo.StackID, nil
	case "AWS::NoValue":
		return noValue{}, nil
	case "AWS::NotificationARNs":
		return []any{}, nil
	}
	if p, ok := rv.T.Parameters[name]; ok {
		return p.Default, nil
	}
	if _, ok := rv.T.Resources[name]; !ok {
		return nil, fmt.Errorf("Ref: no resource or parameter %s", name)
	}
	v, err := rv.IDs.Ref(name)
	if err != nil {
		return nil, fmt.Errorf("Ref %s: %w", name, err)
	}
	return v, nil
}

// sub evaluates Fn::Sub: "${Name}", "${Name.Attr}", "${AWS::Region}" and
// "${!Literal}", with optional variables.
func (rv *Resolver) sub(arg any) (any, error) {
	var tmpl string
	vars := map[string]any{}
	switch a := arg.(type) {
	case string:
		tmpl = a
	case []any:
		if len(a) != 2 {
			return nil, fmt.Errorf("Fn::Sub: want string or [string, {vars}]")
		}
		s, ok := a[0].(string)
		if !ok {
			return nil, fmt.Errorf("Fn::Sub: template %v is not a string", a[0])
		}
		tmpl = s
		m, ok := a[1].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("Fn::Sub: variables %v are not a map", a[1])
		}
		for k, v := range m {
			r, err := rv.resolve(v)
			if err != nil {
				return nil, err
			}
			vars[k] = r
		}
	default:
		return nil, fmt.Errorf("Fn::Sub: want string or [string, {vars}]")
	}
	var b strings.Builder
	for {
		i := strings.Index(tmpl, "${")
		if i < 0 {
			b.WriteString(tmpl)
			return b.String(), nil
		}
		b.WriteString(tmpl[:i])
		j := strings.IndexByte(tmpl[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("Fn::Sub: unclosed ${ in %q", tmpl)
		}
		name := tmpl[i+2 : i+j]
		tmpl = tmpl[i+j+1:]
		if strings.HasPrefix(name, "!") {
			b.WriteString("${" + name[1:] + "}")
			continue
		}
		var v any
		var err error
		if x, ok := vars[name]; ok {
			v = x
		} else if id, attr, ok := strings.Cut(name, "."); ok && !strings.HasPrefix(name, "AWS::") {
			v, err = rv.intrinsic("Fn::GetAtt", []any{id, attr})
		} else {
			v, err = rv.ref(name)
		}
		if err != nil {
			return nil, fmt.Errorf("Fn::Sub ${%s}: %w", name, err)
		}
		s, err := scalarString(v)
		if err != nil {
			return nil, fmt.Errorf("Fn::Sub ${%s}: %w", name, err)
		}
		b.WriteString(s)
	}
}

// Condition evaluates the named template condition.
func (rv *Resolver) Condition(name string) (bool, error) {
	c, ok := rv.T.Conditions[name]
	if !ok {
		return false, fmt.Errorf("no condition %s", name)
	}
	v, err := rv.evalCondition(c)
	if err != nil {
		return false, fmt.Errorf("condition %s: %w", name, err)
	}
	return v.(bool), nil
}

func (rv *Resolver) evalCondition(c any) (any, error) {
	m, ok := c.(map[string]any)
	if !ok || len(m) != 1 {
		return nil, fmt.Errorf("condition %v: want one function", c)
	}
	for fn, arg := range m {
		if fn == "Condition" {
			name, _ := arg.(string)
			return rv.Condition(name)
		}
		a, ok := arg.([]any)
		if !ok {
			return nil, fmt.Errorf("%s: want a list", fn)
		}
		switch fn {
		case "Fn::Equals":
			if len(a) != 2 {
				return nil, fmt.Errorf("Fn::Equals: want two values")
			}
			x, err := rv.resolve(a[0])
			if err != nil {
				return nil, err
			}
			y, err := rv.resolve(a[1])
			if err != nil {
				return nil, err
			}
			return reflect.DeepEqual(x, y), nil
		case "Fn::Not", "Fn::And", "Fn::Or":
			var vals []bool
			for _, x := range a {
				v, err := rv.evalCondition(x)
				if err != nil {
					return nil, err
				}
				vals = append(vals, v.(bool))
			}
			switch fn {
			case "Fn::Not":
				if len(vals) != 1 {
					return nil, fmt.Errorf("Fn::Not: want one condition")
				}
				return !vals[0], nil
			case "Fn::And":
				for _, v := range vals {
					if !v {
						return false, nil
					}
				}
				return true, nil
			default:
				for _, v := range vals {
					if v {
						return true, nil
					}
				}
				return false, nil
			}
		}
		return nil, fmt.Errorf("condition function %s: %w", fn, ErrUnsupported)
	}
	panic("unreachable")
}

func (rv *Resolver) strings(items []any) ([]string, error) {
	out := make([]string, 0, len(items))
	for _, x := range items {
		r, err := rv.resolve(x)
		if err != nil {
			return nil, err
		}
		s, err := scalarString(r)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func scalarString(v any) (string, error) {
	switch t := v.(type) {
	case string:
		return t, nil
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64), nil
	case int:
		return strconv.Itoa(t), nil
	case bool:
		return strconv.FormatBool(t), nil
	case json.Number:
		return t.String(), nil
	}
	return "", fmt.Errorf("%v is not a string", v)
}

func toInt(v any) (int, error) {
	switch t := v.(type) {
	case float64:
		return int(t), nil
	case int:
		return t, nil
	case string:
		return strconv.Atoi(t)
	}
	return 0, fmt.Errorf("%v is not a number", v)
}

// References returns the logical IDs that v refers to (Ref, Fn::GetAtt and
// ${…} in Fn::Sub), sorted; pseudo parameters and parameters are left out.
func (t *Template) References(v any) []string {
	seen := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 1 {
				if name, ok := x["Ref"].(string); ok {
					seen[name] = true
					return
				}
				if a, ok := x["Fn::GetAtt"]; ok {
					switch g := a.(type) {
					case []any:
						if len(g) > 0 {
							if id, ok := g[0].(string); ok {
								seen[id] = true
							}
						}
					case string:
						id, _, _ := strings.Cut(g, ".")
						seen[id] = true
					}
					return
				}
				if a, ok := x["Fn::Sub"]; ok {
					s, _ := a.(string)
					if l, ok := a.([]any); ok && len(l) > 0 {
						s, _ = l[0].(string)
						walk(l[1:])
					}
					for {
						i := strings.Index(s, "${")
						if i < 0 {
							break
						}
						j := strings.IndexByte(s[i:], '}')
						if j < 0 {
							break
						}
						name := s[i+2 : i+j]
						s = s[i+j+1:]
						if !strings.HasPrefix(name, "!") {
							id, _, _ := strings.Cut(name, ".")
							seen[id] = true
						}
					}
					return
				}
			}
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	walk(v)
	var out []string
	for id := range seen {
		if _, ok := t.Resources[id]; ok {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}
