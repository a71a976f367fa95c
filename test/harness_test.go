// Package e2e runs the whole stack end to end on the local twin: the
// synthesized CloudFormation template brought up by twin on the
// project's own DynamoDB and ElasticMQ, the real function binaries, the example
// application as the producer, and the operator CLI. Each test brings up
// its own stack (own tables, queues, processes) from the one template,
// sometimes mutated the way a careless edit would.
//
// # parallel
//
// Every test brings up a stack of its own (tables, queues and processes
// named by a prefix of its own) on the run's shared DynamoDB and ElasticMQ,
// so almost every test calls t.Parallel(), and TestMain runs up to
// defaultParallel of them at once (they spend most of their time waiting:
// visibility timeouts, batching windows, lease expiry), unless -parallel is
// given. A test may run in parallel only if it touches nothing another
// test's stack shares: its fault rules name its own tables and it lists and
// clears only those (faults, ?table=); it sets no environment variable of
// the process (t.Setenv) and changes no other global. Go runs the tests
// that do not call t.Parallel() first, one at a time, then the others.
// These stay sequential, each for a reason its comment gives:
// TestKillStreamFilterMidInvocation (its kill must land in the
// microseconds between a line and the answer), TestChaosSoak (its report
// measures how fast the stack settles) and TestHeartbeatFlowsAndStopsAlarm
// (a beat late by one 300 ms alarm period on a loaded machine is a breach).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/fourlanes/fourlanes/examples/orders/demo"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/lambdart"
	"github.com/fourlanes/fourlanes/twin/localaws"
	"github.com/fourlanes/fourlanes/twin/testkit"
	"github.com/fourlanes/fourlanes/twin/twintest"
)

func TestMain(m *testing.M) {
	flag.Parse()
	setDefaultParallel(defaultParallel)
	if f := flag.Lookup("test.run"); f == nil || f.Value.String() == "" {
		// The whole package: start every build now, so that they overlap the
		// first (sequential) tests instead of holding up the test that
		// needs them. A run of a few tests (-run) builds only what they use.
		// The orders example first: the sequential tests, which run first,
		// need it; the rest builds beside them.
		go func() {
			wait := testkit.Prepare(ordersApp)
			prebuildCLI(ordersCLI)
			_ = wait() // its test reports an error
			for _, o := range []testkit.Options{libraryApp, relayApp} {
				testkit.Prepare(o)
			}
			prebuildCLI(libraryCLI)
			prebuildCLI(fourlanesCLI)
		}()
	}
	code := twintest.Run(m)
	cleanup()
	os.Exit(code)
}

// defaultParallel is how many tests run at once unless -parallel says
// otherwise: more than the cores, since the tests mostly wait.
var defaultParallel = max(4, runtime.GOMAXPROCS(0))

// setDefaultParallel sets -test.parallel to n unless the command line set it
// (go test -parallel N passes -test.parallel=N).
func setDefaultParallel(n int) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic(err)
		}
	}
}

// The e2e suites bring their stacks up with the public test kit
// (twin/testkit), as a team's own tests would: it builds an application's
// functions for this machine and synthesizes its CDK app once per test
// binary. Beside that, each application's build of the CLI (pkg/cli with the
// application's catalog: emit needs it), once.

// The CLIs of the applications the tests bring up.
const (
	ordersCLI    = "./examples/orders/cmd/orders"
	libraryCLI   = "./examples/library/cmd/library"
	fourlanesCLI = "./cmd/fourlanes" // no application's catalog
)

// ordersApp is where the orders example lives in the workspace.
var ordersApp = testkit.Options{App: "./examples/orders/infra", Functions: "examples/orders/functions", StackPrefix: "e2e"}

var (
	cliMu    sync.Mutex
	cliBuilt = map[string]*cliBuild{} // by the CLI's package
	tmpDir   string
)

type cliBuild struct {
	once sync.Once
	path string
	err  error
}

func cleanup() {
	cliMu.Lock()
	defer cliMu.Unlock()
	if tmpDir != "" {
		os.RemoveAll(tmpDir)
	}
}

// cliOf returns the build of the CLI pkg, starting it if no caller has yet.
func cliOf(pkg string) *cliBuild {
	cliMu.Lock()
	defer cliMu.Unlock()
	b := cliBuilt[pkg]
	if b == nil {
		b = &cliBuild{}
		cliBuilt[pkg] = b
	}
	return b
}

