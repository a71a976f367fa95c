// Package backbonetest helps the tests of a stack built with the backbone
// (infra/backbone's own, and each application's): stand-in function code, an
// app with the repository's CDK context, and the synthesized template read as
// plain JSON, down to what each role may do. It imports no backbone package
// (infra/backbone's internal tests use it) and no example.
package backbonetest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/internal/cdkjson"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// WriteCode writes a stand-in <root>/<function>/bootstrap for every function
// (keys.Functions): a shell script whose second line is "# <function>", so a
// test can tell which one was staged, and synthesis never depends on whether
// the binaries are built.
func WriteCode(root string) error {
	for _, fn := range keys.Functions {
		dir := filepath.Join(root, fn)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte("#!/bin/sh\n# "+fn+"\n"), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// NewApp returns a CDK app writing its cloud assembly to outDir, with the
// context of repoRoot's cdk.json (its feature flags), as the CDK CLI passes
// it to the app.
func NewApp(outDir, repoRoot string) (awscdk.App, error) {
	flags, err := cdkjson.Context(repoRoot)
	if err != nil {
		return nil, err
	}
	ctx := make(map[string]any, len(flags))
	for k, v := range flags {
		ctx[k] = v
	}
	return awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(outDir), Context: &ctx}), nil
}

// Template is a synthesized CloudFormation template as plain JSON, for checks
// the assertions package cannot express (every policy, every statement).
type Template map[string]any

// FromStack synthesizes st's template. jsii reports JavaScript errors as Go
// panics; FromStack returns them as errors.
func FromStack(st awscdk.Stack) (tmpl Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("synth: %v", r)
		}
	}()
	raw, err := json.Marshal(assertions.Template_FromStack(st, nil).ToJSON())
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		return nil, err
	}
	return tmpl, nil
}

// Resources returns the template's resources of one type, by logical ID.
func (t Template) Resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	rs, _ := t["Resources"].(map[string]any)
	for id, r := range rs {
		res := r.(map[string]any)
		if res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

// Outputs returns the template's outputs, by name.
func (t Template) Outputs() map[string]any {
	out, _ := t["Outputs"].(map[string]any)
	return out
}

// Props returns a resource's Properties.
func Props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

// Env returns a function resource's environment variables.
func Env(fn map[string]any) map[string]any {
	vars, _ := Props(fn)["Environment"].(map[string]any)["Variables"].(map[string]any)
	return vars
}

// Ref is {"Ref": id}, as in the template.
func Ref(id string) map[string]any { return map[string]any{"Ref": id} }

// GetAtt is {"Fn::GetAtt": [id, attr]}, as in the template.
func GetAtt(id, attr string) map[string]any {
	return map[string]any{"Fn::GetAtt": []any{id, attr}}
}

// List is v as a list: nil is empty, a single value one element (a policy's
// Action, Resource and Statement may be either).
func List(v any) []any {
	switch t := v.(type) {
	case nil:
		return nil
	case []any:
		return t
	}
	return []any{v}
}

// Strings is the strings of List(v).
func Strings(v any) []string {
	var out []string
	for _, x := range List(v) {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Grant is one Allow statement of one identity policy, flattened.
type Grant struct {
	Policy    string   // logical ID of the resource holding the policy
	Roles     []string // logical IDs of the roles it is attached to
	Actions   []string
	Resources []any
	// Condition is the statement's Condition (nil: none).
	Condition any
	// Not is set when the statement uses NotAction or NotResource, which
	// checks should treat as "everything".
	Not bool
}

// Grants returns every identity-policy Allow statement in the template:
// AWS::IAM::Policy, AWS::IAM::ManagedPolicy and inline policies of roles,
// users and groups.
func (t Template) Grants() []Grant {
	var out []Grant
	add := func(policy string, roles []string, pd any) {
		stmts, _ := pd.(map[string]any)["Statement"].([]any)
		for _, st := range stmts {
			st := st.(map[string]any)
			if st["Effect"] != "Allow" {
				continue
			}
			out = append(out, Grant{
				Policy: policy, Roles: roles, Actions: Strings(st["Action"]), Resources: List(st["Resource"]),
				Condition: st["Condition"], Not: st["NotAction"] != nil || st["NotResource"] != nil,
			})
		}
	}
	rs, _ := t["Resources"].(map[string]any)
	for id, r := range rs {
		r := r.(map[string]any)
		p := Props(r)
		switch r["Type"] {
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy":
			add(id, refs(p["Roles"]), p["PolicyDocument"])
		case "AWS::IAM::Role", "AWS::IAM::User", "AWS::IAM::Group":
			for _, ip := range List(p["Policies"]) {
				add(id, []string{id}, ip.(map[string]any)["PolicyDocument"])
			}
		}
	}
	return out
}

func refs(v any) []string {
	var out []string
	for _, x := range List(v) {
		if m, ok := x.(map[string]any); ok {
			if id, ok := m["Ref"].(string); ok {
				out = append(out, id)
			}
		}
	}
	return out
}

// Access maps each resource a role may act on to the sorted actions it may
// take there. A resource {"Fn::GetAtt": [id, attr]} is keyed "id.attr", "*"
// is keyed "*", any other its JSON.
func Access(gs []Grant, role string) map[string][]string {
	set := map[string]map[string]bool{}
	for _, g := range gs {
		if !slices.Contains(g.Roles, role) {
			continue
		}
		for _, res := range g.Resources {
			key := "*"
			b, _ := json.Marshal(res)
			var m map[string]any
			if json.Unmarshal(b, &m) == nil {
				if ga, ok := m["Fn::GetAtt"].([]any); ok {
					key = ga[0].(string) + "." + ga[1].(string)
				}
			}
			if key == "*" && res != "*" {
				key = string(b)
			}
			if set[key] == nil {
				set[key] = map[string]bool{}
			}
			for _, a := range g.Actions {
				set[key][a] = true
			}
		}
	}
	out := map[string][]string{}
	for k, as := range set {
		for a := range as {
			out[k] = append(out[k], a)
		}
		sort.Strings(out[k])
	}
	return out
}
