package backbone

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCfnLint runs cfn-lint (installed by scripts/deps.sh into
// .cache/venv) on the synthesized template, exactly the file a deploy
// uploads. cfn-lint's exit code is a bit set: 2 errors, 4 warnings, 8 info.
func TestCfnLint(t *testing.T) {
	// The Makefile exports FOURLANES_CFN_LINT; plain `go test` finds it in
	// the repository's .cache.
	bin := cfnLintBin(t)
	s := synth(t)
	lintFile(t, bin, filepath.Join(s.OutDir, *s.stack.StackName()+".template.json"))
}

// cfnLintBin is cfn-lint's path; it fails under CI, and skips otherwise,
// when cfn-lint is not installed.
func cfnLintBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("FOURLANES_CFN_LINT")
	if bin == "" {
		root, err := repoRoot()
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(root, ".cache", "venv", "bin", "cfn-lint")
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cfn-lint is not installed at %s (scripts/deps.sh cfn-lint)", bin)
		}
		t.Skipf("cfn-lint is not installed at %s; run scripts/deps.sh cfn-lint", bin)
	}
	return bin
}

// lintDoc runs cfn-lint on a synthesized template document.
func lintDoc(t *testing.T, doc map[string]any) {
	t.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "template.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	lintFile(t, cfnLintBin(t), p)
}

func lintFile(t *testing.T, bin, tmpl string) {
	t.Helper()
	out, err := exec.Command(bin, "--format", "parseable", "--", tmpl).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode()&2 == 0:
		t.Logf("cfn-lint warnings or notes (exit %d):\n%s", exit.ExitCode(), out)
	default:
		t.Errorf("cfn-lint found errors (%v):\n%s", err, out)
	}
}

// repoRoot is the directory holding go.mod, above the test's directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test directory")
		}
		dir = parent
	}
}
