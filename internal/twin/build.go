package twin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"sync"

	"github.com/fourlanes/fourlanes/internal/cdkjson"
	"github.com/fourlanes/fourlanes/internal/twin/cfn"
)

// The orders example's mains and CDK app (relative to the repository root):
// what FunctionNames, BuildHost, Synth and Assemble build, as make does.
const (
	exampleMains = "examples/orders/functions"
	exampleApp   = "./examples/orders/infra"
)

// FunctionNames lists the orders example's functions in the repository at
// root: every folder under examples/orders/functions with a main.go, sorted
// (as the Makefile finds them).
func FunctionNames(root string) ([]string, error) { return FunctionNamesIn(root, exampleMains) }

// FunctionNamesIn lists the functions whose mains are in mains (a folder
// relative to root, e.g. examples/library/functions): every folder there
// with a main.go, sorted.
func FunctionNamesIn(root, mains string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(root, mains, "*", "main.go"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range files {
		out = append(out, filepath.Base(filepath.Dir(m)))
	}
	sort.Strings(out)
	return out, nil
}

// BuildHost builds each function for this machine's OS and architecture
// into dir/<fn>/bootstrap, with the flags the Makefile uses for Lambda
// (static, lambda.norpc, trimmed), so the twin runs the same code.
func BuildHost(ctx context.Context, root, dir string, fns []string) error {
	return BuildHostFrom(ctx, root, exampleMains, dir, fns)
}

// BuildHostFrom is BuildHost for the mains in mains (a folder relative to
// root): another application's functions.
func BuildHostFrom(ctx context.Context, root, mains, dir string, fns []string) error {
	if len(fns) == 0 {
		return fmt.Errorf("build: no functions under %s", filepath.Join(root, mains))
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("build: %w", err)
		}
		if tmp, err = os.MkdirTemp(dir, ".build-"); err != nil {
			return fmt.Errorf("build: %w", err)
		}
	}
	defer os.RemoveAll(tmp)
	// One go build for all: the shared packages compile once.
	args := []string{"build", "-tags", "lambda.norpc", "-trimpath", "-ldflags", "-s -w", "-o", tmp + string(filepath.Separator)}
	for _, fn := range fns {
		args = append(args, "./"+filepath.ToSlash(filepath.Join(mains, fn)))
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build functions for %s/%s: %w\n%s", runtime.GOOS, runtime.GOARCH, err, out)
	}
	for _, fn := range fns {
		dst := filepath.Join(dir, fn)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("build: %w", err)
		}
		if err := os.Rename(filepath.Join(tmp, fn), filepath.Join(dst, "bootstrap")); err != nil {
			return fmt.Errorf("build %s: %w", fn, err)
		}
	}
	return nil
}

// Synth synthesizes the orders example's CDK app (examples/orders/infra) of
// the repository at root into outDir, staging the functions from codeRoot (a
// folder of <fn>/bootstrap), and returns the path of the stack template. It
// runs the app directly (go run ./examples/orders/infra),
// as the CDK CLI would, without the CLI.
func Synth(ctx context.Context, root, outDir, codeRoot string) (string, error) {
	return SynthApp(ctx, root, exampleApp, outDir, codeRoot)
}

// SynthApp is Synth for the CDK app in package appPkg (relative to root,
// e.g. ./examples/library/infra): another application's stack, with the
// feature flags of root's cdk.json.
func SynthApp(ctx context.Context, root, appPkg, outDir, codeRoot string) (string, error) {
	if err := os.RemoveAll(outDir); err != nil {
		return "", fmt.Errorf("synth: %w", err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", fmt.Errorf("synth: %w", err)
	}
	absCode, err := filepath.Abs(codeRoot)
	if err != nil {
		return "", fmt.Errorf("synth: %w", err)
	}
	// The context the CDK CLI would pass: cdk.json's (its feature flags),
	// then this synthesis's own.
	appCtx, err := cdkjson.Context(root)
	if err != nil {
		return "", fmt.Errorf("synth: %w", err)
	}
	appCtx["codeRoot"] = absCode
	ctxJSON, err := json.Marshal(appCtx)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "run", appPkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CDK_OUTDIR="+outDir, "CDK_CONTEXT_JSON="+string(ctxJSON), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("synth (go run %s): %w\n%s", appPkg, err, tail(out.String(), 4000))
	}
	return cfn.StackTemplate(outDir, "")
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// CodeFromBuild returns the resolver that maps a function's staged asset to
// the function it was built from, by comparing the asset's bootstrap with
// codeRoot/<fn>/bootstrap byte for byte, and runs hostDir/<fn>/bootstrap,
// the same function built for this machine.
func CodeFromBuild(codeRoot, hostDir string) CodeResolver {
	var once sync.Once
	byHash := map[[32]byte]string{}
	var scanErr error
	return func(t *cfn.Template, r *cfn.Resource) (string, error) {
		once.Do(func() {
			dirs, err := os.ReadDir(codeRoot)
			if err != nil {
				scanErr = err
				return
			}
			for _, d := range dirs {
				if h, err := fileHash(filepath.Join(codeRoot, d.Name(), "bootstrap")); err == nil {
					byHash[h] = d.Name()
				}
			}
		})
		if scanErr != nil {
			return "", fmt.Errorf("functions built in %s: %w", codeRoot, scanErr)
		}
		asset, err := t.AssetDir(r)
		if err != nil {
			return "", err
		}
		h, err := fileHash(filepath.Join(asset, "bootstrap"))
		if err != nil {
			return "", fmt.Errorf("%s: code asset: %w", r.LogicalID, err)
		}
		fn, ok := byHash[h]
		if !ok {
			return "", fmt.Errorf("%s: its code asset %s matches no %s/<fn>/bootstrap: the template is stale, build and synthesize again (make build synth)", r.LogicalID, asset, codeRoot)
		}
		bin := filepath.Join(hostDir, fn, "bootstrap")
		if _, err := os.Stat(bin); err != nil {
			return "", fmt.Errorf("%s is %s, but it is not built for this machine: %w", r.LogicalID, fn, err)
		}
		return bin, nil
	}
}

func fileHash(p string) ([32]byte, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}

// Assemble builds the orders example's functions at root for this machine
// into hostDir and synthesizes the stack into outDir, its code assets staged
// from codeRoot (empty: the host binaries themselves). It returns the
// template and the resolver that runs each function's host binary.
func Assemble(ctx context.Context, root, hostDir, outDir, codeRoot string) (*cfn.Template, CodeResolver, error) {
	return AssembleApp(ctx, root, exampleMains, exampleApp, hostDir, outDir, codeRoot)
}

// AssembleApp is Assemble for another application: its function mains in
// the folder mains and its CDK app in package appPkg, both relative to root.
func AssembleApp(ctx context.Context, root, mains, appPkg, hostDir, outDir, codeRoot string) (*cfn.Template, CodeResolver, error) {
	fns, err := FunctionNamesIn(root, mains)
	if err != nil {
		return nil, nil, err
	}
	if err := BuildHostFrom(ctx, root, mains, hostDir, fns); err != nil {
		return nil, nil, err
	}
	if codeRoot == "" {
		codeRoot = hostDir
	}
	path, err := SynthApp(ctx, root, appPkg, outDir, codeRoot)
	if err != nil {
		return nil, nil, err
	}
	t, err := cfn.Load(path)
	if err != nil {
		return nil, nil, err
	}
	return t, CodeFromBuild(codeRoot, hostDir), nil
}
