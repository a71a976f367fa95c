// Package cdkjson reads the context of the repository's cdk.json (the CDK
// feature flags among it), so that every synthesis of the app uses the same
// context the CDK CLI passes it: the infra tests and the twin, which run the
// app without the CLI, as well as `cdk synth|deploy`.
package cdkjson

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Context returns the "context" object of root/cdk.json.
func Context(root string) (map[string]any, error) {
	p := filepath.Join(root, "cdk.json")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("cdk.json: %w", err)
	}
	var doc struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if doc.Context == nil {
		return nil, fmt.Errorf("%s has no \"context\" object: the feature flags belong there (`cdk flags`)", p)
	}
	return doc.Context, nil
}

// AppPackage returns the Go package of root/cdk.json's "app" command, which
// must be `go run <package>` (e.g. "./examples/orders/infra").
func AppPackage(root string) (string, error) {
	p := filepath.Join(root, "cdk.json")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("cdk.json: %w", err)
	}
	var doc struct {
		App string `json:"app"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	f := strings.Fields(doc.App)
	if len(f) != 3 || f[0] != "go" || f[1] != "run" {
		return "", fmt.Errorf("%s: \"app\" is %q; want \"go run <package of the CDK app>\"", p, doc.App)
	}
	return f[2], nil
}
