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

// TestFrameworkImportsOfTheExample is a ratchet for issue 14 (the framework
// split from its example): the non-test files outside examples/ that still
// import the example application are exactly these, and the list only
// shrinks. A new importer fails; an entry that no longer imports the example
// fails too, so it is struck from the list.
func TestFrameworkImportsOfTheExample(t *testing.T) {
	allowed := map[string]bool{ // slash paths from the module root
	}
	found, _ := importers(t, filepath.Join("..", ".."), "github.com/fourlanes/fourlanes/examples/orders",
		".git", ".cache", "node_modules", "cdk.out", "examples")
	for f := range found {
		if !allowed[f] {
			t.Errorf("%s imports the example application: framework code must not (issue 14); take what it needs from the application value instead", f)
		}
	}
	for f := range allowed {
		if !found[f] {
			t.Errorf("%s no longer imports the example application: strike it from this list", f)
		}
	}
}
