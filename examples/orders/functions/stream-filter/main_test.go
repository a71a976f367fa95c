package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/obs/obstest"
	"github.com/fourlanes/fourlanes/twin/lambdart"
)

// TestBootstrap builds the function as it ships (lambda.norpc) and runs it
// against the local Lambda Runtime API (twin/lambdart): one invocation with the mixed Pipe
// batch fixture, answered with the envelopes.
func TestBootstrap(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	payload, err := os.ReadFile(filepath.Join("testdata", "pipe-batch.json"))
	if err != nil {
		t.Fatal(err)
	}
	var stdout obstest.Buffer
	fn := lambdart.New(lambdart.Spec{
		Name: "stream-filter", ARN: "arn:aws:lambda:eu-west-1:123456789012:function:stream-filter",
		Binary: bin, Env: map[string]string{"LOG_LEVEL": "info"},
		Output: func(l lambdart.Line) { _, _ = stdout.Write([]byte(l.Text + "\n")) },
	})
	defer fn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := fn.Invoke(ctx, payload)
	if err != nil || res.Err != nil {
		t.Fatalf("invoke: %v %v\n%s", err, res.Err, stdout.String())
	}
	resp := res.Payload
	var envs []map[string]any
	if err := json.Unmarshal(resp, &envs); err != nil || len(envs) != 4 {
		t.Fatalf("response: got %s (%v), want 4 envelopes", resp, err)
	}
	// The runtime reads the process's output on its own goroutine: the line
	// may arrive after the response.
	if !stdout.WaitFor(`"msg":"stream-filter serving`, 10*time.Second) {
		t.Fatalf("no start-up line saying what it serves within 10s:\n%s", stdout.String())
	}
}
