// Package testkit brings an application's whole stack up on the local twin
// for one Go test, from any module: its CDK app synthesized, its function
// mains built for this machine and run as the template says, on our own
// DynamoDB and ElasticMQ. The test then emits through a store bound to the
// stack, waits for its handlers and reads reconcile:
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
//
//	func TestOrderFlow(t *testing.T) {
//		s := testkit.Up(t, testkit.Options{})   // ./infra and ./functions of this module
//		store := s.Store(t, myapp.App)
//		ctx := tenancy.MustWithTenant(context.Background(), "acme")
//		e, err := store.Emit(ctx, "order.placed", payload)
//		…
//		s.WaitLine(t, "durable-consumer", e.ID)   // the handler logged the event
//		r := s.Reconcile(t, "acme")               // chain intact, nothing unsettled
//	}
//
// The servers come from FOURLANES_DYNAMODB_ENDPOINT and FOURLANES_SQS_ENDPOINT
// when set, else the test binary starts its own (twin/localaws: our
// DynamoDB in-process, ElasticMQ from the per-user cache, installed on first
// use). Synthesis runs the CDK app with `go run` (jsii needs Node.js); the
// build and synthesis are done once per test binary and application.
package testkit

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/lambdart"
	"github.com/fourlanes/fourlanes/twin/localaws"
	"github.com/fourlanes/fourlanes/twin/twintest"
)

// Main runs a package's tests and stops the servers they started.
func Main(m *testing.M) { localaws.Main(m) }

// Options says which application to bring up. Zero values take the
// defaults of the layout `fourlanes init` writes.
type Options struct {
	// Root is the folder of the application's module (default: the module
	// of the working directory, or its go.work workspace).
	Root string
	// App is the package of the application's CDK app, relative to Root
	// (default "./infra"); Functions the folder of its function mains,
	// <function>/main.go (default "functions").
	App, Functions string
	// Mutate, if set, changes a copy of the synthesized template before the
	// stack comes up (a test of what a mistaken edit would do).
	Mutate func(*cfn.Template)
	// StackPrefix starts the stack's name (default "test"); a random suffix
	// keeps stacks of parallel tests apart.
	StackPrefix string
	// PollInterval is how often idle streams and queues are polled
	// (default 25 ms: faster than AWS, so that tests are quick).
	PollInterval time.Duration
	// Schedules runs the template's schedules whose target is the named
	// function (keys.Fn*) every given period (twin.Config.Schedules), e.g.
	// {keys.FnHeartbeat: 200 * time.Millisecond}. Others do not run.
	Schedules map[string]time.Duration
}

// Stack is an application's stack running on the twin for one test; it stops
// when the test ends (and logs the functions' last lines if it failed).
type Stack struct {
	Twin     *twin.Twin
	DynamoDB *dynamodb.Client
	SQS      *sqs.Client
	// Functions maps each function's folder name (durable-consumer, …) to its
	// logical ID in the template.
	Functions map[string]string
	// ReconcileURL is the reconcile Function URL (unsigned on the twin).
	ReconcileURL string

	mu     sync.Mutex
	lines  []line
	onLine func(fn string, l lambdart.Line)
}

type line struct{ fn, text string }

// assembled is one build and synthesis, shared by a test binary's stacks of
// one application; done closes when it has finished.
type assembled struct {
	done chan struct{}
	tmpl *cfn.Template
	code twin.CodeResolver
	dir  string
	err  error
}

var (
	assembledMu sync.Mutex
	assemblies  = map[string]*assembled{}
)

func (o *Options) defaults() error {
	if o.Root == "" {
		root, err := localaws.ModuleRoot()
		if err != nil {
			return err
		}
		o.Root = root
	}
	if o.App == "" {
		o.App = "./infra"
	}
	if o.Functions == "" {
		o.Functions = "functions"
	}
	if o.StackPrefix == "" {
		o.StackPrefix = "test"
	}
	if o.PollInterval == 0 {
		o.PollInterval = 25 * time.Millisecond
	}
	return nil
}

