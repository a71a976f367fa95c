package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/twin/localaws"
	"github.com/fourlanes/fourlanes/twin/twintest"
)

// devProc is a running `fourlanes dev`: its output lines as they come.
type devProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string
	seen   []string
	stderr bytes.Buffer
	ctx    context.Context
	root   string
	dir    string // FOURLANES_TWIN_DIR: dev's files
	env    []string
}

// startDev runs cli with args (dev …) in the repository, its files in a
// folder of the test's own.
func startDev(t *testing.T, ctx context.Context, cli string, args ...string) *devProc {
	t.Helper()
	root, err := localaws.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	d := &devProc{t: t, lines: make(chan string, 1024), ctx: ctx, root: root, dir: t.TempDir()}
	d.env = append(os.Environ(), "FOURLANES_TWIN_DIR="+d.dir)
	d.cmd = exec.CommandContext(ctx, cli, args...)
	d.cmd.Dir, d.cmd.Env = root, d.env
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = &d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(d.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			d.lines <- sc.Text()
		}
	}()
	return d
}

// waitFor returns the first line containing sub, or fails the test.
func (d *devProc) waitFor(sub string, timeout time.Duration) string {
	d.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-d.lines:
			if !ok {
				d.t.Fatalf("dev exited before %q; output:\n%s\nstderr: %s", sub, strings.Join(d.seen, "\n"), d.stderr.String())
			}
			d.seen = append(d.seen, l)
			if strings.Contains(l, sub) {
				return l
			}
		case <-deadline:
			d.t.Fatalf("dev did not print %q within %v; output:\n%s", sub, timeout, strings.Join(d.seen, "\n"))
		}
	}
}

// run runs another command (cli args…) against the running twin and
// returns its exit status and output.
func (d *devProc) run(cli string, args ...string) (code int, stdout, stderr string) {
	d.t.Helper()
	return d.runWith(d.env, cli, args...)
}

// runWith is run with the environment env.
func (d *devProc) runWith(env []string, cli string, args ...string) (code int, stdout, stderr string) {
	d.t.Helper()
	c := exec.CommandContext(d.ctx, cli, args...)
	c.Dir, c.Env = d.root, env
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), o.String(), e.String()
	}
	if err != nil {
		d.t.Fatalf("%s %v: %v", filepath.Base(cli), args, err)
	}
	return 0, o.String(), e.String()
}

// evalEnv is the environment of a shell that ran eval "$(cli env -local)"
// in d's environment: what a team's own process started from it gets.
func (d *devProc) evalEnv(cli string) []string {
	d.t.Helper()
	c := exec.CommandContext(d.ctx, "bash", "-c", `eval "$("$0" env -local)" && env -0`, cli)
	c.Dir, c.Env = d.root, d.env
	out, err := c.Output()
	if err != nil {
		d.t.Fatalf("eval \"$(fourlanes env -local)\": %v", err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

// freePorts returns n distinct loopback ports free a moment ago, as flags'
// values.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var ports []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// freePortFlags are dev's port flags, each with a free port: tests run
// several twins at once, and beside a developer's 'make dev' on the
// default ports.
func freePortFlags(t *testing.T) []string {
	t.Helper()
	var args []string
	for i, p := range freePorts(t, len(devPortFlags)) {
		args = append(args, "-"+devPortFlags[i], p)
	}
	return args
}

var devPortFlags = []string{"dynamodb-port", "sqs-port", "s3-port", "kms-port", "lambda-port", "reconcile-port"}

// stop sends Ctrl-C and checks dev stops cleanly and removes dev.json.
func (d *devProc) stop() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
		d.t.Fatal(err)
	}
	d.waitFor("dev: stopping", 10*time.Second)
	for range d.lines {
	}
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			d.t.Errorf("dev exited with %v after Ctrl-C; stderr: %s", err, d.stderr.String())
		}
	case <-time.After(15 * time.Second):
		d.t.Fatal("dev did not exit within 15s of Ctrl-C")
	}
	if _, err := os.Stat(filepath.Join(d.dir, "dev.json")); !errors.Is(err, fs.ErrNotExist) {
		d.t.Errorf("dev.json left behind after Ctrl-C: %v", err)
	}
}

