package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/keys"
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
// pulled in, nor gRPC or protobuf; and each function links only the AWS
// service clients it calls.
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
		// Each links only the AWS clients it uses: the package list, not
		// the module list (a module's types package is not its client).
		deps := exec.Command("go", "list", "-deps", "./examples/orders/functions/"+fn.Name())
		deps.Dir = root
		deps.Env = build.Env
		list, err := deps.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", fn.Name(), err)
		}
		pkgs := map[string]bool{}
		for _, p := range strings.Fields(string(list)) {
			pkgs[p] = true
		}
		// KMS in the functions that decode or emit: they open and seal
		// personal fields (pkg/erasure) when the catalog declares some;
		// SQS in durable-consumer: a poison message goes to the DLQ.
		uses := map[string][]string{
			keys.FnReconcile:       {"kms", "s3"},
			keys.FnDLQRepair:       {"sqs", "dynamodbstreams", "kms"},
			keys.FnDurableConsumer: {"sqs", "kms"},
			keys.FnChangefeed:      {"kms"},
			keys.FnNotary:          {"kms", "s3"}, // it signs checkpoints into the bucket
		}[fn.Name()]
		for _, c := range []string{"kms", "s3", "sqs", "dynamodbstreams"} {
			if got, want := pkgs["github.com/aws/aws-sdk-go-v2/service/"+c], slices.Contains(uses, c); got != want {
				t.Errorf("%s links the %s client: %v, want %v", fn.Name(), c, got, want)
			}
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
		// The configuration comes from the Lambda environment
		// (awsenv.Load): no shared-config loader and none of the default
		// credential chain's clients, whose package initialisation would
		// run at every cold start.
		for _, m := range []string{"github.com/aws/aws-xray-sdk-go", "github.com/aws/aws-sdk-go", "google.golang.org/grpc",
			"google.golang.org/protobuf", "github.com/valyala/fasthttp", "github.com/aws/aws-sdk-go-v2/config",
			"github.com/aws/aws-sdk-go-v2/service/sts", "github.com/aws/aws-sdk-go-v2/service/sso",
			"github.com/aws/aws-sdk-go-v2/service/ssooidc", "github.com/aws/aws-sdk-go-v2/service/signin",
			"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"} {
			if mods[m] {
				t.Errorf("%s links %s", fn.Name(), m)
			}
		}
	}
}
