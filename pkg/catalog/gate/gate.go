package gate

import (
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/tools/go/packages"

	"github.com/fourlanes/fourlanes/pkg/catalog"
)

const (
	catalogPath    = "github.com/fourlanes/fourlanes/pkg/catalog"
	eventstorePath = "github.com/fourlanes/fourlanes/pkg/eventstore"
	envelopePath   = "github.com/fourlanes/fourlanes/pkg/envelope"
	frameworkPkgs  = "github.com/fourlanes/fourlanes/pkg/"
)

// framework reports whether path is one of fourlanes' own library packages
// (pkg/…, its test fixtures aside). They are no application: the event
// store and the operator CLI append whatever type they are handed, which
// the application's catalog checks when they run (Prepare refuses an
// undeclared type), so they hold no producer the gate could read.
func framework(path string) bool {
	return strings.HasPrefix(path, frameworkPkgs) && !strings.Contains(path, "/testdata/")
}

// Config says what to check.
type Config struct {
	Dir      string   // the module root; file names in violations are relative to it
	Patterns []string // package patterns, e.g. "./..."
	Allow    []Allowed
	// Schemas is the folder of the published JSON Schemas, one file per
	// (type, version): <Schemas>/<type>/v<N>.json (relative to Dir unless
	// absolute). When set, check 5 compares each with its Go type. Empty:
	// schemas are generated (Report.Schemas) but not checked.
	Schemas string
	// WriteSchemas writes into Schemas every schema that is missing or that
	// changed compatibly, before checking. It never rewrites a published
	// schema whose Go type changed incompatibly: that stays a violation.
	WriteSchemas bool
}

// Violation is one failed check at a place in the source.
type Violation struct {
	Pos   token.Position // Filename relative to Config.Dir
	Check int            // 1–5, or 0 for a malformed declaration
	Msg   string
}

func (v Violation) String() string {
	check := "(decl)"
	if v.Check > 0 {
		check = fmt.Sprintf("(%d)", v.Check)
	}
	return fmt.Sprintf("%s:%d:%d: %s %s", v.Pos.Filename, v.Pos.Line, v.Pos.Column, check, v.Msg)
}

// Module is a module declaration as read from source.
type Module struct {
	Spec     catalog.Spec // payload types are not resolved (Version.Payload is nil)
	Pkg      string       // import path of the declaring package
	Pos      token.Position
	Payloads map[string][]string // event type → payload Go type per version, in order
	Upcasts  map[string][]int    // event type → the versions declared with an upcaster from the one before
	Handlers map[string]string   // subscription → handler expression
	typePos  map[string]token.Position
	subPos   map[string]token.Position
	entPos   map[string]token.Position
	payloads map[string][]types.Type     // event type → payload type per version (nil: unreadable)
	verPos   map[string][]token.Position // event type → where each version is declared
}

// Emit is one Emit call of a constant type.
type Emit struct {
	Type string
	Pkg  string // import path
	Func string // enclosing function, e.g. orders.(*Service).Place
	Pos  token.Position
	Main bool // emitted from a main package (a tool or a benchmark): not a producer
}

// Report is what the gate found.
type Report struct {
	Modules    []Module
	Emits      []Emit
	Violations []Violation
	// Files are the Go files read, relative to Config.Dir.
	Files []string
	// Schemas are the JSON Schemas of every declared (type, version), in
	// type and version order, generated from the payloads' Go types.
	Schemas     []*PublishedSchema
	schemaPos   []token.Position // where each of Schemas' versions is declared
	lastVersion map[string]int   // event type → its last declared version
}

// Err returns an error listing every violation, or nil.
func (r *Report) Err() error {
	if len(r.Violations) == 0 {
		return nil
	}
	lines := make([]string, len(r.Violations))
	for i, v := range r.Violations {
		lines[i] = v.String()
	}
	return fmt.Errorf("catalog gate: %d violations:\n%s", len(r.Violations), strings.Join(lines, "\n"))
}

