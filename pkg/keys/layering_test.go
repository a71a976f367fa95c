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