// prebuildCLI builds the CLI pkg, once; buildCLI reports its error.
func prebuildCLI(pkg string) {
	b := cliOf(pkg)
	b.once.Do(func() {
		root, err := localaws.ModuleRoot()
		if err != nil {
			b.err = err
			return
		}
		cliMu.Lock()
		if tmpDir == "" {
			tmpDir, err = os.MkdirTemp("", "fourlanes-e2e-")
		}
		dir := tmpDir
		cliMu.Unlock()
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, strings.ReplaceAll(strings.Trim(pkg, "./"), "/", "-"))
		build := exec.Command("go", "build", "-o", b.path, pkg)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build the CLI %s: %w\n%s", pkg, err, out)
		}
	})
}

// buildCLI builds the application's CLI (pkg, e.g. ./examples/orders/cmd/orders) once,
// or waits for the build TestMain started.
func buildCLI(t *testing.T, pkg string) string {
	t.Helper()
	prebuildCLI(pkg)
	b := cliOf(pkg)
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// assemble returns the orders example's synthesized template (unmutated),
// what runs its functions, and its CLI.
func assemble(t *testing.T) (*cfn.Template, twin.CodeResolver, string) {
	t.Helper()
	tmpl, code := testkit.Assemble(t, ordersApp)
	return tmpl, code, buildCLI(t, ordersCLI)
}

// stack is one running twin of the synthesized stack, and the example
// application writing to it.
type stack struct {
	t   *testing.T
	tw  *twin.Twin
	app *demo.App
	ddb *dynamodb.Client
	sqs *sqs.Client
	cli string
	// env is dlq-repair's environment: it names every table and queue.
	env map[string]string
	// Logical IDs, found in the template by what they are.
	fn         map[string]string // functions/<name> → logical ID
	pipe       string
	feedMap    string // the change feed's stream mapping
	durableMap string // durable-consumer's queue mapping
	tamperMap  string // tamper-watch's stream mapping on the state table (its only one)
	notaryMap  string // the notary's stream mapping on the events table
	url        string // reconcile's Function URL

	mu     sync.Mutex
	onLine func(fn string, l lambdart.Line)
	lines  []string // every line the functions printed, "<fn>: text"
}

// upStack brings the application o names up with the test kit, mutated by
// mutate (on a copy), its functions' lines collected in the stack.
func upStack(t *testing.T, o testkit.Options, mutate func(*cfn.Template), cli string) *stack {
	t.Helper()
	o.Mutate = mutate
	ks := testkit.Up(t, o)
	s := &stack{t: t, tw: ks.Twin, ddb: ks.DynamoDB, sqs: ks.SQS, cli: cli, fn: ks.Functions, url: ks.ReconcileURL}
	ks.OnLine(s.line)
	return s
}

// startStack brings up a fresh twin of the synthesized template, mutated
// by mutate if given (on a copy).
func startStack(t *testing.T, mutate func(*cfn.Template)) *stack {
	t.Helper()
	twintest.Endpoints(t) // skip before building when there are no servers
	_, _, cli := assemble(t)
	s := upStack(t, ordersApp, mutate, cli)
	tw, tmpl := s.tw, s.tw.Template()
	var err error
	for _, name := range []string{keys.FnStreamFilter, keys.FnDurableConsumer, keys.FnChangefeed, keys.FnReconcile, keys.FnDLQRepair, keys.FnTamperWatch, keys.FnNotary} {
		if s.fn[name] == "" {
			t.Fatalf("the template has no function %s", name)
		}
	}
	for _, r := range tmpl.OfType(cfn.TypePipe) {
		s.pipe = r.LogicalID
	}
	for _, r := range tmpl.OfType(cfn.TypeMapping) {
		ref, _ := r.Prop("FunctionName")
		refs := tmpl.References(ref)
		switch {
		case len(refs) == 1 && refs[0] == s.fn[keys.FnChangefeed]:
			s.feedMap = r.LogicalID
		case len(refs) == 1 && refs[0] == s.fn[keys.FnDurableConsumer]:
			s.durableMap = r.LogicalID
		case len(refs) == 1 && refs[0] == s.fn[keys.FnTamperWatch]:
			if s.tamperMap != "" {
				t.Fatalf("tamper-watch has mappings %s and %s: it reads the state table's stream only (the events stream has two readers, the Pipe and the notary)", s.tamperMap, r.LogicalID)
			}
			s.tamperMap = r.LogicalID
		case len(refs) == 1 && refs[0] == s.fn[keys.FnNotary]:
			s.notaryMap = r.LogicalID
		}
	}
	if s.pipe == "" || s.feedMap == "" || s.durableMap == "" || s.tamperMap == "" || s.notaryMap == "" {
		t.Fatalf("template: pipe %q, change feed mapping %q, durable mapping %q, tamper-watch state mapping %q, notary mapping %q: want all five",
			s.pipe, s.feedMap, s.durableMap, s.tamperMap, s.notaryMap)
	}
	if s.url == "" {
		t.Fatal("no Function URL for reconcile")
	}
	if s.env, err = tw.FunctionEnv(s.fn[keys.FnDLQRepair]); err != nil {
		t.Fatal(err)
	}
	tables, err := demo.TablesFromEnv(s.env)
	if err != nil {
		t.Fatal(err)
	}
	if s.app, err = demo.New(s.ddb, tables, twintest.Logger(t)); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *stack) line(id string, l lambdart.Line) {
	s.mu.Lock()
	s.lines = append(s.lines, id+": "+l.Text)
	f := s.onLine
	s.mu.Unlock()
	if f != nil {
		f(id, l)
	}
}

// whenLine sets what to do on each function line.
func (s *stack) whenLine(f func(fn string, l lambdart.Line)) {
	s.mu.Lock()
	s.onLine = f
	s.mu.Unlock()
}

// grep returns the function lines of logical ID fn that contain sub.
func (s *stack) grep(fn, sub string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range s.lines {
		if strings.HasPrefix(l, fn+": ") && strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// queueID returns the logical ID of the queue whose URL the environment
// variable env of dlq-repair holds.
func (s *stack) queueID(env string) string {
	s.t.Helper()
	url := s.env[env]
	for _, r := range s.tw.Template().OfType(cfn.TypeQueue) {
		if u, _ := s.tw.QueueURL(r.LogicalID); u == url {
			return r.LogicalID
		}
	}
	s.t.Fatalf("no queue for %s=%s", env, url)
	return ""
}

// depth returns visible + in-flight messages of the queue env names.
func (s *stack) depth(env string) int {
	s.t.Helper()
	v, f, err := s.tw.QueueDepth(context.Background(), s.queueID(env))
	if err != nil {
		s.t.Fatal(err)
	}
	return v + f
}

// peek reads the bodies of the queue env names and makes them visible again
// at once, as if they had not been read (the receive count still grows).
func (s *stack) peek(env string) []string {
	s.t.Helper()
	ctx := context.Background()
	url := aws.String(s.env[env])
	out, err := s.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
	})
	if err != nil {
		s.t.Fatal(err)
	}
	var bodies []string
	for _, m := range out.Messages {
		bodies = append(bodies, aws.ToString(m.Body))
		if _, err := s.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
			s.t.Fatal(err)
		}
	}
	return bodies
}

