package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/internal/twin/twintest"
)

// `fourlanes dev` as a user runs it: it builds, synthesizes, starts its own
// servers, brings the stack up, runs the demo (whose poison record ends on
// the change feed's on-failure queue), serves the other commands through
// -local, and stops cleanly on Ctrl-C.
func TestDevCommand(t *testing.T) {
	t.Parallel()          // see parallel in harness_test.go
	twintest.Endpoints(t) // skip (or fail in CI) as the other tests do without servers
	_, _, cli := assemble(t)
	root, err := localaws.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := append(os.Environ(), "FOURLANES_TWIN_DIR="+dir)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, "dev", "-tenants", "2", "-orders", "2", "-status-every", "250ms")
	cmd.Dir, cmd.Env = root, env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var seen []string
	waitFor := func(sub string, timeout time.Duration) string {
		t.Helper()
		deadline := time.After(timeout)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("dev exited before %q; output:\n%s\nstderr: %s", sub, strings.Join(seen, "\n"), stderr.String())
				}
				seen = append(seen, l)
				if strings.Contains(l, sub) {
					return l
				}
			case <-deadline:
				t.Fatalf("dev did not print %q within %v; output:\n%s", sub, timeout, strings.Join(seen, "\n"))
			}
		}
	}
	urlLine := waitFor("reconcile URL", 2*time.Minute)
	if !strings.Contains(urlLine, "http://127.0.0.1:") {
		t.Errorf("reconcile URL line: %q", urlLine)
	}
	waitFor("appended", 30*time.Second) // the status line
	waitFor("the poison record was isolated", time.Minute)

	runLocal := func(args ...string) (int, string) {
		t.Helper()
		c := exec.CommandContext(ctx, cli, args...)
		c.Dir, c.Env = root, env
		var o bytes.Buffer
		c.Stdout = &o
		err := c.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), o.String()
		}
		if err != nil {
			t.Fatalf("fourlanes %v: %v", args, err)
		}
		return 0, o.String()
	}
	// The poison record is fixed; the injected dead letter stays open (its
	// payload still does not decode), so repair exits 3 and says so.
	code, rep := runLocal("repair", "-local")
	var report repairReport
	if err := json.Unmarshal([]byte(rep), &report); err != nil || code != exitFinding {
		t.Fatalf("repair -local: exit %d, %v: %s", code, err, rep)
	}
	if src := report.Sources["changefeed_dlq"]; src.Fixed != 1 {
		t.Errorf("repair -local: %s", rep)
	}
	if code, out := runLocal("reconcile", "-local"); code != 0 || strings.Count(out, `"chain_intact": true`) != 2 {
		t.Errorf("reconcile -local: exit %d: %s", code, out)
	}
	if code, out := runLocal("emit", "-local", "-tenant", "t9", "-type", "order.paid",
		"-payload", `{"order_id":"o1","customer_email":"a@b.example","amount_cents":100,"payment_ref":"p1"}`); code != 0 || !strings.Contains(out, `"seq": 1`) {
		t.Errorf("emit -local: exit %d: %s", code, out)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitFor("dev: stopping", 10*time.Second)
	for range lines {
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("dev exited with %v after Ctrl-C; stderr: %s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("dev did not exit within 15s of Ctrl-C")
	}
	if _, err := os.Stat(filepath.Join(dir, "dev.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("dev.json left behind after Ctrl-C: %v", err)
	}
}

const exitFinding = 3
