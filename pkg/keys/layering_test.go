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

// TestPkgImportsNoInternal: the code under pkg/ is what a team imports when
// it adopts fourlanes, so it must not depend on internal/ (which only this
// module may import). Tests may (they use internal/localaws's servers).
func TestPkgImportsNoInternal(t *testing.T) {
	const internal = "github.com/fourlanes/fourlanes/internal"
	root := filepath.Join("..")
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == internal || strings.HasPrefix(p, internal+"/") {
				t.Errorf("%s imports %s: pkg/ must not import internal/", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("walked %d non-test Go files under pkg/: want the whole tree", files)
	}
}

// TestFrameworkImportsOfTheExample is a ratchet for issue 14 (the framework
// split from its example): the non-test files outside pkg/example that still
// import the example application are exactly these, and the list only
// shrinks. A new importer fails; an entry that no longer imports the example
// fails too, so it is struck from the list.
func TestFrameworkImportsOfTheExample(t *testing.T) {
	const example = "github.com/fourlanes/fourlanes/pkg/example"
	allowed := map[string]bool{ // slash paths from the module root
		"bench/coldstart.go":                 true,
		"bench/delivery.go":                  true,
		"cmd/fourlanes/emit.go":              true,
		"cmd/fourlanes/watermarks.go":        true,
		"functions/changefeed/main.go":       true,
		"functions/dlq-repair/main.go":       true,
		"functions/durable-consumer/main.go": true,
		"functions/reconcile/main.go":        true,
		"functions/stream-filter/main.go":    true,
		"internal/twin/demo/demo.go":         true,
	}
	root := filepath.Join("..", "..")
	found := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch rel {
			case ".git", ".cache", "node_modules", "cdk.out", "pkg/example", "examples":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == example || strings.HasPrefix(p, example+"/") {
				found[rel] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
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
