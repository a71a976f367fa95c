package cdkjson

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The repository's cdk.json carries the recommended feature flags and a
// build step, and Context reads them.
func TestRepositoryCDKJSON(t *testing.T) {
	ctx, err := Context(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	flags := 0
	for k := range ctx {
		if strings.HasPrefix(k, "@aws-cdk/") {
			flags++
		}
	}
	if flags < 50 {
		t.Errorf("cdk.json sets %d feature flags: want the recommended set (`cdk flags --unstable=flags --set --unconfigured --recommended`)", flags)
	}
	if v, ok := ctx["@aws-cdk/aws-lambda:useCdkManagedLogGroup"]; !ok || v != true {
		t.Errorf("a recommended flag is missing or off: @aws-cdk/aws-lambda:useCdkManagedLogGroup = %v", v)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "cdk.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"build": "make build"`) {
		t.Error(`cdk.json has no "build": "make build" step: cdk synth would stage unbuilt functions`)
	}
}

func TestContextErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Context(dir); err == nil || !strings.Contains(err.Error(), "cdk.json") {
		t.Errorf("no cdk.json: got %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cdk.json"), []byte(`{"app":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Context(dir); err == nil || !strings.Contains(err.Error(), `no "context"`) {
		t.Errorf("no context: got %v", err)
	}
}