// Run loads the packages, reads every declaration and Emit, and runs the four checks.
func Run(cfg Config) (*Report, error) {
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	// First pass, cheap: which packages could declare or emit at all.
	light, err := packages.Load(&packages.Config{Dir: dir, Mode: packages.NeedName | packages.NeedImports}, cfg.Patterns...)
	if err != nil {
		return nil, fmt.Errorf("list packages: %w", err)
	}
	var want []string
	for _, p := range light {
		for _, e := range p.Errors {
			return nil, fmt.Errorf("list %s: %v", p.PkgPath, e)
		}
		if framework(p.PkgPath) {
			continue
		}
		for imp := range p.Imports {
			if imp == catalogPath || imp == eventstorePath || imp == envelopePath {
				want = append(want, p.PkgPath)
				break
			}
		}
	}
	r := &Report{}
	if len(want) == 0 {
		return r, nil
	}
	sort.Strings(want)
	pkgs, err := packages.Load(&packages.Config{Dir: dir, Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
		packages.NeedTypes | packages.NeedTypesInfo | packages.NeedImports}, want...)
	if err != nil {
		return nil, fmt.Errorf("load packages: %w", err)
	}
	var loadErrs []error
	for _, p := range pkgs {
		for _, e := range p.Errors {
			loadErrs = append(loadErrs, fmt.Errorf("%s: %v", p.PkgPath, e))
		}
	}
	if len(loadErrs) > 0 {
		return nil, fmt.Errorf("type-check (the gate reads only code that compiles; fix these first): %w", errors.Join(loadErrs...))
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].PkgPath < pkgs[j].PkgPath })
	for _, p := range pkgs {
		x := &extractor{pkg: p, dir: dir, r: r}
		for _, f := range p.Syntax {
			r.Files = append(r.Files, x.rel(p.Fset.Position(f.Pos()).Filename))
			x.file(f)
		}
	}
	r.check(cfg.Allow)
	r.generateSchemas()
	if cfg.Schemas != "" {
		sdir := cfg.Schemas
		if !filepath.IsAbs(sdir) {
			sdir = filepath.Join(dir, sdir)
		}
		if err := r.checkSchemas(dir, sdir, cfg.WriteSchemas); err != nil {
			return nil, err
		}
		if err := r.checkStarts(dir, sdir, cfg.WriteSchemas); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(r.Violations, func(i, j int) bool {
		a, b := r.Violations[i].Pos, r.Violations[j].Pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Line < b.Line
	})
	return r, nil
}

type extractor struct {
	pkg *packages.Package
	dir string
	r   *Report
}

func (x *extractor) rel(name string) string {
	if r, err := filepath.Rel(x.dir, name); err == nil {
		return filepath.ToSlash(r)
	}
	return name
}

func (x *extractor) pos(p token.Pos) token.Position {
	pos := x.pkg.Fset.Position(p)
	pos.Filename = x.rel(pos.Filename)
	return pos
}

func (x *extractor) violate(p token.Pos, check int, format string, args ...any) {
	x.r.Violations = append(x.r.Violations, Violation{Pos: x.pos(p), Check: check, Msg: fmt.Sprintf(format, args...)})
}

// file reads the module declarations and Emit calls of one file.
func (x *extractor) file(f *ast.File) {
	for _, d := range f.Decls {
		fn := ""
		if fd, ok := d.(*ast.FuncDecl); ok {
			fn = x.pkg.Name + "." + funcName(fd)
		}
		ast.Inspect(d, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if isCatalog(x.pkg.TypesInfo.TypeOf(n), "Module") {
					x.module(n)
					return false
				}
			case *ast.CallExpr:
				x.call(n, fn)
			}
			return true
		})
	}
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	return "(" + types.ExprString(fd.Recv.List[0].Type) + ")." + fd.Name.Name
}

// isCatalog reports whether t is the catalog type name (any instantiation).
func isCatalog(t types.Type, name string) bool { return isNamed(t, catalogPath, name) }

// isNamed reports whether t is the type name of package path (any
// instantiation).
func isNamed(t types.Type, path, name string) bool {
	if t == nil {
		return false
	}
	n, ok := types.Unalias(t).(*types.Named)
	if !ok {
		return false
	}
	o := n.Origin().Obj()
	return o.Pkg() != nil && o.Pkg().Path() == path && o.Name() == name
}

