package cfn

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Template is a parsed CloudFormation template.
type Template struct {
	Description string
	Parameters  map[string]Parameter
	Mappings    map[string]map[string]map[string]any
	Conditions  map[string]any
	Resources   map[string]*Resource
	Outputs     map[string]Output
	// Dir is the folder the template was read from (a cloud assembly, for a
	// synthesized template): asset paths are relative to it. Empty for a
	// template parsed from bytes.
	Dir string
}

// Parameter is a template parameter; the twin uses its default.
type Parameter struct {
	Type    string
	Default any
}

// Resource is one entry of Resources.
type Resource struct {
	LogicalID  string         `json:"-"`
	Type       string         `json:"Type"`
	Properties map[string]any `json:"Properties,omitempty"`
	Metadata   map[string]any `json:"Metadata,omitempty"`
	Condition  string         `json:"Condition,omitempty"`
}

// Output is one entry of Outputs.
type Output struct {
	Description string
	Value       any
}

// Parse reads a template from JSON.
func Parse(b []byte) (*Template, error) {
	var raw struct {
		Description string
		Parameters  map[string]Parameter
		Mappings    map[string]map[string]map[string]any
		Conditions  map[string]any
		Resources   map[string]*Resource
		Outputs     map[string]Output
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("parse template: %w", err)
	}
	if len(raw.Resources) == 0 {
		return nil, errors.New("parse template: no Resources")
	}
	t := &Template{
		Description: raw.Description, Parameters: raw.Parameters, Mappings: raw.Mappings,
		Conditions: raw.Conditions, Resources: raw.Resources, Outputs: raw.Outputs,
	}
	for id, r := range t.Resources {
		if r == nil || r.Type == "" {
			return nil, fmt.Errorf("parse template: resource %s has no Type", id)
		}
		r.LogicalID = id
		if r.Properties == nil {
			r.Properties = map[string]any{}
		}
	}
	return t, nil
}

// Load reads the template at path.
func Load(path string) (*Template, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load template: %w", err)
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t.Dir = filepath.Dir(path)
	return t, nil
}

// StackTemplate returns the path of the one stack template in the cloud
// assembly dir (cdk.out). With several stacks, stack names the one to use.
func StackTemplate(dir, stack string) (string, error) {
	if stack != "" {
		p := filepath.Join(dir, stack+".template.json")
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("stack template: %w", err)
		}
		return p, nil
	}
	found, _ := filepath.Glob(filepath.Join(dir, "*.template.json"))
	switch len(found) {
	case 0:
		return "", fmt.Errorf("stack template: no *.template.json in %s (synthesize first: make synth)", dir)
	case 1:
		return found[0], nil
	}
	names := make([]string, len(found))
	for i, f := range found {
		names[i] = strings.TrimSuffix(filepath.Base(f), ".template.json")
	}
	return "", fmt.Errorf("stack template: %d stacks in %s (%s): name one", len(found), dir, strings.Join(names, ", "))
}

// Clone returns a deep copy, so a test can mutate a template without
// touching the one it came from.
func (t *Template) Clone() *Template {
	b, err := json.Marshal(t.doc())
	if err != nil {
		panic(fmt.Sprintf("cfn: clone: %v", err)) // the template came from JSON
	}
	c, err := Parse(b)
	if err != nil {
		panic(fmt.Sprintf("cfn: clone: %v", err))
	}
	c.Dir = t.Dir
	return c
}

// JSON returns the template as JSON, as it would be deployed.
func (t *Template) JSON() ([]byte, error) { return json.MarshalIndent(t.doc(), "", " ") }

func (t *Template) doc() map[string]any {
	d := map[string]any{"Resources": t.Resources}
	if t.Description != "" {
		d["Description"] = t.Description
	}
	if len(t.Parameters) > 0 {
		d["Parameters"] = t.Parameters
	}
	if len(t.Mappings) > 0 {
		d["Mappings"] = t.Mappings
	}
	if len(t.Conditions) > 0 {
		d["Conditions"] = t.Conditions
	}
	if len(t.Outputs) > 0 {
		d["Outputs"] = t.Outputs
	}
	return d
}

// OfType returns the resources of type typ, ordered by logical ID.
func (t *Template) OfType(typ string) []*Resource {
	var out []*Resource
	for _, r := range t.Resources {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LogicalID < out[j].LogicalID })
	return out
}

// LogicalIDs returns every resource's logical ID, sorted.
func (t *Template) LogicalIDs() []string {
	ids := make([]string, 0, len(t.Resources))
	for id := range t.Resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Prop returns the raw (unresolved) value at a property path, such as
// ("SourceParameters", "FilterCriteria"), and whether it is there.
func (r *Resource) Prop(path ...string) (any, bool) {
	var cur any = r.Properties
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// DeleteProp removes the property at path; it reports whether it was there.
// Tests use it to break a template the way a careless edit would.
func (r *Resource) DeleteProp(path ...string) bool {
	if len(path) == 0 {
		return false
	}
	parent, ok := r.Prop(path[:len(path)-1]...)
	if !ok {
		return false
	}
	m, ok := parent.(map[string]any)
	if !ok {
		return false
	}
	if _, ok := m[path[len(path)-1]]; !ok {
		return false
	}
	delete(m, path[len(path)-1])
	return true
}

// SetProp sets the property at path, creating maps on the way.
func (r *Resource) SetProp(value any, path ...string) {
	cur := r.Properties
	for _, p := range path[:len(path)-1] {
		next, ok := cur[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[p] = next
		}
		cur = next
	}
	cur[path[len(path)-1]] = value
}
