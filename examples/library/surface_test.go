package library

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The most of the framework the library's domain code may touch (issue 20,
// item 5): a team writing a module learns these and nothing else. The aim
// is 5 packages and 20 identifiers, met at 20 (from 35): pkg/app's ten,
// catalog's seven (Module, Event, Entity, Subscription, NoHandlers and the
// two lanes) and pkg/projection's projector, table and versioned reader. The log keys are
// the library's own (the framework's logger adds tenant and event id from
// the context). Lower the bound as the surface shrinks; never raise it.
const (
	maxFrameworkPackages    = 5
	maxFrameworkIdentifiers = 20
)

// frameworkPrefix is the framework's module path; the library's own
// packages (github.com/fourlanes/fourlanes/examples/library/...) are not it.
const frameworkPrefix = "github.com/fourlanes/fourlanes/"

// TestDomainCodeTouchesLittleOfTheFramework parses the library's domain
// code (every non-test Go file but the mains, functions/ and cmd/, and the
// CDK app, infra/: what a team writes for its own domain) and counts the
// framework packages it imports and the exported identifiers it uses from
// them (pkg.Name, each counted once). It fails above the bound and prints
// what it found, so a change that makes a team learn more of the framework
// is seen.
func TestDomainCodeTouchesLittleOfTheFramework(t *testing.T) {
	used := map[string]map[string]bool{} // import path → identifiers
	var files []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch p {
			case "cmd", "functions", "infra", "schemas", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		files = append(files, p)
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		names := map[string]string{} // local name → framework import path
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			if !strings.HasPrefix(ip, frameworkPrefix) || strings.HasPrefix(ip, frameworkPrefix+"examples/library") {
				continue
			}
			name := path.Base(ip)
			if im.Name != nil {
				name = im.Name.Name
			}
			names[name] = ip
			if used[ip] == nil {
				used[ip] = map[string]bool{}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && names[x.Name] != "" {
					used[names[x.Name]][x.Name+"."+sel.Sel.Name] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("found %d domain files (%v): the walk is wrong", len(files), files)
	}
	var pkgs, idents []string
	for ip, ids := range used {
		pkgs = append(pkgs, ip)
		for id := range ids {
			idents = append(idents, id)
		}
	}
	slices.Sort(pkgs)
	slices.Sort(idents)
	t.Logf("domain files: %v", files)
	t.Logf("%d framework packages: %v", len(pkgs), pkgs)
	t.Logf("%d framework identifiers: %v", len(idents), idents)
	if len(pkgs) > maxFrameworkPackages {
		t.Errorf("the domain code imports %d framework packages, want at most %d: %v", len(pkgs), maxFrameworkPackages, pkgs)
	}
	if len(idents) > maxFrameworkIdentifiers {
		t.Errorf("the domain code uses %d framework identifiers, want at most %d: %v", len(idents), maxFrameworkIdentifiers, idents)
	}
}
