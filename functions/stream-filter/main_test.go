package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/internal/logtest"
)

// TestBootstrap builds the function as it ships (lambda.norpc) and runs it
// against a minimal Lambda Runtime API: one invocation with the mixed Pipe
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
	payload, err := os.ReadFile(filepath.Join("enrich", "testdata", "pipe-batch.json"))
	if err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(payload)
	srv := httptest.NewServer(rt)
	defer srv.Close()

	var stdout logtest.Buffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "AWS_LAMBDA_RUNTIME_API="+strings.TrimPrefix(srv.URL, "http://"), "LOG_LEVEL=info")
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	var resp []byte
	select {
	case resp = <-rt.responses:
	case <-time.After(30 * time.Second):
		t.Fatalf("no response from the function\n%s", stdout.String())
	}
	var envs []map[string]any
	if err := json.Unmarshal(resp, &envs); err != nil || len(envs) != 4 {
		t.Fatalf("response: got %s (%v), want 4 envelopes", resp, err)
	}
	if !strings.Contains(stdout.String(), `"msg":"stream-filter serving`) {
		t.Errorf("no start-up line saying what it serves:\n%s", stdout.String())
	}
}

// runtime is the Lambda Runtime API: it hands out one invocation, collects
// its response, and then holds the next poll until the test ends.
type runtime struct {
	payload   []byte
	sent      atomic.Bool
	responses chan []byte
}

func newRuntime(payload []byte) *runtime {
	return &runtime{payload: payload, responses: make(chan []byte, 1)}
}

func (rt *runtime) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/2018-06-01/runtime/invocation/next":
		if !rt.sent.CompareAndSwap(false, true) {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", "req-bootstrap-1")
		w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10))
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:eu-west-1:123456789012:function:stream-filter")
		_, _ = w.Write(rt.payload)
	case strings.HasSuffix(r.URL.Path, "/response"), strings.HasSuffix(r.URL.Path, "/error"):
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		rt.responses <- body
	default:
		http.NotFound(w, r)
	}
}
