package e2e

import (
	"os"
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

// TestEveryFunctionBinaryLeavesTheXRaySDKOut builds every function of the
// orders example as make build does (linux/arm64, lambda.norpc, -trimpath,
// -s -w) and reads each module list: the default build traces with
// OpenTelemetry and links neither the X-Ray SDK nor aws-sdk-go v1, which it
// pulled in, nor gRPC or protobuf.
func TestEveryFunctionBinaryLeavesTheXRaySDKOut(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	root, err := localaws.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	fns, err := os.ReadDir(filepath.Join(root, "examples", "orders", "functions"))
	if err != nil {
		t.Fatal(err)
	}
	if len(fns) < 6 {
		t.Fatalf("examples/orders/functions has %d functions, want every one of keys.Functions", len(fns))
	}
	dir := t.TempDir()
	for _, fn := range fns {
		bin := filepath.Join(dir, fn.Name())
		build := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./examples/orders/functions/"+fn.Name())
		build.Dir = root
		build.Env = append(build.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", fn.Name(), err, out)
		}
		out, err := exec.Command("go", "version", "-m", bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		mods := map[string]bool{}
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && (f[0] == "dep" || f[0] == "=>") {
				mods[f[1]] = true
			}
		}
		if !mods["go.opentelemetry.io/otel/sdk"] {
			t.Errorf("%s: the default build links no OpenTelemetry SDK:\n%s", fn.Name(), out)
		}
		for _, m := range []string{"github.com/aws/aws-xray-sdk-go", "github.com/aws/aws-sdk-go", "google.golang.org/grpc",
			"google.golang.org/protobuf", "github.com/valyala/fasthttp"} {
			if mods[m] {
				t.Errorf("%s links %s", fn.Name(), m)
			}
		}
	}
}
