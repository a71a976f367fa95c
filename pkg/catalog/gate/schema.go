package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// JSONSchemaDialect is the dialect of the schemas the gate writes.
const JSONSchemaDialect = "https://json-schema.org/draft/2020-12/schema"

// Schema is one node of the JSON Schema (2020-12) of a payload, as the gate
// generates it from a payload's Go type: the subset of keywords that the
// kinds a payload may hold need (I-JSON: strings, booleans, integers in
// ±(2^53−1), numbers, arrays, objects). It is the shape readers decode by
// (envelope.DecodePayload): a property is in Required unless its json tag
// says omitempty or omitzero or its Go type is a pointer, and an optional
// property may be null. Objects allow other members: readers ignore them.
type Schema struct {
	Dialect         string             `json:"$schema,omitempty"`
	Title           string             `json:"title,omitempty"`
	Description     string             `json:"description,omitempty"`
	Comment         string             `json:"$comment,omitempty"`
	Type            Types              `json:"type,omitempty"`
	Format          string             `json:"format,omitempty"`
	ContentEncoding string             `json:"contentEncoding,omitempty"`
	Minimum         *int64             `json:"minimum,omitempty"`
	Maximum         *int64             `json:"maximum,omitempty"`
	Items           *Schema            `json:"items,omitempty"`
	MinItems        *int64             `json:"minItems,omitempty"`
	MaxItems        *int64             `json:"maxItems,omitempty"`
	Properties      map[string]*Schema `json:"properties,omitempty"`
	Required        []string           `json:"required,omitempty"`
	// AdditionalProperties is the schema of a Go map's values.
	AdditionalProperties *Schema `json:"additionalProperties,omitempty"`
	// Personal marks a personal field (`fourlanes:"personal"`): its value is
	// stored sealed (pkg/chain/SPEC.md, "Personal fields"), and reads as
	// "[erased]" once its subject is erased. Subject marks the field naming
	// the data subject.
	Personal bool `json:"x-fourlanes-personal,omitempty"`
	Subject  bool `json:"x-fourlanes-subject,omitempty"`
}

// Types is the value of the type keyword: one JSON type, written as a
// string, or several ("null" for an optional property), written as an array.
type Types []string

// MarshalJSON writes one type as a string, several as an array.
func (t Types) MarshalJSON() ([]byte, error) {
	if len(t) == 1 {
		return json.Marshal(t[0])
	}
	return json.Marshal([]string(t))
}

// UnmarshalJSON reads a string or an array of strings.
func (t *Types) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*t = Types{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("type: want a string or an array of strings: %w", err)
	}
	*t = many
	return nil
}

// I-JSON's exact integers: what an emit accepts for a 64-bit Go integer.
const maxSafe = 1<<53 - 1

// PublishedSchema is the JSON Schema of one (type, version), as the gate
// writes it to <Config.Schemas>/<type>/v<N>.json.
type PublishedSchema struct {
	Type    string // event type, e.g. order.placed
	Version int
	GoType  string // the payload's Go type, package-qualified by path
	Path    string // relative to the schemas folder: <type>/v<N>.json
	Schema  *Schema
	JSON    []byte // the file's content: indented, key order fixed, newline-terminated
}

// SchemaPath is where the schema of (eventType, version) lives in a schemas
// folder: one folder per type, one file per version, so a published version
// is one file that review sees change and a new version is a new file.
func SchemaPath(eventType string, version int) string {
	return fmt.Sprintf("%s/v%d.json", eventType, version)
}