// call records an Emit call: Emit(ctx, TYPE, …), or EmitWith(ctx,
// eventstore.EmitInput{Type: TYPE, …}) (the form a shard key or an
// idempotency key needs).
func (x *extractor) call(c *ast.CallExpr, fn string) {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	if !ok || (sel.Sel.Name != "Emit" && sel.Sel.Name != "EmitWith") || len(c.Args) < 2 {
		return
	}
	sig, ok := x.pkg.TypesInfo.TypeOf(c.Fun).(*types.Signature)
	if !ok || sig.Params().Len() < 2 {
		return
	}
	p0, p1 := sig.Params().At(0).Type(), sig.Params().At(1).Type()
	if types.TypeString(p0, nil) != "context.Context" {
		return
	}
	typeArg := c.Args[1]
	switch {
	case sel.Sel.Name == "Emit" && types.Identical(p1, types.Typ[types.String]):
	case sel.Sel.Name == "EmitWith" && isNamed(p1, eventstorePath, "EmitInput"):
		lit, ok := ast.Unparen(c.Args[1]).(*ast.CompositeLit)
		if !ok {
			x.violate(c.Args[1].Pos(), 1, "the input passed to EmitWith is not an eventstore.EmitInput literal (%s); "+
				"write the literal in the call, with the declared type constant as Type, so the gate can check it", types.ExprString(c.Args[1]))
			return
		}
		fs := x.fields(lit, "the EmitInput passed to EmitWith")
		if typeArg, ok = fs["Type"]; !ok {
			x.violate(lit.Pos(), 1, "the EmitInput passed to EmitWith has no Type; set it to the declared type constant")
			return
		}
	default:
		return
	}
	tv := x.pkg.TypesInfo.Types[typeArg]
	if tv.Value == nil || tv.Value.Kind() != constant.String {
		x.violate(typeArg.Pos(), 1, "the event type passed to %s is not a constant (%s); pass the declared type constant so the gate can check it", sel.Sel.Name, types.ExprString(typeArg))
		return
	}
	if fn == "" {
		fn = x.pkg.Name
	}
	x.r.Emits = append(x.r.Emits, Emit{Type: constant.StringVal(tv.Value), Pkg: x.pkg.PkgPath, Func: fn, Pos: x.pos(c.Pos()), Main: x.pkg.Name == "main"})
}

// fields returns a composite literal's keyed fields.
func (x *extractor) fields(lit *ast.CompositeLit, what string) map[string]ast.Expr {
	out := map[string]ast.Expr{}
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			x.violate(e.Pos(), 0, "write %s with keyed fields so the gate can read it", what)
			continue
		}
		if id, ok := kv.Key.(*ast.Ident); ok {
			out[id.Name] = kv.Value
		}
	}
	return out
}

// str returns a constant string field ("" when absent); a non-constant one
// is a violation.
func (x *extractor) str(fs map[string]ast.Expr, name, what string) string {
	e, ok := fs[name]
	if !ok {
		return ""
	}
	tv := x.pkg.TypesInfo.Types[e]
	if tv.Value == nil || tv.Value.Kind() != constant.String {
		x.violate(e.Pos(), 0, "%s.%s must be a constant so the gate can check it", what, name)
		return ""
	}
	return constant.StringVal(tv.Value)
}

func (x *extractor) ints(e ast.Expr, what string) []int {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		x.violate(e.Pos(), 0, "%s must be a literal list of constant integers", what)
		return nil
	}
	var out []int
	for _, el := range lit.Elts {
		tv := x.pkg.TypesInfo.Types[el]
		v, ok := constant.Int64Val(constant.ToInt(tv.Value))
		if tv.Value == nil || !ok {
			x.violate(el.Pos(), 0, "%s must list constant integers", what)
			continue
		}
		out = append(out, int(v))
	}
	return out
}

