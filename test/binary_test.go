package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/twin/localaws"
)

// TestFunctionBinaryLinksOnlyTheRuntime builds a function of the orders
// example as Lambda runs it (linux/arm64) and reads its module list (go
// version -m): a Lambda built from the runtime module links none of the
// construct library's, the twin's or a test server's dependencies.
func TestFunctionBinaryLinksOnlyTheRuntime(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	root, err := localaws.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-o", bin, "./examples/orders/functions/durable-consumer")
	build.Dir = root
	build.Env = append(build.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	mods := string(out)
	if !strings.Contains(mods, "github.com/fourlanes/fourlanes") || !strings.Contains(mods, "github.com/aws/aws-lambda-go") {
		t.Fatalf("go version -m lists no fourlanes runtime or aws-lambda-go:\n%s", mods)
	}
	for _, m := range []string{"github.com/aws/aws-cdk-go", "github.com/aws/jsii-runtime-go", "github.com/cdklabs/cdk-nag-go",
		"github.com/aws/constructs-go", "github.com/johannesboyne/gofakes3", "github.com/google/btree", "github.com/cockroachdb/apd",
		"github.com/fourlanes/fourlanes/twin", "github.com/fourlanes/fourlanes/infra"} {
		if strings.Contains(mods, m) {
			t.Errorf("the durable-consumer binary links %s", m)
		}
	}
}