// payloadSchema generates the schema of one version's payload type.
func payloadSchema(eventType string, version int, doc string, t types.Type) (*PublishedSchema, error) {
	g := &schemaGen{}
	s, err := g.of(t, nil)
	if err != nil {
		return nil, err
	}
	goType := types.TypeString(t, nil)
	s.Dialect = JSONSchemaDialect
	s.Title = fmt.Sprintf("%s v%d", eventType, version)
	s.Description = doc
	s.Comment = fmt.Sprintf("The payload of %s schema version %d, generated from the Go type %s by the catalog gate; "+
		"a published version never changes incompatibly: a new shape is a new version.", eventType, version, goType)
	b, err := marshalSchema(s)
	if err != nil {
		return nil, err
	}
	return &PublishedSchema{Type: eventType, Version: version, GoType: goType, Path: SchemaPath(eventType, version), Schema: s, JSON: b}, nil
}

func marshalSchema(s *Schema) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type schemaGen struct {
	stack []*types.Named // named types being generated: a payload type may not contain itself
}

// of generates the schema of t (the rules of pkg/envelope/fit.go, read from
// go/types instead of reflect). path names the field for errors.
func (g *schemaGen) of(t types.Type, path []string) (*Schema, error) {
	fail := func(format string, args ...any) (*Schema, error) {
		where := "the payload"
		if len(path) > 0 {
			where = "field " + strings.Join(path, "")
		}
		return nil, fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...))
	}
	if n, ok := types.Unalias(t).(*types.Named); ok {
		obj := n.Obj()
		if obj.Pkg() != nil && obj.Pkg().Path() == "time" && obj.Name() == "Time" {
			return &Schema{Type: Types{"string"}, Format: "date-time"}, nil
		}
		if slices.Contains(g.stack, n) {
			return fail("type %s contains itself; a payload is a tree of values: break the cycle", types.TypeString(n, nil))
		}
		if hasMethod(n, "UnmarshalJSON") {
			return &Schema{Comment: fmt.Sprintf("decoded by %s.UnmarshalJSON", types.TypeString(n, nil))}, nil
		}
		if b, isBasic := n.Underlying().(*types.Basic); hasMethod(n, "UnmarshalText") && (!isBasic || b.Info()&types.IsString == 0) {
			return &Schema{Type: Types{"string"}, Comment: fmt.Sprintf("decoded by %s.UnmarshalText", types.TypeString(n, nil))}, nil
		}
		g.stack = append(g.stack, n)
		defer func() { g.stack = g.stack[:len(g.stack)-1] }()
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		return basicSchema(u, fail)
	case *types.Pointer:
		s, err := g.of(u.Elem(), path)
		if err != nil {
			return nil, err
		}
		return nullable(s), nil
	case *types.Interface:
		return &Schema{}, nil
	case *types.Slice, *types.Array:
		var elem types.Type
		var n int64 = -1
		if sl, ok := u.(*types.Slice); ok {
			elem = sl.Elem()
			if b, ok := elem.Underlying().(*types.Basic); ok && b.Kind() == types.Uint8 {
				return &Schema{Type: Types{"string"}, ContentEncoding: "base64"}, nil
			}
		} else {
			a := u.(*types.Array)
			elem, n = a.Elem(), a.Len()
		}
		items, err := g.of(elem, append(path, "[]"))
		if err != nil {
			return nil, err
		}
		if nullableGo(elem) {
			items = nullable(items)
		}
		s := &Schema{Type: Types{"array"}, Items: items}
		if n >= 0 {
			s.MinItems, s.MaxItems = &n, &n
		}
		return s, nil
	case *types.Map:
		k, ok := u.Key().Underlying().(*types.Basic)
		if !ok || k.Info()&(types.IsString|types.IsInteger) == 0 {
			if !hasMethod(u.Key(), "MarshalText") {
				return fail("map key type %s is not a string, an integer or a text marshaler; JSON object keys are strings", types.TypeString(u.Key(), nil))
			}
		}
		values, err := g.of(u.Elem(), append(path, ".*"))
		if err != nil {
			return nil, err
		}
		if nullableGo(u.Elem()) {
			values = nullable(values)
		}
		return &Schema{Type: Types{"object"}, AdditionalProperties: values}, nil
	case *types.Struct:
		fields, err := structFields(u, false)
		if err != nil {
			return fail("%v", err)
		}
		s := &Schema{Type: Types{"object"}}
		for _, f := range fields {
			p := append(slices.Clone(path), "."+f.name)
			if len(path) == 0 {
				p = []string{f.name}
			}
			fs, err := g.of(f.typ, p)
			if err != nil {
				return nil, err
			}
			if f.required {
				s.Required = append(s.Required, f.name)
			} else {
				fs = nullable(fs)
			}
			if len(path) == 0 {
				fs.Personal, fs.Subject = f.mark == "personal", f.mark == "subject"
			}
			if s.Properties == nil {
				s.Properties = map[string]*Schema{}
			}
			s.Properties[f.name] = fs
		}
		sort.Strings(s.Required)
		return s, nil
	}
	return fail("has Go type %s, which JSON cannot carry", types.TypeString(t, nil))
}