// elems returns the composite literals of a slice literal.
func (x *extractor) elems(e ast.Expr, what string) []*ast.CompositeLit {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		x.violate(e.Pos(), 0, "%s must be a slice literal so the gate can read it", what)
		return nil
	}
	var out []*ast.CompositeLit
	for _, el := range lit.Elts {
		if u, ok := el.(*ast.UnaryExpr); ok && u.Op == token.AND {
			el = u.X
		}
		c, ok := el.(*ast.CompositeLit)
		if !ok {
			x.violate(el.Pos(), 0, "write each element of %s as a composite literal", what)
			continue
		}
		out = append(out, c)
	}
	return out
}

func (x *extractor) module(lit *ast.CompositeLit) {
	fs := x.fields(lit, "catalog.Module")
	m := Module{Pkg: x.pkg.PkgPath, Pos: x.pos(lit.Pos()), Payloads: map[string][]string{}, Upcasts: map[string][]int{}, Handlers: map[string]string{},
		typePos: map[string]token.Position{}, subPos: map[string]token.Position{}, entPos: map[string]token.Position{},
		payloads: map[string][]types.Type{}, verPos: map[string][]token.Position{}}
	m.Spec.Name = x.str(fs, "Name", "Module")
	m.Spec.Doc = x.str(fs, "Doc", "Module")
	m.Spec.Owner = x.str(fs, "Owner", "Module")
	if e, ok := fs["Emits"]; ok {
		for _, rt := range x.eventTypes(e) {
			t := rt.t
			for i, v := range rt.vs {
				if v.upcast {
					m.Upcasts[t.Name] = append(m.Upcasts[t.Name], t.Versions[i].Schema)
				}
				m.Payloads[t.Name] = append(m.Payloads[t.Name], v.name)
				m.payloads[t.Name] = append(m.payloads[t.Name], v.typ)
				m.verPos[t.Name] = append(m.verPos[t.Name], v.pos)
			}
			m.Spec.Emits = append(m.Spec.Emits, t)
			if _, dup := m.typePos[t.Name]; !dup {
				m.typePos[t.Name] = rt.pos
			}
		}
	}
	if e, ok := fs["Tracks"]; ok {
		for _, el := range x.elems(e, "Module.Tracks") {
			ef := x.fields(el, "catalog.Entity")
			ent := catalog.Entity{Name: x.str(ef, "Name", "Entity"), Doc: x.str(ef, "Doc", "Entity"), TableEnv: x.str(ef, "TableEnv", "Entity"),
				TenantAttr: x.str(ef, "TenantAttr", "Entity"), IDAttr: x.str(ef, "IDAttr", "Entity"), VersionAttr: x.str(ef, "VersionAttr", "Entity")}
			m.Spec.Tracks = append(m.Spec.Tracks, ent)
			m.entPos[ent.Name] = x.pos(el.Pos())
		}
	}
	if e, ok := fs["Subscribes"]; ok {
		for _, sl := range x.elems(e, "Module.Subscribes") {
			sf := x.fields(sl, "catalog.Subscription")
			s := catalog.SubscriptionSpec{Module: m.Spec.Name, Name: x.str(sf, "Name", "Subscription"), Types: x.str(sf, "Types", "Subscription"),
				Doc: x.str(sf, "Doc", "Subscription")}
			s.Lane = catalog.LaneFor(s.Types, catalog.Lane(x.str(sf, "Lane", "Subscription")))
			s.Owner = x.str(sf, "Owner", "Subscription")
			if s.Owner == "" {
				s.Owner = m.Spec.Owner
			}
			if re, ok := sf["Reads"]; ok {
				s.Reads = x.ints(re, "Subscription.Reads")
			}
			if st, ok := sf["Start"]; ok {
				s.Start = x.start(st)
			}
			if h, ok := sf["Handler"]; ok {
				m.Handlers[s.Name] = types.ExprString(h)
			}
			if h, ok := sf["Typed"]; ok {
				m.Handlers[s.Name] = types.ExprString(h)
			}
			m.Spec.Subscribes = append(m.Spec.Subscribes, s)
			if _, dup := m.subPos[s.Name]; !dup {
				m.subPos[s.Name] = x.pos(sl.Pos())
			}
		}
	}
	x.r.Modules = append(x.r.Modules, m)
}

