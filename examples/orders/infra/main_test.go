package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

func TestCheckBuilt(t *testing.T) {
	root := t.TempDir()
	for i, fn := range keys.Functions {
		err := checkBuilt(root)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(root, fn, "bootstrap")) || !strings.Contains(err.Error(), "make build") {
			t.Fatalf("with %d of %d built: err = %v, want one naming %s/bootstrap and make build", i, len(keys.Functions), err, fn)
		}
		if err := os.MkdirAll(filepath.Join(root, fn), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, fn, "bootstrap"), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := checkBuilt(root); err != nil {
		t.Errorf("all built: %v", err)
	}
}

// TestStackNameFromContext: -c stackName=... names the stack; without it the
// name is Fourlanes, the one existing deployments have.
func TestStackNameFromContext(t *testing.T) {
	for _, tt := range []struct {
		ctx  map[string]any
		want string
	}{
		{nil, "Fourlanes"},
		{map[string]any{"stackName": "Library"}, "Library"},
	} {
		app := awscdk.NewApp(&awscdk.AppProps{Context: &tt.ctx})
		if got := contextString(app, "stackName", "Fourlanes"); got != tt.want {
			t.Errorf("context %v: stack name %q, want %q", tt.ctx, got, tt.want)
		}
	}
}