// `fourlanes dev` as a user runs it: it builds, synthesizes, starts its own
// servers, brings the stack up, runs the demo (whose poison record ends on
// the change feed's on-failure queue), serves the other commands through
// -local, and stops cleanly on Ctrl-C.
func TestDevCommand(t *testing.T) {
	t.Parallel()          // see parallel in harness_test.go
	twintest.Endpoints(t) // skip (or fail in CI) as the other tests do without servers
	_, _, cli := assemble(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ports := freePortFlags(t) // -dynamodb-port P0 -sqs-port P1 …, in devPortFlags' order
	port := func(flag string) string { return ports[2*slices.Index(devPortFlags, flag)+1] }
	d := startDev(t, ctx, cli, append([]string{"dev", "-tenants", "2", "-orders", "2", "-status-every", "250ms"}, ports...)...)
	d.waitFor("dev: building 8 functions for this machine", time.Minute)
	urlLine := d.waitFor("reconcile URL", 6*time.Minute)
	if !strings.Contains(urlLine, "http://127.0.0.1:"+port("reconcile-port")+"/") {
		t.Errorf("reconcile URL line: %q; want the port of -reconcile-port, %s", urlLine, port("reconcile-port"))
	}
	d.waitFor("appended", 30*time.Second) // the status line
	d.waitFor("the poison record was isolated", time.Minute)

	// The poison record is fixed; the injected dead letter stays open (its
	// payload still does not decode), so repair exits 3 and says so.
	code, rep, _ := d.run(cli, "repair", "-local")
	var report repairReport
	if err := json.Unmarshal([]byte(rep), &report); err != nil || code != exitFinding {
		t.Fatalf("repair -local: exit %d, %v: %s", code, err, rep)
	}
	if src := report.Sources["changefeed_dlq"]; src.Fixed != 1 {
		t.Errorf("repair -local: %s", rep)
	}
	code, out, errOut := d.run(cli, "reconcile", "-local")
	checkReconcileExit(t, code, out, errOut)
	// The demo's two chains, and the heartbeat's once its schedule (one
	// minute, as in the template) has run.
	want := 2
	if strings.Contains(out, `"tenant": "`+tenancy.HeartbeatTenant+`"`) {
		want = 3
	}
	if strings.Count(out, `"chain_intact": true`) != want {
		t.Errorf("reconcile -local: exit %d: want %d chains intact: %s", code, want, out)
	}
	if code, out, errOut := d.run(cli, "emit", "-local", "-tenant", "t9", "-type", "order.paid",
		"-payload", `{"order_id":"o1","customer_email":"a@b.example","amount_cents":100,"payment_ref":"p1"}`); code != 0 || !strings.Contains(out, `"seq": 1`) {
		t.Errorf("emit -local: exit %d: %s%s", code, out, errOut)
	}

	// One step for any other process: eval "$(fourlanes env -local)". The
	// exports name the ports dev was given; with them alone (no -local), the
	// CLI's AWS SDK reaches the twin's DynamoDB, its reconcile URL signs a
	// checkpoint with the twin's KMS into its S3, export fetches it, and
	// verify -checkpoint proves the export extends it.
	env := d.evalEnv(cli)
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	for name, flag := range map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": "dynamodb-port", "AWS_ENDPOINT_URL_SQS": "sqs-port",
		"AWS_ENDPOINT_URL_S3": "s3-port", "AWS_ENDPOINT_URL_KMS": "kms-port", "AWS_ENDPOINT_URL_LAMBDA": "lambda-port"} {
		if want := "http://127.0.0.1:" + port(flag); vars[name] != want {
			t.Errorf("after eval of env -local, %s=%q; want %q (-%s)", name, vars[name], want, flag)
		}
	}
	if code, out, errOut := d.runWith(env, cli, "emit", "-tenant", "t8", "-type", "order.paid",
		"-payload", `{"order_id":"o8","customer_email":"a@b.example","amount_cents":100,"payment_ref":"p8"}`); code != 0 || !strings.Contains(out, `"seq": 1`) {
		t.Fatalf("emit with the exports of env -local: exit %d: %s%s", code, out, errOut)
	}
	db := dynamodb.New(dynamodb.Options{Region: vars["AWS_REGION"], BaseEndpoint: aws.String(vars["AWS_ENDPOINT_URL_DYNAMODB"]),
		Credentials: credentials.NewStaticCredentialsProvider(vars["AWS_ACCESS_KEY_ID"], vars["AWS_SECRET_ACCESS_KEY"], "")})
	head, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(vars[keys.EnvEventsTable]), Key: map[string]ddbtypes.AttributeValue{
		keys.AttrTenant: &ddbtypes.AttributeValueMemberS{Value: "t8"}, keys.AttrSeq: &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(keys.HeadSeq)}}})
	if err != nil || head.Item == nil {
		t.Fatalf("t8's head row in %s through the exported endpoint: %v, %v", vars[keys.EnvEventsTable], head, err)
	}
	code, out, errOut = d.runWith(env, cli, "reconcile", "-tenant", "t8")
	checkReconcileExit(t, code, out, errOut)
	file := filepath.Join(t.TempDir(), "t8.jsonl")
	// The notary signs t8's checkpoint as it reads the events stream, a
	// moment after the commit: export until it finds one.
	var exportOut string
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, out, errOut := d.runWith(env, cli, "export", "-tenant", "t8", "-o", file, "-json")
		if code != 0 {
			t.Fatalf("export with the exports of env -local: exit %d: %s%s", code, out, errOut)
		}
		if exportOut = out; strings.Contains(out, `"checkpoint":{"file":"`+file+`.checkpoint"`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(exportOut, `"checkpoint":{"file":"`+file+`.checkpoint"`) {
		t.Fatalf("export with the exports of env -local found no checkpoint signed by the notary within 30s: %s", exportOut)
	}
	kc := kms.New(kms.Options{Region: vars["AWS_REGION"], BaseEndpoint: aws.String(vars["AWS_ENDPOINT_URL_KMS"]),
		Credentials: credentials.NewStaticCredentialsProvider(vars["AWS_ACCESS_KEY_ID"], vars["AWS_SECRET_ACCESS_KEY"], "")})
	pk, err := kc.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(vars[keys.EnvCheckpointKey])})
	if err != nil {
		t.Fatalf("the checkpoint key's public key (%s=%s) through the exported KMS endpoint: %v", keys.EnvCheckpointKey, vars[keys.EnvCheckpointKey], err)
	}
	der := filepath.Join(t.TempDir(), "checkpoint-key.der")
	if err := os.WriteFile(der, pk.PublicKey, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := d.runWith(env, cli, "verify", "-checkpoint", file+".checkpoint", "-origin", vars[keys.EnvCheckpointLog], "-key", der, file); code != 0 || !strings.Contains(out, "OK extends the checkpoint") {
		t.Errorf("verify -checkpoint of the export: exit %d: %s%s", code, out, errOut)
	}
	// The heartbeat is scheduled on the twin as in the template (every
	// minute), so an idle dev stack shows its pulse too.
	twinLog, err := os.ReadFile(filepath.Join(d.dir, "twin.log"))
	if err != nil {
		t.Fatal(err)
	}
	scheduled := false
	for _, line := range bytes.Split(twinLog, []byte("\n")) {
		var l struct {
			Msg      string `json:"msg"`
			Function string `json:"function"`
			Every    int64  `json:"every"` // slog's JSON: nanoseconds
		}
		if json.Unmarshal(line, &l) == nil && l.Msg == "twin: schedule" && strings.HasPrefix(l.Function, "Heartbeat") && time.Duration(l.Every) == time.Minute {
			scheduled = true
		}
	}
	if !scheduled {
		t.Errorf("dev's twin.log schedules no heartbeat every minute")
	}
	d.stop()
}