// readType is one event type as read from a module's Emits.
type readType struct {
	t   catalog.EventType // payload types not resolved
	vs  []readVersion     // one per t.Versions
	pos token.Position
}

// eventTypes reads Module.Emits: a slice literal whose elements are
// catalog.EventType literals or catalog.Event[T](name, doc) calls.
func (x *extractor) eventTypes(e ast.Expr) []readType {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		x.violate(e.Pos(), 0, "Module.Emits must be a slice literal so the gate can read it")
		return nil
	}
	var out []readType
	for _, el := range lit.Elts {
		if u, ok := el.(*ast.UnaryExpr); ok && u.Op == token.AND {
			el = u.X
		}
		switch v := el.(type) {
		case *ast.CompositeLit:
			tf := x.fields(v, "catalog.EventType")
			rt := readType{t: catalog.EventType{Name: x.str(tf, "Name", "EventType"), Doc: x.str(tf, "Doc", "EventType"),
				Discriminator: x.str(tf, "Discriminator", "EventType")}, pos: x.pos(v.Pos())}
			if ve, ok := tf["Versions"]; ok {
				rt.t.Versions, rt.vs = x.versions(ve)
			}
			out = append(out, rt)
		case *ast.CallExpr:
			if rt, ok := x.event(v); ok {
				out = append(out, rt)
			}
		default:
			x.violate(el.Pos(), 0, "write each element of Module.Emits as catalog.Event[Payload](name, doc) or a catalog.EventType literal")
		}
	}
	return out
}

// event reads catalog.Event[T](name, doc): the type at schema version 1,
// payload T.
func (x *extractor) event(c *ast.CallExpr) (readType, bool) {
	idx, ok := c.Fun.(*ast.IndexExpr)
	if !ok || !x.isCatalog(idx.X, "Event") || len(c.Args) != 2 {
		x.violate(c.Pos(), 0, "write each element of Module.Emits as catalog.Event[Payload](name, doc) or a catalog.EventType literal")
		return readType{}, false
	}
	pt := x.typeArg(c.Fun)
	if pt == nil {
		x.violate(c.Pos(), 0, "catalog.Event needs its payload type written out: catalog.Event[Payload](name, doc)")
		return readType{}, false
	}
	args := map[string]ast.Expr{"Name": c.Args[0], "Doc": c.Args[1]}
	name := x.str(args, "Name", "Event")
	if name == "" {
		return readType{}, false // unreadable: said above, and nothing to check it against
	}
	return readType{
		t:   catalog.EventType{Name: name, Doc: x.str(args, "Doc", "Event"), Versions: []catalog.Version{{Schema: 1}}},
		vs:  []readVersion{{name: types.TypeString(pt, func(p *types.Package) string { return p.Name() }), typ: pt, pos: x.pos(c.Pos())}},
		pos: x.pos(c.Pos()),
	}, true
}

// typeArg is the type argument of fun, a generic function instantiated in
// the call (catalog.V[T], catalog.Event[T]); nil when fun is not that.
func (x *extractor) typeArg(fun ast.Expr) types.Type {
	idx, ok := fun.(*ast.IndexExpr)
	if !ok {
		return nil
	}
	var id *ast.Ident
	switch f := idx.X.(type) {
	case *ast.SelectorExpr:
		id = f.Sel
	case *ast.Ident:
		id = f
	}
	inst, found := x.pkg.TypesInfo.Instances[id]
	if id == nil || !found {
		return nil
	}
	return inst.TypeArgs.At(0)
}

// catalogPkg is the import path of package catalog.
const catalogPkg = "github.com/fourlanes/fourlanes/pkg/catalog"

// startForms is what a violation about an unreadable Start asks for.
const startForms = "write it as catalog.FromSeq(N), catalog.FromTime(time.Date(…constants…, time.UTC)) or catalog.FromAll() (or leave it out: live) so the gate can record and check it"