// assembly returns the build and synthesis of o's application, starting it
// in the background if no caller has yet.
func assembly(o Options) *assembled {
	k := o.Root + "\x00" + o.App + "\x00" + o.Functions
	assembledMu.Lock()
	defer assembledMu.Unlock()
	if a := assemblies[k]; a != nil {
		return a
	}
	a := &assembled{done: make(chan struct{})}
	assemblies[k] = a
	go func() {
		defer close(a.done)
		if a.dir, a.err = os.MkdirTemp("", "fourlanes-testkit-"); a.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		a.tmpl, a.code, a.err = twin.Assemble(ctx, o.Root, o.Functions, o.App, filepath.Join(a.dir, "bin"), filepath.Join(a.dir, "cdk.out"), "")
	}()
	return a
}

// Prepare starts building the application's functions and synthesizing its
// CDK app in the background and returns at once, so that the build overlaps
// whatever runs meanwhile (a TestMain calls it for each application its
// tests bring up, then m.Run). Assemble and Up wait for it; wait does too
// and returns its error, for a TestMain that orders its builds. Without
// Prepare, the first Assemble starts the build.
func Prepare(o Options) (wait func() error) {
	if err := o.defaults(); err != nil {
		return func() error { return err }
	}
	a := assembly(o)
	return func() error { <-a.done; return a.err }
}

// Assemble builds the application's functions for this machine and
// synthesizes its CDK app, once per test binary and (Root, App, Functions),
// and returns the template and what runs each function. Up calls it; a test
// that needs the template first (to read it) may too. Tests running in
// parallel share the one build (the first starts it, the others wait).
func Assemble(t *testing.T, o Options) (*cfn.Template, twin.CodeResolver) {
	t.Helper()
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	a := assembly(o)
	select {
	case <-a.done:
	case <-t.Context().Done():
		t.Fatalf("build and synthesize %s: the test ended first", o.App)
	}
	if a.err != nil {
		t.Fatalf("build and synthesize %s (functions in %s): %v", o.App, o.Functions, a.err)
	}
	return a.tmpl, a.code
}

// Up brings the application's stack up on a fresh twin for the test.
func Up(t *testing.T, o Options) *Stack {
	t.Helper()
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	ddbEP, sqsEP := twintest.Endpoints(t) // skip before building when there are no servers
	tmpl, code := Assemble(t, o)
	tmpl = tmpl.Clone()
	if o.Mutate != nil {
		o.Mutate(tmpl)
	}
	s := &Stack{DynamoDB: localaws.NewDynamoDB(ddbEP), SQS: localaws.NewSQS(sqsEP), Functions: map[string]string{}}
	tw, err := twin.Up(t.Context(), twin.Config{
		Template:         tmpl,
		StackName:        fmt.Sprintf("%s%06x", o.StackPrefix, rand.Uint32()>>8),
		DynamoDBEndpoint: ddbEP, SQSEndpoint: sqsEP,
		Code:           code,
		Logger:         twintest.Logger(t),
		PollInterval:   o.PollInterval,
		RetryDelay:     func(int) time.Duration { return 20 * time.Millisecond },
		OnFunctionLine: s.line,
		Schedules:      o.Schedules,
	})
	if err != nil {
		t.Fatalf("twin up: %v", err)
	}
	s.Twin = tw
	t.Cleanup(func() {
		tw.Close()
		if t.Failed() {
			s.mu.Lock()
			ls := s.lines[max(0, len(s.lines)-300):]
			s.mu.Unlock()
			var b strings.Builder
			for _, l := range ls {
				b.WriteString(l.fn + ": " + l.text + "\n")
			}
			t.Logf("the functions' last %d lines:\n%s", len(ls), b.String())
		}
	})
	for _, name := range keys.Functions {
		if id, err := tw.FunctionByCode(name); err == nil {
			s.Functions[name] = id
		}
	}
	if id := s.Functions[keys.FnReconcile]; id != "" {
		s.ReconcileURL = tw.URLs()[id]
	}
	return s
}

