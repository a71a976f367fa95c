package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallable: go install module@version refuses a module whose go.mod
// has a replace or exclude directive ("It must not contain directives that
// would cause it to be interpreted differently than if it were the main
// module"); the workspace (go.work) supplies the other modules here.
func TestInstallable(t *testing.T) {
	f, err := os.Open("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if w, _, _ := strings.Cut(strings.TrimSpace(sc.Text()), " "); w == "replace" || w == "exclude" {
			t.Errorf("go.mod:%d: %q: go install .../cmd/fourlanes@version would refuse the module; the workspace (go.work) replaces the other modules", n, sc.Text())
		}
	}
}

// exitCode runs cmd and returns its exit status.
func exitCode(t *testing.T, cmd *exec.Cmd) (int, string, string) {
	t.Helper()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String(), errb.String()
	}
	if err != nil {
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	return 0, out.String(), errb.String()
}

// TestExitStatus: the built binary exits 3 when a command finds a problem
// (here the catalog gate on a fixture that emits an undeclared type), so a
// script can tell it from an error; go run turns it into 1, which is why
// docs/cli.md says to run a built binary (go build, go install) or go tool.
func TestExitStatus(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "fourlanes")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	gate := []string{"gate", "-C", root, "./pkg/catalog/gate/testdata/undeclared/..."}
	if code, out, stderr := exitCode(t, exec.Command(bin, gate...)); code != 3 || !strings.Contains(out, "widget.exploded") {
		t.Errorf("fourlanes %v: exit %d, %q %q; want 3 and the violation", gate, code, out, stderr)
	}
	if code, _, stderr := exitCode(t, exec.Command("go", append([]string{"run", "."}, gate...)...)); code != 1 || !strings.Contains(stderr, "exit status 3") {
		t.Errorf("go run . %v: exit %d, stderr %q; docs/cli.md says go run exits 1 and prints exit status 3: update it", gate, code, stderr)
	}
	code, out, stderr := exitCode(t, exec.Command(bin, "version", "-json"))
	var v struct{ Version, Go string }
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 || !strings.HasPrefix(v.Version, "v") || v.Go == "" {
		t.Errorf("fourlanes version -json: exit %d, %q %q (%v)", code, out, stderr, err)
	}
}