// start reads a Subscription.Start: a call of catalog.FromSeq, FromTime or
// FromAll with constant arguments, or an empty catalog.Start{} (live).
func (x *extractor) start(e ast.Expr) catalog.Start {
	if lit, ok := e.(*ast.CompositeLit); ok && len(lit.Elts) == 0 && x.isCatalog(lit.Type, "Start") {
		return catalog.Start{}
	}
	call, ok := e.(*ast.CallExpr)
	switch {
	case ok && x.isCatalog(call.Fun, "FromAll") && len(call.Args) == 0:
		return catalog.FromAll()
	case ok && x.isCatalog(call.Fun, "FromSeq") && len(call.Args) == 1:
		if n := x.ints(&ast.CompositeLit{Elts: call.Args}, "Subscription.Start's seq"); len(n) == 1 {
			return catalog.FromSeq(int64(n[0]))
		}
		return catalog.Start{}
	case ok && x.isCatalog(call.Fun, "FromTime") && len(call.Args) == 1:
		if at, ok := x.date(call.Args[0]); ok {
			return catalog.FromTime(at)
		}
	}
	x.violate(e.Pos(), 0, "Subscription.Start %s is not a form the gate can read; %s", types.ExprString(e), startForms)
	return catalog.Start{}
}

// isCatalog reports whether e names package catalog's object name.
func (x *extractor) isCatalog(e ast.Expr, name string) bool {
	var id *ast.Ident
	switch f := e.(type) {
	case *ast.SelectorExpr:
		id = f.Sel
	case *ast.Ident:
		id = f
	default:
		return false
	}
	obj := x.pkg.TypesInfo.Uses[id]
	return obj != nil && obj.Pkg() != nil && obj.Pkg().Path() == catalogPkg && obj.Name() == name
}

// date reads time.Date(y, mo, d, h, mi, s, ns, time.UTC) with constant
// arguments.
func (x *extractor) date(e ast.Expr) (time.Time, bool) {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 8 {
		return time.Time{}, false
	}
	isTime := func(e ast.Expr, name string) bool {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		obj := x.pkg.TypesInfo.Uses[sel.Sel]
		return obj != nil && obj.Pkg() != nil && obj.Pkg().Path() == "time" && obj.Name() == name
	}
	if !isTime(call.Fun, "Date") || !isTime(call.Args[7], "UTC") {
		return time.Time{}, false
	}
	var n [7]int
	for i, a := range call.Args[:7] {
		tv := x.pkg.TypesInfo.Types[a]
		if tv.Value == nil {
			return time.Time{}, false
		}
		v, ok := constant.Int64Val(constant.ToInt(tv.Value))
		if !ok {
			return time.Time{}, false
		}
		n[i] = int(v)
	}
	return time.Date(n[0], time.Month(n[1]), n[2], n[3], n[4], n[5], n[6], time.UTC), true
}

// readVersion is one schema version as read from source.
type readVersion struct {
	name   string     // the payload's Go type, package-qualified by name; "?" when unreadable
	typ    types.Type // nil when unreadable
	pos    token.Position
	upcast bool // declared with an upcaster (catalog.V[T](n, catalog.Upcast(fn)))
}

// versions reads catalog.V[T](n) calls (or Version{Schema: n} literals).
func (x *extractor) versions(e ast.Expr) ([]catalog.Version, []readVersion) {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		x.violate(e.Pos(), 0, "EventType.Versions must be a slice literal of catalog.V[T](n)")
		return nil, nil
	}
	var vs []catalog.Version
	var names []readVersion
	qual := func(p *types.Package) string { return p.Name() }
	for _, el := range lit.Elts {
		switch v := el.(type) {
		case *ast.CallExpr:
			pt := x.typeArg(v.Fun)
			if pt == nil || len(v.Args) < 1 || len(v.Args) > 2 {
				x.violate(el.Pos(), 0, "declare a schema version as catalog.V[Payload](n), or catalog.V[Payload](n, catalog.Upcast(fn))")
				continue
			}
			n := x.ints(&ast.CompositeLit{Elts: v.Args[:1]}, "the schema version")
			if len(n) != 1 {
				continue
			}
			vs = append(vs, catalog.Version{Schema: n[0]})
			names = append(names, readVersion{name: types.TypeString(pt, qual), typ: pt, pos: x.pos(el.Pos()), upcast: len(v.Args) == 2})
		case *ast.CompositeLit:
			fs := x.fields(v, "catalog.Version")
			n := x.ints(&ast.CompositeLit{Elts: []ast.Expr{fs["Schema"]}}, "Version.Schema")
			if len(n) == 1 {
				vs = append(vs, catalog.Version{Schema: n[0]})
				names = append(names, readVersion{name: "?", pos: x.pos(el.Pos())})
			}
		default:
			x.violate(el.Pos(), 0, "declare a schema version as catalog.V[Payload](n)")
		}
	}
	return vs, names
}