func (s *Stack) line(id string, l lambdart.Line) {
	s.mu.Lock()
	s.lines = append(s.lines, line{id, l.Text})
	f := s.onLine
	s.mu.Unlock()
	if f != nil {
		f(id, l)
	}
}

// OnLine sets what to do on each line a function prints (fn is its logical
// ID); it must not block.
func (s *Stack) OnLine(f func(fn string, l lambdart.Line)) {
	s.mu.Lock()
	s.onLine = f
	s.mu.Unlock()
}

// Env returns the environment the template gives the function fn (a folder
// name such as "durable-consumer"): the stack's tables and queues by their
// variables (keys.EnvEventsTable, …, and the application's own).
func (s *Stack) Env(t *testing.T, fn string) map[string]string {
	t.Helper()
	env, err := s.Twin.FunctionEnv(s.id(t, fn))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func (s *Stack) id(t *testing.T, fn string) string {
	t.Helper()
	id := s.Functions[fn]
	if id == "" {
		t.Fatalf("the stack has no function %s (it has %v)", fn, s.Functions)
	}
	return id
}

// Store returns an event store on the stack's events table with a's
// catalog and chain shards, as the application's services would open it.
func (s *Stack) Store(t *testing.T, a app.Application) *eventstore.Store {
	t.Helper()
	store, err := a.EventStore(s.DynamoDB, s.Env(t, keys.FnDLQRepair)[keys.EnvEventsTable])
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// Lines returns the lines function fn (a folder name) printed that contain
// sub.
func (s *Stack) Lines(t *testing.T, fn, sub string) []string {
	t.Helper()
	id := s.id(t, fn)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range s.lines {
		if l.fn == id && strings.Contains(l.text, sub) {
			out = append(out, l.text)
		}
	}
	return out
}

// WaitLine waits (up to a minute) until function fn has printed a line
// containing sub, and returns the lines that do.
func (s *Stack) WaitLine(t *testing.T, fn, sub string) []string {
	t.Helper()
	var ls []string
	Eventually(t, time.Minute, fmt.Sprintf("a line of %s containing %q", fn, sub), func() (bool, string) {
		ls = s.Lines(t, fn, sub)
		return len(ls) > 0, fmt.Sprintf("%d such lines", len(ls))
	})
	return ls
}

// Eventually polls cond until it holds or timeout passes (then the test
// fails with what and cond's last word).
func Eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	twintest.Eventually(t, timeout, what, cond)
}

// Reconcile asks the stack's reconcile Function URL about tenant and
// returns its answer, decoded (the fields of pkg/reconcile's TenantResult).
func (s *Stack) Reconcile(t *testing.T, tenant string) map[string]any {
	t.Helper()
	if s.ReconcileURL == "" {
		t.Fatal("the stack has no reconcile Function URL")
	}
	res, err := http.Get(s.ReconcileURL + "?tenant=" + url.QueryEscape(tenant))
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("reconcile %s: %s, %v", tenant, res.Status, err)
	}
	return out
}

// Repair invokes dlq-repair once, as its schedule does, and returns its
// report, decoded.
func (s *Stack) Repair(t *testing.T) map[string]any {
	t.Helper()
	name, err := s.Twin.FunctionName(s.id(t, keys.FnDLQRepair))
	if err != nil {
		t.Fatal(err)
	}
	c := lambda.NewFromConfig(localaws.Config(), func(o *lambda.Options) { o.BaseEndpoint = aws.String(s.Twin.InvokeEndpoint()) })
	out, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String(name), Payload: []byte("{}")})
	if err != nil {
		t.Fatalf("invoke dlq-repair: %v", err)
	}
	if out.FunctionError != nil {
		t.Fatalf("dlq-repair failed: %s: %s", aws.ToString(out.FunctionError), out.Payload)
	}
	var rep map[string]any
	if err := json.Unmarshal(out.Payload, &rep); err != nil {
		t.Fatalf("dlq-repair's report %s: %v", out.Payload, err)
	}
	return rep
}