// claim reads the DURABLE claim of (event, subscription).
func (s *stack) claim(eventID, sub string) (delivery.ClaimRecord, bool) {
	s.t.Helper()
	rec, ok, err := delivery.NewDynamoStore(s.ddb, s.env[keys.EnvStateTable]).Get(context.Background(), delivery.Key{EventID: eventID, Subscription: sub})
	if err != nil {
		s.t.Fatal(err)
	}
	return rec, ok
}

// run runs the fourlanes CLI with the twin's Lambda endpoint and returns
// its standard output; a non-zero exit fails the test unless wantFail.
func (s *stack) run(wantFail bool, args ...string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.cli, args...)
	cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL_LAMBDA="+s.tw.InvokeEndpoint(), "AWS_REGION="+localaws.Region,
		"AWS_ACCESS_KEY_ID=fourlanes", "AWS_SECRET_ACCESS_KEY=local", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if (err != nil) != wantFail {
		s.t.Fatalf("fourlanes %s: err %v (want failure: %v)\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, wantFail, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// reconcileReport is the part of reconcile's answer the tests read.
type reconcileReport struct {
	Tenant   string `json:"tenant"`
	Findings []struct {
		Kind   string `json:"kind"`
		Key    string `json:"key"`
		Reason string `json:"reason"`
	} `json:"findings"`
	Notary *struct {
		Seq    int64 `json:"seq"`
		Signed int64 `json:"signed_seq"`
		Broken bool  `json:"broken"`
	} `json:"notary"`
	ChainIntact     *bool           `json:"chain_intact"`
	LastSeq         int64           `json:"last_seq"`
	Verified        int64           `json:"verified"`
	FirstBreak      json.RawMessage `json:"first_break"`
	DeadLetterCount int             `json:"dead_letter_count"`
	DeadLetters     []string        `json:"dead_letters"`
	// A tenant with chain shards: the other chains' reports and the summary.
	Shards       []reconcileReport `json:"shards"`
	Chains       int               `json:"chains"`
	ChainsIntact *bool             `json:"chains_intact"`
	BrokenChains []string          `json:"broken_chains"`
}

// reconcile asks the local reconcile URL about tenant through the CLI.
func (s *stack) reconcile(tenant string) reconcileReport {
	s.t.Helper()
	out := s.reconcileCLI("-url", s.url, "-tenant", tenant)
	var r reconcileReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		s.t.Fatalf("reconcile output %q: %v", out, err)
	}
	return r
}

// reconcileCLI runs `fourlanes reconcile args...` and returns its standard
// output. Reconcile exits 3 when an answer reports a finding (a broken
// chain, dead letters, unsettled events, effects of unknown outcome) and 0
// when none does: the test fails on any other exit status, and on one that
// the answers do not bear out (checkReconcileExit).
func (s *stack) reconcileCLI(args ...string) string {
	s.t.Helper()
	code, out, errOut := s.cli2(append([]string{"reconcile"}, args...)...)
	checkReconcileExit(s.t, code, out, errOut)
	return out
}

// checkReconcileExit fails t unless reconcile's exit status is what its
// answers (stdout) report, and its stderr names each kind of finding.
func checkReconcileExit(t *testing.T, code int, stdout, stderr string) {
	t.Helper()
	found, err := reconcileFindings(stdout)
	if err != nil {
		t.Fatalf("fourlanes reconcile: exit %d, stdout is not its answers: %v\nstdout: %s\nstderr: %s", code, err, stdout, stderr)
	}
	want := 0
	if len(found) > 0 {
		want = exitFinding
	}
	if code != want {
		t.Fatalf("fourlanes reconcile: exit %d, want %d for the findings %v its answers report\nstdout: %s\nstderr: %s", code, want, found, stdout, stderr)
	}
	for _, f := range found {
		if !strings.Contains(stderr, f) {
			t.Errorf("fourlanes reconcile: stderr %q does not say %q, which its answers report", stderr, f)
		}
	}
}

// reconcileFindings reads reconcile's answers (one JSON document each) as
// an operator would: the kinds of finding any report in them has, in its
// own words on stderr. It reads the JSON generically, apart from the CLI's
// own reading, so that the two check each other.
func reconcileFindings(stdout string) ([]string, error) {
	kinds := map[string]bool{}
	var walk func(r map[string]any)
	walk = func(r map[string]any) {
		for _, k := range []string{"chain_intact", "chains_intact"} {
			if v, ok := r[k].(bool); ok && !v {
				kinds["a chain is broken"] = true
			}
		}
		if n, _ := r["dead_letter_count"].(float64); n > 0 {
			kinds["dead letters"] = true
		}
		subs, _ := r["subscriptions"].([]any)
		for _, s := range subs {
			m, _ := s.(map[string]any)
			if n, _ := m["unsettled"].(float64); n > 0 {
				kinds["unsettled events"] = true
			}
			if n, _ := m["effects_unknown"].(float64); n > 0 {
				kinds["effects of unknown outcome"] = true
			}
		}
		for _, k := range []string{"tenants", "shards"} {
			list, _ := r[k].([]any)
			for _, x := range list {
				if m, ok := x.(map[string]any); ok {
					walk(m)
				}
			}
		}
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			return nil, err
		}
		walk(m)
	}
	var out []string
	for k := range kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

// repairReport is the part of dlq-repair's report the tests read.
type repairReport struct {
	Fixed   int `json:"fixed"`
	Open    int `json:"open"`
	Sources map[string]struct {
		Seen  int `json:"seen"`
		Fixed int `json:"fixed"`
		Open  int `json:"open"`
		Items []struct {
			Outcome string `json:"outcome"`
			Reason  string `json:"reason"`
			Error   string `json:"error"`
		} `json:"items"`
	} `json:"sources"`
}

// repair invokes dlq-repair through the CLI (the twin's Lambda Invoke API).
func (s *stack) repair() (repairReport, string) {
	s.t.Helper()
	name, err := s.tw.FunctionName(s.fn[keys.FnDLQRepair])
	if err != nil {
		s.t.Fatal(err)
	}
	out := s.run(false, "repair", "-function", name)
	var r repairReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		s.t.Fatalf("repair output %q: %v", out, err)
	}
	return r, out
}

// journal logs what a source of the twin did, for a reader to check.
func (s *stack) journal(source string) []twin.Entry {
	es := twin.SourceEntries(s.tw.Journal(), source)
	s.t.Logf("what %s did (%d entries):\n%s", source, len(es), twin.FormatEntries(es))
	return es
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	twintest.Eventually(t, timeout, what, cond)
}