// `fourlanes dev -app` brings up another application's stack (the library,
// from its own CDK app and mains), with no demo: an event emitted through
// the library's own CLI reaches its DURABLE subscription on the twin.
func TestDevCommandOtherApplication(t *testing.T) {
	t.Parallel()          // see parallel in harness_test.go
	twintest.Endpoints(t) // skip (or fail in CI) as the other tests do without servers
	_, _, libCLI := assembleLibrary(t)
	root, err := localaws.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	fourlanes := filepath.Join(t.TempDir(), "fourlanes")
	build := exec.CommandContext(ctx, "go", "build", "-o", fourlanes, "./cmd/fourlanes")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the framework's CLI: %v\n%s", err, out)
	}
	d := startDev(t, ctx, fourlanes, append([]string{"dev", "-app", "./examples/library/infra", "-data", "", "-status-every", "250ms"}, freePortFlags(t)...)...)
	d.waitFor("synthesizing the CDK app (go run ./examples/library/infra)", 6*time.Minute)
	d.waitFor("the stack is up", 6*time.Minute)
	if code, out, errOut := d.run(libCLI, "emit", "-local", "-tenant", "t1", "-type", "loan.opened",
		"-payload", `{"loan_id":"l1","book":"b1","member":"m1"}`); code != 0 || !strings.Contains(out, `"seq": 1`) {
		t.Fatalf("library emit -local: exit %d: %s%s", code, out, errOut)
	}
	d.waitFor("delivered DURABLE 1", time.Minute)
	code, out, errOut := d.run(fourlanes, "reconcile", "-local")
	checkReconcileExit(t, code, out, errOut)
	if strings.Count(out, `"chain_intact": true`) != 1 {
		t.Errorf("reconcile -local: exit %d: %s", code, out)
	}
	d.stop()
}

const exitFinding = 3
