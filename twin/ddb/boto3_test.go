package ddb_test

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/twin/ddb"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// TestParityBoto3 runs testdata/boto3_check.py (boto3, the Python SDK) against a server
// started here: the same items and errors as the Go parity suite, read by a second SDK.
// It needs .cache/venv/bin/python with boto3 (scripts/deps.sh boto3); without them it
// skips, except under CI=true, where it fails.
func TestParityBoto3(t *testing.T) {
	root, err := localaws.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(root, ".cache", "venv", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		skipUnlessCI(t, "no "+py+" (run scripts/deps.sh boto3)")
	}
	if out, err := exec.Command(py, "-c", "import boto3").CombinedOutput(); err != nil {
		skipUnlessCI(t, "boto3 is not installed in .cache/venv (run scripts/deps.sh boto3): "+string(out))
	}

	db := ddb.New(ddb.Options{TTLSweep: -1})
	srv := httptest.NewServer(db.Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = db.Close()
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, filepath.Join("testdata", "boto3_check.py"), srv.URL)
	// No profile, config file or proxy of the machine's may change what boto3 sends.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(strings.ToUpper(kv), "HTTP_PROXY=") && !strings.HasPrefix(strings.ToUpper(kv), "HTTPS_PROXY=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_EC2_METADATA_DISABLED=true", "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("boto3 check against %s: %v\n%s", srv.URL, err, out)
	}
	t.Logf("%s", out)
}

// skipUnlessCI skips the test, or fails it when CI=true (CI must run every check).
func skipUnlessCI(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", why)
	}
	t.Skip(why)
}
