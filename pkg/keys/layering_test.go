package keys_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// importers walks the non-test Go files below root (skipping the folders
// skip names, as slash paths relative to root) and returns, for each file
// that imports a package at or below prefix, its slash path relative to
// root, and how many files it read.
func importers(t *testing.T, root, prefix string, skip ...string) (found map[string]bool, files int) {
	t.Helper()
	found = map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			for _, s := range skip {
				if rel == s {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == prefix || strings.HasPrefix(p, prefix+"/") {
				found[rel] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found, files
}

// TestPkgImportsNoInternal: the code under pkg/ is what a team imports when
// it adopts fourlanes, so it must not depend on internal/ (which only this
// module may import). Tests may (they use internal/localaws's clients).
func TestPkgImportsNoInternal(t *testing.T) {
	found, files := importers(t, "..", "github.com/fourlanes/fourlanes/internal")
	for f := range found {
		t.Errorf("pkg/%s imports internal/: pkg/ must not", f)
	}
	if files < 50 {
		t.Fatalf("walked %d non-test Go files under pkg/: want the whole tree", files)
	}
}

// TestFrameworkImportsNoExample: the framework (every non-test file outside
// examples/) imports no example application, so a team adopting fourlanes
// gets none of them (issue 14). An example is one application of the
// framework: it may import the framework, never the other way round. The
// bench module is not walked: like the suites under test/, it measures the
// reference application (examples/orders) and is a module no team links.
func TestFrameworkImportsNoExample(t *testing.T) {
	found, files := importers(t, filepath.Join("..", ".."), "github.com/fourlanes/fourlanes/examples",
		".git", ".cache", "node_modules", "cdk.out", "examples", "bench")
	for f := range found {
		t.Errorf("%s imports an example application: framework code must not; take what it needs from the application value (pkg/app) instead", f)
	}
	if files < 150 {
		t.Fatalf("walked %d non-test Go files outside examples/: want the whole module", files)
	}
}

// The other modules of this repository (go.work): what a team links (the
// runtime, this module) must need none of them.
var otherModules = []string{"infra", "twin", "examples", "test", "bench", "cmd"}

// TestRuntimeImportsNoOtherModule: no file of the runtime module, tests
// included (a test's imports are requirements of the module too), imports
// a package of another module of the repository: the construct library,
// the twin, the examples, the suites. Folders with a go.mod of their own are
// other modules and are not walked.
func TestRuntimeImportsNoOtherModule(t *testing.T) {
	root := filepath.Join("..", "..")
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "cdk.out") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, m := range otherModules {
				if prefix := "github.com/fourlanes/fourlanes/" + m + "/"; strings.HasPrefix(p+"/", prefix) {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s imports %s, of the %s module: the runtime module must not need it", filepath.ToSlash(rel), p, m)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 150 {
		t.Fatalf("walked %d Go files of the runtime module: want the whole module", files)
	}
}

// TestRuntimeModuleRequirements: the runtime module's go.mod, what a team's
// Lambda inherits, stays small (at most 25 direct requirements) and names
// none of the construct library's, the twin's or a test server's
// dependencies.
func TestRuntimeModuleRequirements(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{"github.com/aws/aws-cdk-go", "github.com/aws/jsii-runtime-go", "github.com/aws/constructs-go", "github.com/cdklabs/",
		"github.com/johannesboyne/gofakes3", "github.com/google/btree", "github.com/cockroachdb/apd", "github.com/ryszard/goskiplist",
		"github.com/fourlanes/fourlanes/"}
	direct, inBlock := 0, false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "require (":
			inBlock = true
			continue
		case inBlock && line == ")":
			inBlock = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !inBlock:
			continue
		}
		if line == "" {
			continue
		}
		mod := strings.Fields(line)[0]
		for _, f := range forbidden {
			if strings.HasPrefix(mod, f) {
				t.Errorf("go.mod requires %s: the runtime module must not (it belongs to infra, twin or a test module)", mod)
			}
		}
		if !strings.Contains(line, "// indirect") {
			direct++
		}
	}
	if direct > 25 || direct == 0 {
		t.Errorf("go.mod has %d direct requirements, want 1 to 25", direct)
	}
}

// TestFrameworkModulesRequireNoExample: the construct library, the twin and
// the CLI's module require no example application: an example is one
// application of the framework, never a part of it.
func TestFrameworkModulesRequireNoExample(t *testing.T) {
	for _, m := range []string{"infra", "twin", filepath.Join("cmd", "fourlanes")} {
		b, err := os.ReadFile(filepath.Join("..", "..", m, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "github.com/fourlanes/fourlanes/examples") {
			t.Errorf("%s/go.mod requires an example application", m)
		}
	}
}
