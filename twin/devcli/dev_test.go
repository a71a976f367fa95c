package devcli

import (
	"bytes"
	"errors"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/cli"
)

// TestDevPortDefaults: dev listens on fixed ports unless told otherwise,
// each with its own flag, shown in its help with the default.
func TestDevPortDefaults(t *testing.T) {
	code, _, help := runCLI(t, "dev", "-h")
	if code != cli.ExitOK {
		t.Fatalf("dev -h: exit %d", code)
	}
	var o devOptions
	seen := map[int]bool{}
	for _, p := range o.ports.byFlag() {
		if p.def == 0 || seen[p.def] {
			t.Errorf("-%s: default %d; want a fixed port of its own", p.flag, p.def)
		}
		seen[p.def] = true
		if !regexp.MustCompile(`(?m)^  -` + p.flag + ` int\n.*\(default ` + strconv.Itoa(p.def) + `\)$`).MatchString(help) {
			t.Errorf("dev -h does not show -%s with its default %d:\n%s", p.flag, p.def, help)
		}
	}
}

// TestDevPortsRefused: a port another process listens on fails dev at
// once, before it builds anything, naming the flag to change and how; two
// endpoints on one port and a port out of range are usage errors.
func TestDevPortsRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	zero := []string{"-dynamodb-port", "0", "-sqs-port", "0", "-s3-port", "0", "-kms-port", "0", "-lambda-port", "0", "-reconcile-port", "0"}
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"-s3-port", held}, cli.ExitError, []string{"-s3-port " + held + ": cannot listen on it for S3", "pass -s3-port with a free port (0: any"}},
		{[]string{"-dynamodb-port", held}, cli.ExitError, []string{"-dynamodb-port " + held + ": cannot listen on it for DynamoDB"}},
		{[]string{"-kms-port", "4799", "-lambda-port", "4799"}, cli.ExitUsage, []string{"-kms-port and -lambda-port are both 4799"}},
		{[]string{"-sqs-port", "70000"}, cli.ExitUsage, []string{"-sqs-port 70000: want a port"}},
		{[]string{"-reconcile-port", "-1"}, cli.ExitUsage, []string{"-reconcile-port -1: want a port"}},
	} {
		start := time.Now()
		code, stdout, stderr := runCLI(t, append(append([]string{"dev"}, zero...), tc.args...)...)
		if code != tc.code {
			t.Errorf("dev %v: exit %d, want %d; stderr %q", tc.args, code, tc.code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("dev %v: stderr %q; want %q", tc.args, stderr, w)
			}
		}
		if stdout != "" || time.Since(start) > 5*time.Second {
			t.Errorf("dev %v: printed %q and took %v; want it to stop before building", tc.args, stdout, time.Since(start))
		}
	}
}

// TestStep: a step on a terminal counts its seconds on one line, then says
// it is done and how long it took; elsewhere it prints plain lines. A
// failed step returns the error without saying done.
func TestStep(t *testing.T) {
	var tty bytes.Buffer
	if err := step(&tty, true, "building 2 functions", func() error { time.Sleep(1500 * time.Millisecond); return nil }); err != nil {
		t.Fatal(err)
	}
	if got := tty.String(); !strings.HasPrefix(got, "dev: building 2 functions ...") || !strings.Contains(got, "\r\033[Kdev: building 2 functions ... 1s") ||
		!regexp.MustCompile(`\r\033\[Kdev: building 2 functions: done in \d+(\.\d)?s\n$`).MatchString(got) {
		t.Errorf("on a terminal: %q; want the step, a count of seconds, then done", got)
	}
	var plain bytes.Buffer
	boom := errors.New("boom")
	if err := step(&plain, false, "synthesizing", func() error { return boom }); !errors.Is(err, boom) {
		t.Errorf("a failed step returned %v, want its error", err)
	}
	if got := plain.String(); got != "dev: synthesizing ...\n" {
		t.Errorf("elsewhere, failed: %q; want the step on a line of its own and no done", got)
	}
}
