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
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/twin/cfn"
)

// FunctionNames lists the functions whose mains are in mains (a folder
// relative to root, e.g. examples/orders/functions): every folder there
// with a main.go, sorted (as the Makefile finds them).
func FunctionNames(root, mains string) ([]string, error) {
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

// BuildHost builds each function of fns, its main in mains (a folder
// relative to root), for this machine's OS and architecture into
// dir/<fn>/bootstrap, with the flags the Makefile uses for Lambda (static,
// lambda.norpc, trimmed), so the twin runs the same code.
func BuildHost(ctx context.Context, root, mains, dir string, fns []string) error {
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

// Synth synthesizes the CDK app in package appPkg (relative to root, e.g.
// ./examples/orders/infra) with the feature flags of root's cdk.json into
// outDir, staging the functions from codeRoot (a folder of <fn>/bootstrap),
// and returns the path of the stack template. It runs the app directly
// (go run <appPkg>), as the CDK CLI would, without the CLI.
func Synth(ctx context.Context, root, appPkg, outDir, codeRoot string) (string, error) {
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
	// The twin sends no alarm beyond its topics (EvaluateAlarms records what
	// reaches each, no email leaves); an application's backbone refuses to
	// synthesize until it is told where they go, or why nowhere.
	if appCtx[keys.ContextAlarmEmail] == nil && appCtx[keys.ContextAlarmTopicArn] == nil && appCtx[keys.ContextNoAlarmDestination] == nil {
		appCtx[keys.ContextNoAlarmDestination] = "the local twin delivers no alarms"
	}
	ctxJSON, err := json.Marshal(appCtx)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "run", appPkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CDK_OUTDIR="+outDir, "CDK_CONTEXT_JSON="+string(ctxJSON))
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

// Assemble builds an application's functions (their mains in the folder
// mains) for this machine into hostDir and synthesizes its CDK app (package
// appPkg) into outDir, its code assets staged from codeRoot (empty: the host
// binaries themselves); both paths are relative to root. It returns the
// template and the resolver that runs each function's host binary.
func Assemble(ctx context.Context, root, mains, appPkg, hostDir, outDir, codeRoot string) (*cfn.Template, CodeResolver, error) {
	fns, err := FunctionNames(root, mains)
	if err != nil {
		return nil, nil, err
	}
	if err := BuildHost(ctx, root, mains, hostDir, fns); err != nil {
		return nil, nil, err
	}
	if codeRoot == "" {
		codeRoot = hostDir
	}
	path, err := Synth(ctx, root, appPkg, outDir, codeRoot)
	if err != nil {
		return nil, nil, err
	}
	t, err := cfn.Load(path)
	if err != nil {
		return nil, nil, err
	}
	return t, CodeFromBuild(codeRoot, hostDir), nil
}