// check runs the four checks over what was read.
func (r *Report) check(allow []Allowed) {
	var specs []catalog.Spec
	for _, m := range r.Modules {
		specs = append(specs, m.Spec)
	}
	owner := map[string]*Module{}
	for i := range r.Modules {
		for _, t := range r.Modules[i].Spec.Emits {
			if _, dup := owner[t.Name]; !dup {
				owner[t.Name] = &r.Modules[i]
			}
		}
	}
	// Well-formedness, (3) and (4): the same rules catalog.New applies at start-up.
	for _, p := range catalog.Validate(specs) {
		r.Violations = append(r.Violations, Violation{Pos: r.position(p), Check: p.Check, Msg: fmt.Sprintf("%s %s: %s", p.Kind, p.Name, p.Msg)})
	}
	var declared []string
	for t := range owner {
		declared = append(declared, t)
	}
	sort.Strings(declared)

	// (1) every emitted type is declared; a package that declares modules
	// emits only its own modules' types. (A package that declares none, such
	// as a benchmark, may emit any declared type.)
	produced := map[string]bool{}
	for _, e := range r.Emits {
		if !e.Main {
			produced[e.Type] = true
		}
		m, ok := owner[e.Type]
		here := r.modulesIn(e.Pkg)
		switch {
		case !ok:
			hint := "declare it in the Emits of the module that produces it"
			if len(here) > 0 {
				hint = fmt.Sprintf("declare it in the Emits of module %s (%s:%d)", here[0].Spec.Name, here[0].Pos.Filename, here[0].Pos.Line)
			}
			if near := nearestType(e.Type, declared); near != "" {
				hint += fmt.Sprintf(", or did you mean %s?", near)
			}
			r.Violations = append(r.Violations, Violation{Pos: e.Pos, Check: 1, Msg: fmt.Sprintf("Emit of %q, which no module declares: Emit will refuse it at run time; %s", e.Type, hint)})
		case len(here) > 0 && m.Pkg != e.Pkg:
			r.Violations = append(r.Violations, Violation{Pos: e.Pos, Check: 1, Msg: fmt.Sprintf(
				"module %s emits %q, which module %s declares (%s:%d); a module emits only its own types: call that module's API, or move the declaration",
				here[0].Spec.Name, e.Type, m.Spec.Name, m.Pos.Filename, m.Pos.Line)})
		}
	}
	// (2) every declared type has a producer, or is allowlisted with a reason.
	allowed := map[string]Allowed{}
	for _, a := range allow {
		allowed[a.Type] = a
		switch {
		case strings.TrimSpace(a.Reason) == "":
			r.Violations = append(r.Violations, Violation{Pos: token.Position{Filename: "pkg/catalog/gate/allowlist.go"}, Check: 2, Msg: fmt.Sprintf("allowlist entry %s has no reason; say why it has no producer", a.Type)})
		case owner[a.Type] == nil:
			r.Violations = append(r.Violations, Violation{Pos: token.Position{Filename: "pkg/catalog/gate/allowlist.go"}, Check: 2, Msg: fmt.Sprintf("allowlist entry %s names no declared type; remove it", a.Type)})
		case produced[a.Type]:
			r.Violations = append(r.Violations, Violation{Pos: token.Position{Filename: "pkg/catalog/gate/allowlist.go"}, Check: 2, Msg: fmt.Sprintf("allowlist entry %s now has a producer; remove it", a.Type)})
		}
	}
	for _, t := range declared {
		if produced[t] {
			continue
		}
		if a, ok := allowed[t]; ok && strings.TrimSpace(a.Reason) != "" {
			continue
		}
		m := owner[t]
		r.Violations = append(r.Violations, Violation{Pos: m.typePos[t], Check: 2, Msg: fmt.Sprintf(
			"module %s declares %s but nothing emits it (no Emit(ctx, %q, …) outside tests); emit it, delete the declaration, or allowlist it with a reason in pkg/catalog/gate/allowlist.go", m.Spec.Name, t, t)})
	}
}

