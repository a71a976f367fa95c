package keys_test

import (
	"go/parser"
	"go/token"
	"io/fs"
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
// module may import). Tests may (they use internal/localaws's servers).
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
// framework: it may import the framework, never the other way round.
func TestFrameworkImportsNoExample(t *testing.T) {
	found, files := importers(t, filepath.Join("..", ".."), "github.com/fourlanes/fourlanes/examples",
		".git", ".cache", "node_modules", "cdk.out", "examples")
	for f := range found {
		t.Errorf("%s imports an example application: framework code must not; take what it needs from the application value (pkg/app) instead", f)
	}
	if files < 150 {
		t.Fatalf("walked %d non-test Go files outside examples/: want the whole module", files)
	}
}