func basicSchema(b *types.Basic, fail func(string, ...any) (*Schema, error)) (*Schema, error) {
	rng := func(lo, hi int64) (*Schema, error) {
		return &Schema{Type: Types{"integer"}, Minimum: &lo, Maximum: &hi}, nil
	}
	switch b.Kind() {
	case types.String:
		return &Schema{Type: Types{"string"}}, nil
	case types.Bool:
		return &Schema{Type: Types{"boolean"}}, nil
	case types.Int, types.Int64:
		return rng(-maxSafe, maxSafe)
	case types.Int32:
		return rng(-1<<31, 1<<31-1)
	case types.Int16:
		return rng(-1<<15, 1<<15-1)
	case types.Int8:
		return rng(-1<<7, 1<<7-1)
	case types.Uint, types.Uint64, types.Uintptr:
		return rng(0, maxSafe)
	case types.Uint32:
		return rng(0, 1<<32-1)
	case types.Uint16:
		return rng(0, 1<<16-1)
	case types.Uint8:
		return rng(0, 1<<8-1)
	case types.Float32, types.Float64:
		return &Schema{Type: Types{"number"}}, nil
	}
	return fail("has Go type %s, which JSON cannot carry", b.Name())
}

// nullable returns s accepting null too (an optional property, a pointer).
func nullable(s *Schema) *Schema {
	if len(s.Type) == 0 || slices.Contains(s.Type, "null") {
		return s // any value, null included
	}
	c := *s
	c.Type = append(slices.Clone(s.Type), "null")
	return &c
}

// nullableGo reports whether a slice element or map value of Go type t may
// be null (envelope's rule: a pointer or an interface).
func nullableGo(t types.Type) bool {
	switch t.Underlying().(type) {
	case *types.Pointer, *types.Interface:
		return true
	}
	return false
}

func hasMethod(t types.Type, name string) bool {
	ms := types.NewMethodSet(types.NewPointer(t))
	return ms.Lookup(nil, name) != nil
}

type structField struct {
	name     string
	typ      types.Type
	required bool
	mark     string // the fourlanes tag: "personal", "subject" or ""
}