func (r *Report) modulesIn(pkg string) []Module {
	var out []Module
	for _, m := range r.Modules {
		if m.Pkg == pkg {
			out = append(out, m)
		}
	}
	return out
}

// position finds where a Problem's subject is declared.
func (r *Report) position(p catalog.Problem) token.Position {
	for _, m := range r.Modules {
		var pos token.Position
		var ok bool
		switch p.Kind {
		case "type":
			pos, ok = m.typePos[p.Name]
		case "subscription":
			pos, ok = m.subPos[p.Name]
		case "entity":
			pos, ok = m.entPos[p.Name]
		case "module":
			pos, ok = m.Pos, m.Spec.Name == p.Name
		}
		if ok {
			return pos
		}
	}
	return token.Position{}
}

func nearestType(t string, declared []string) string {
	best, bestD := "", 1<<30
	for _, d := range declared {
		if n := lev(t, d); n < bestD {
			best, bestD = d, n
		}
	}
	if bestD > 3 {
		return ""
	}
	return best
}

func lev(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = slices.Min([]int{prev[j] + 1, cur[j-1] + 1, prev[j-1] + c})
		}
		prev = cur
	}
	return prev[len(b)]
}

// Unregistered compares the modules declared in source under the package
// prefix pkgPrefix (e.g. an application's folder's import path, ending in
// "/") with specs, the modules an application registers at run time (its
// app.Application's, say). It returns one line per problem: a module
// declared but not registered (no process can bind it), one declared
// differently from what is registered, or a registered module the source
// does not declare. Payload types are not compared (the gate reads source,
// not types).
func (r *Report) Unregistered(pkgPrefix string, specs []catalog.Spec) []string {
	registered := make(map[string]catalog.Spec, len(specs))
	for _, s := range specs {
		registered[s.Name] = s
	}
	var problems []string
	declared := map[string]bool{}
	for _, m := range r.Modules {
		if !strings.HasPrefix(m.Pkg, pkgPrefix) {
			continue
		}
		declared[m.Spec.Name] = true
		rt, ok := registered[m.Spec.Name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s:%d: module %s is declared but not registered; no process can bind it", m.Pos.Filename, m.Pos.Line, m.Spec.Name))
			continue
		}
		if got, want := specSummary(m.Spec), specSummary(rt); got != want {
			problems = append(problems, fmt.Sprintf("module %s: the source declares\n%s\nthe application registers\n%s", m.Spec.Name, got, want))
		}
	}
	for _, s := range specs {
		if !declared[s.Name] {
			problems = append(problems, fmt.Sprintf("module %s is registered but declared nowhere under %s", s.Name, pkgPrefix))
		}
	}
	return problems
}

// specSummary is a declaration as the gate can read it from source.
func specSummary(s catalog.Spec) string {
	var b strings.Builder
	for _, t := range s.Emits {
		var vs []int
		for _, v := range t.Versions {
			vs = append(vs, v.Schema)
		}
		fmt.Fprintf(&b, "emits %s %v\n", t.Name, vs)
	}
	for _, e := range s.Tracks {
		fmt.Fprintf(&b, "tracks %s %s/%s/%s/%s\n", e.Name, e.TableEnv, e.TenantAttr, e.IDAttr, e.VersionAttr)
	}
	for _, x := range s.Subscribes {
		fmt.Fprintf(&b, "sub %s %s %s %v\n", x.Name, x.Types, x.Lane, x.Reads)
	}
	return b.String()
}