// structFields lists a struct's JSON members by envelope's rule: embedded
// structs flattened, a struct's own fields winning over promoted ones of
// the same name, then the first of two winning.
func structFields(st *types.Struct, viaPointer bool) ([]structField, error) {
	var out []structField
	seen := map[string]bool{}
	add := func(f structField) {
		if !seen[f.name] {
			seen[f.name] = true
			out = append(out, f)
		}
	}
	type embed struct {
		st  *types.Struct
		ptr bool
	}
	var embedded []embed
	for i := 0; i < st.NumFields(); i++ {
		f := st.Field(i)
		tag := reflect.StructTag(st.Tag(i)).Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if slices.Contains(strings.Split(opts, ","), "string") {
			return nil, fmt.Errorf("field %s uses the json \",string\" option; a payload carries each value as its own JSON kind", f.Name())
		}
		if f.Embedded() && name == "" {
			et := f.Type()
			_, ptr := et.Underlying().(*types.Pointer)
			if ptr {
				et = et.Underlying().(*types.Pointer).Elem()
			}
			if est, ok := et.Underlying().(*types.Struct); ok {
				embedded = append(embedded, embed{est, viaPointer || ptr})
				continue
			}
		}
		if !f.Exported() {
			continue
		}
		if name == "" {
			name = f.Name()
		}
		_, ptr := f.Type().Underlying().(*types.Pointer)
		optional := viaPointer || ptr
		for _, o := range strings.Split(opts, ",") {
			optional = optional || o == "omitempty" || o == "omitzero"
		}
		add(structField{name: name, typ: f.Type(), required: !optional, mark: reflect.StructTag(st.Tag(i)).Get("fourlanes")})
	}
	for _, e := range embedded {
		sub, err := structFields(e.st, e.ptr)
		if err != nil {
			return nil, err
		}
		for _, sf := range sub {
			add(sf)
		}
	}
	return out, nil
}

// Change is one difference between a published schema and the one the Go
// type generates now.
type Change struct {
	Field      string // the field's path, e.g. items[].qty; "" for the payload itself
	What       string // e.g. "removed (or renamed)"
	Compatible bool   // readers of the published shape still read every event of the new one, and the reverse
}

func (c Change) String() string {
	if c.Field == "" {
		return "the payload " + c.What
	}
	return "field " + c.Field + " " + c.What
}

// Compare lists how the schema next differs from the published schema old.
// Compatible are an added optional property, and descriptions; everything
// else breaks readers of one of the two shapes: a property removed or renamed
// (its readers find it missing), retyped (the other kind or range), made
// required (events already published lack it), made optional (readers of the
// published shape require it), or added as required.
func Compare(old, next *Schema) []Change {
	var out []Change
	compareAt("", old, next, &out)
	return out
}

func compareAt(path string, old, next *Schema, out *[]Change) {
	add := func(field, what string, ok bool) {
		*out = append(*out, Change{Field: field, What: what, Compatible: ok})
	}
	if a, b := describe(old, path == ""), describe(next, path == ""); a != b {
		add(path, fmt.Sprintf("retyped: was %s, now %s", a, b), false)
		return
	}
	if old.Items != nil && next.Items != nil {
		compareAt(path+"[]", old.Items, next.Items, out)
	}
	if old.AdditionalProperties != nil && next.AdditionalProperties != nil {
		compareAt(path+".*", old.AdditionalProperties, next.AdditionalProperties, out)
	}
	child := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	for _, name := range sortedKeys(old.Properties) {
		nx, ok := next.Properties[name]
		if !ok {
			add(child(name), "removed (or renamed)", false)
			continue
		}
		wasReq, isReq := slices.Contains(old.Required, name), slices.Contains(next.Required, name)
		switch {
		case !wasReq && isReq:
			add(child(name), "made required (events already published may lack it)", false)
		case wasReq && !isReq:
			add(child(name), "made optional (readers of the published shape require it)", false)
		}
		switch op := old.Properties[name]; {
		case !op.Personal && nx.Personal:
			add(child(name), "made personal (stored sealed from now on; readers outside the framework see ciphertext in new events)", true)
		case op.Personal && !nx.Personal:
			add(child(name), "no longer personal (new events would carry it in the clear, beyond erasure)", false)
		case op.Subject != nx.Subject && sealed(old):
			add(child(name), "changed its subject mark (the data key of every sealed value is found by it)", false)
		}
		compareAt(child(name), old.Properties[name], nx, out)
	}
	for _, name := range sortedKeys(next.Properties) {
		if _, ok := old.Properties[name]; ok {
			continue
		}
		if slices.Contains(next.Required, name) {
			add(child(name), "added as required (events already published lack it)", false)
		} else {
			add(child(name), "added (optional)", true)
		}
	}
	if old.Description != next.Description || old.Comment != next.Comment || old.Title != next.Title {
		add(path, "described differently", true)
	}
}

// sealed reports whether a published payload schema has personal fields:
// events of it hold values sealed under their subject's key, which the
// subject field finds.
func sealed(s *Schema) bool {
	for _, p := range s.Properties {
		if p.Personal {
			return true
		}
	}
	return false
}

// describe is what a reader relies on in a schema node: its kinds (null
// aside on a property, which Required accounts for), format, encoding,
// range and length; not its members (compared one by one).
func describe(s *Schema, top bool) string {
	var kinds []string
	for _, t := range s.Type {
		if t != "null" || top {
			kinds = append(kinds, t)
		}
	}
	d := strings.Join(kinds, " or ")
	if d == "" {
		d = "any value"
		if s.Comment != "" && strings.HasPrefix(s.Comment, "decoded by ") {
			d += " (" + s.Comment + ")"
		}
	}
	if s.Format != "" {
		d += " (" + s.Format + ")"
	}
	if s.ContentEncoding != "" {
		d += " (" + s.ContentEncoding + ")"
	}
	if s.Minimum != nil || s.Maximum != nil {
		d += fmt.Sprintf(" from %s to %s", bound(s.Minimum), bound(s.Maximum))
	}
	if s.MinItems != nil || s.MaxItems != nil {
		d += fmt.Sprintf(" of %s to %s items", bound(s.MinItems), bound(s.MaxItems))
	}
	if s.Items != nil {
		d += " of " + describe(s.Items, true)
	}
	if s.AdditionalProperties != nil {
		d += " with values of " + describe(s.AdditionalProperties, true)
	} else if slices.Contains(s.Type, "object") {
		d += " with members"
	}
	return d
}

func bound(n *int64) string {
	if n == nil {
		return "any"
	}
	return fmt.Sprint(*n)
}

func sortedKeys(m map[string]*Schema) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// generateSchemas generates the schema of every declared (type, version);
// a payload type the gate cannot describe is a violation of check 5.
func (r *Report) generateSchemas() {
	for _, m := range r.Modules {
		for _, t := range m.Spec.Emits {
			for i, v := range t.Versions {
				if i >= len(m.payloads[t.Name]) || m.payloads[t.Name][i] == nil {
					continue // an unreadable declaration: already a violation
				}
				ps, err := payloadSchema(t.Name, v.Schema, t.Doc, m.payloads[t.Name][i])
				if err != nil {
					r.Violations = append(r.Violations, Violation{Pos: m.verPos[t.Name][i], Check: 5,
						Msg: fmt.Sprintf("%s v%d: payload %s has no JSON Schema: %v", t.Name, v.Schema, m.Payloads[t.Name][i], err)})
					continue
				}
				r.Schemas = append(r.Schemas, ps)
				r.schemaPos = append(r.schemaPos, m.verPos[t.Name][i])
				if last := t.Versions[len(t.Versions)-1].Schema; r.lastVersion == nil {
					r.lastVersion = map[string]int{t.Name: last}
				} else {
					r.lastVersion[t.Name] = last
				}
			}
		}
	}
	sort.Sort(bySchema{r})
}

type bySchema struct{ r *Report }

func (b bySchema) Len() int { return len(b.r.Schemas) }
func (b bySchema) Less(i, j int) bool {
	x, y := b.r.Schemas[i], b.r.Schemas[j]
	return x.Type < y.Type || x.Type == y.Type && x.Version < y.Version
}
func (b bySchema) Swap(i, j int) {
	b.r.Schemas[i], b.r.Schemas[j] = b.r.Schemas[j], b.r.Schemas[i]
	b.r.schemaPos[i], b.r.schemaPos[j] = b.r.schemaPos[j], b.r.schemaPos[i]
}

var schemaFileRe = regexp.MustCompile(`^v([1-9][0-9]*)\.json$`)

// checkSchemas is check 5 against the published schemas in dir (write:
// first write the missing and the compatibly changed ones). root is the
// module root, for the file names in messages.
func (r *Report) checkSchemas(root, dir string, write bool) error {
	rel := func(p string) string {
		if x, err := filepath.Rel(root, p); err == nil {
			return filepath.ToSlash(x)
		}
		return filepath.ToSlash(p)
	}
	regen := fmt.Sprintf("fourlanes gate -schemas %s -write-schemas", rel(dir))
	declared := map[string]bool{}
	for i, ps := range r.Schemas {
		pos := r.schemaPos[i]
		declared[ps.Path] = true
		file := filepath.Join(dir, filepath.FromSlash(ps.Path))
		published, err := os.ReadFile(file)
		missing := errors.Is(err, fs.ErrNotExist)
		if err != nil && !missing {
			return fmt.Errorf("read published schema: %w", err)
		}
		if bytes.Equal(published, ps.JSON) {
			continue
		}
		violate := func(format string, args ...any) {
			r.Violations = append(r.Violations, Violation{Pos: pos, Check: 5, Msg: fmt.Sprintf("%s v%d: ", ps.Type, ps.Version) + fmt.Sprintf(format, args...)})
		}
		if missing {
			if write {
				if err := writeSchema(file, ps.JSON); err != nil {
					return err
				}
				continue
			}
			violate("no published schema %s; write it with `%s` and check it in", rel(file), regen)
			continue
		}
		var old Schema
		if err := json.Unmarshal(published, &old); err != nil {
			violate("%s is not a schema the gate wrote (%v); restore it from version control", rel(file), err)
			continue
		}
		var incompatible, compatible []string
		for _, c := range Compare(&old, ps.Schema) {
			if c.Compatible {
				compatible = append(compatible, c.String())
			} else {
				incompatible = append(incompatible, c.String())
			}
		}
		if len(incompatible) > 0 {
			for _, c := range incompatible {
				violate("%s; published versions never change incompatibly: declare v%d with the new shape and keep %s as %s records it",
					c, r.lastVersion[ps.Type]+1, ps.GoType, rel(file))
			}
			continue
		}
		if write {
			if err := writeSchema(file, ps.JSON); err != nil {
				return err
			}
			continue
		}
		what := "formatting"
		if len(compatible) > 0 {
			what = strings.Join(compatible, ", ")
		}
		violate("%s is stale (%s: compatible); regenerate it with `%s` and check it in", rel(file), what, regen)
	}
	// A published schema whose version is no longer declared: its events
	// are still in the log, and no reader could decode them.
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read schemas folder: %w", err)
	}
	for _, d := range entries {
		if !d.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, d.Name()))
		if err != nil {
			return fmt.Errorf("read schemas folder: %w", err)
		}
		for _, f := range files {
			name := d.Name() + "/" + f.Name()
			if f.IsDir() || !strings.HasSuffix(f.Name(), ".json") || declared[name] {
				continue
			}
			pos := token.Position{Filename: rel(filepath.Join(dir, d.Name(), f.Name()))}
			msg := fmt.Sprintf("%s: no module declares %s schema version %s; a published version stays declared while its events are in the log: declare it again (or delete the file if it never shipped)",
				pos.Filename, d.Name(), strings.TrimSuffix(strings.TrimPrefix(f.Name(), "v"), ".json"))
			if !schemaFileRe.MatchString(f.Name()) {
				msg = fmt.Sprintf("%s: not a published schema (<type>/v<N>.json); move or delete it", pos.Filename)
			}
			r.Violations = append(r.Violations, Violation{Pos: pos, Check: 5, Msg: msg})
		}
	}
	return nil
}

func writeSchema(file string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("write schema: %w", err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return fmt.Errorf("write schema: %w", err)
	}
	return nil
}
