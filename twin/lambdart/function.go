package lambdart

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Defaults that Lambda applies when a function does not say.
const (
	// DefaultTimeout is Lambda's default function timeout.
	DefaultTimeout = 3 * time.Second
	// InitTimeout bounds the init phase: start-up until the first /next.
	InitTimeout = 10 * time.Second
	// MaxResponseBytes is Lambda's limit on a synchronous response.
	MaxResponseBytes = 6 << 20
	// shutdownGrace is how long a process that registered an extension gets
	// between SIGTERM and SIGKILL when the twin stops.
	shutdownGrace = 500 * time.Millisecond
	// syncTimeout bounds how long an outcome waits for the invocation's
	// output to be read (syncOutput): long enough for any reader that keeps
	// up, short enough that a stuck one delays an outcome, never loses it.
	syncTimeout = 2 * time.Second
)

// Error types the runtime reports for failures that are not the handler's.
const (
	ErrTypeExit     = "Runtime.ExitError"
	ErrTypeTimeout  = "Sandbox.Timedout"
	ErrTypeInit     = "Runtime.InitError"
	ErrTypeTooLarge = "Function.ResponseSizeTooLarge"
)

// ErrClosed is returned by Invoke once the function is closed.
var ErrClosed = errors.New("function closed")

// Spec describes one function to run.
type Spec struct {
	// Name and ARN are what the Runtime API reports (Invoked-Function-Arn).
	Name, ARN string
	// Binary is the bootstrap to run, built for this host.
	Binary string
	// Env is the process environment, complete but for AWS_LAMBDA_RUNTIME_API
	// and AWS_LAMBDA_LOG_STREAM_NAME, which each environment adds.
	Env map[string]string
	// Timeout of one invocation; zero means DefaultTimeout.
	Timeout time.Duration
	// Concurrency is the most execution environments (processes) that run
	// at once; zero means 1. Invoke waits for a free one.
	Concurrency int
	// Output receives each line a process writes, if set. It must not block.
	// Every line a process wrote before it answered an invocation has been
	// passed to Output when Invoke returns that invocation's result.
	Output func(Line)
	// TraceSampled marks every invocation's X-Ray trace header sampled, so
	// an instrumented function sends its subsegments to AWS_XRAY_DAEMON_ADDRESS.
	TraceSampled bool
}

// Line is one line of a function process's output.
type Line struct {
	Function string
	// Env numbers the execution environment (process) within the function.
	Env int
	// RequestID is the invocation in progress when the line was read, if any.
	RequestID string
	Text      string
}

// Result is the outcome of one invocation.
type Result struct {
	RequestID string
	// TraceHeader is the Lambda-Runtime-Trace-Id the process was given.
	TraceHeader string
	// Payload is the response on success, or the error document on error.
	Payload []byte
	// Err is nil on success.
	Err *InvokeError
	// Env is the environment that ran the invocation; Cold is true when it
	// was started for it.
	Env      int
	Cold     bool
	Duration time.Duration
}

// InvokeError is a failed invocation, as Lambda reports it.
type InvokeError struct {
	Type    string
	Message string
}

func (e *InvokeError) Error() string { return e.Type + ": " + e.Message }

// Function runs a function's bootstrap processes and invokes them through a
// local Lambda Runtime API, one listener per execution environment.
type Function struct {
	spec Spec
	sem  chan struct{}

	mu      sync.Mutex
	idle    []*env
	all     map[int]*env
	nextEnv int
	closed  bool
	done    chan struct{}
}

// New returns a function with no process running: the first Invoke starts
// one (a cold start), as Lambda does.
func New(spec Spec) *Function {
	if spec.Timeout <= 0 {
		spec.Timeout = DefaultTimeout
	}
	if spec.Concurrency <= 0 {
		spec.Concurrency = 1
	}
	return &Function{spec: spec, sem: make(chan struct{}, spec.Concurrency), all: map[int]*env{}, done: make(chan struct{})}
}

// Name returns the function's name.
func (f *Function) Name() string { return f.spec.Name }

// Spec returns the function's spec.
func (f *Function) Spec() Spec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.spec
}

// Redeploy replaces the function's code with binary, as Lambda's
// UpdateFunctionCode does: idle environments are stopped, invocations in
// flight finish on the code they started with, and every invocation from
// now on runs in an environment started with binary (a cold start).
func (f *Function) Redeploy(binary string) {
	f.mu.Lock()
	f.spec.Binary = binary
	idle := f.idle
	f.idle = nil
	f.mu.Unlock()
	for _, e := range idle {
		f.discard(e)
	}
}

// binary is the code a new environment starts.
func (f *Function) binary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.spec.Binary
}

// Invoke runs one invocation and returns its result. The error is non-nil
// only when the result is unknown: ctx ended first (the process running
// the invocation is then killed, so it cannot act later), or the function is
// closed.
func (f *Function) Invoke(ctx context.Context, payload []byte) (res Result, err error) {
	select {
	case f.sem <- struct{}{}:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	case <-f.done:
		return Result{}, ErrClosed
	}
	defer func() { <-f.sem }()

	res = Result{RequestID: uuid.NewString(), TraceHeader: traceID(f.spec.TraceSampled)}
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()

	inv := &invocation{id: res.RequestID, trace: res.TraceHeader, payload: payload, done: make(chan outcome, 1)}
	var e *env
	for e == nil {
		var cold bool
		var err error
		e, cold, err = f.acquire(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			if errors.Is(err, ErrClosed) {
				return res, err
			}
			res.Err = &InvokeError{Type: ErrTypeInit, Message: err.Error()}
			res.Payload = errorDoc(res.Err)
			return res, nil
		}
		res.Env, res.Cold = e.id, cold
		inv.deadline = time.Now().Add(f.spec.Timeout)
		select {
		case e.next <- inv:
		case <-e.exited:
			// The process ended after its last invocation (a panic exits
			// after reporting it) and never took this one: start afresh.
			f.discard(e)
			e = nil
		case <-ctx.Done():
			f.release(e)
			return res, ctx.Err()
		}
	}
	timer := time.NewTimer(time.Until(inv.deadline))
	defer timer.Stop()

	select {
	case o := <-inv.done:
		res.Payload, res.Err = o.payload, o.err
		f.release(e)
	case <-e.exited:
		// A response may have landed just before the exit.
		select {
		case o := <-inv.done:
			res.Payload, res.Err = o.payload, o.err
		default:
			res.Err = e.exitError(res.RequestID)
			res.Payload = errorDoc(res.Err)
		}
		f.discard(e)
	case <-timer.C:
		e.kill()
		res.Err = &InvokeError{Type: ErrTypeTimeout, Message: fmt.Sprintf("%s Task timed out after %.2f seconds", time.Now().UTC().Format(time.RFC3339), f.spec.Timeout.Seconds())}
		res.Payload = errorDoc(res.Err)
		f.discard(e)
	case <-ctx.Done():
		e.kill()
		f.discard(e)
		return res, ctx.Err()
	}
	return res, nil
}

// acquire returns an idle environment, or starts one.
func (f *Function) acquire(ctx context.Context) (*env, bool, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, false, ErrClosed
	}
	for len(f.idle) > 0 {
		e := f.idle[len(f.idle)-1]
		f.idle = f.idle[:len(f.idle)-1]
		select {
		case <-e.exited:
			delete(f.all, e.id)
			continue // died while idle: Lambda would start a fresh one
		default:
		}
		f.mu.Unlock()
		return e, false, nil
	}
	f.nextEnv++
	id := f.nextEnv
	f.mu.Unlock()

	e, err := startEnv(f, id)
	if err != nil {
		return nil, true, err
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		e.stop(0)
		return nil, true, ErrClosed
	}
	f.all[id] = e
	f.mu.Unlock()
	if err := e.awaitInit(ctx); err != nil {
		e.kill()
		f.discard(e)
		return nil, true, err
	}
	return e, true, nil
}

func (f *Function) release(e *env) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	if e.bin != f.spec.Binary { // redeployed while it ran: retire it
		f.mu.Unlock()
		f.discard(e)
		return
	}
	f.idle = append(f.idle, e)
	f.mu.Unlock()
}

func (f *Function) discard(e *env) {
	e.stop(0)
	f.mu.Lock()
	delete(f.all, e.id)
	f.mu.Unlock()
}

// Kill sends SIGKILL to every running process of the function, the way an
// out-of-memory kill or a host failure ends one; in-flight invocations fail
// with Runtime.ExitError. It returns how many processes it killed.
func (f *Function) Kill() int {
	f.mu.Lock()
	envs := make([]*env, 0, len(f.all))
	for _, e := range f.all {
		envs = append(envs, e)
	}
	f.mu.Unlock()
	n := 0
	for _, e := range envs {
		if e.kill() {
			n++
		}
	}
	return n
}

// KillRequest kills the process running the invocation requestID, if one
// is; it reports whether it did.
func (f *Function) KillRequest(requestID string) bool {
	f.mu.Lock()
	var target *env
	for _, e := range f.all {
		if e.current() == requestID {
			target = e
		}
	}
	f.mu.Unlock()
	return target != nil && target.kill()
}

// Running returns how many processes are alive.
func (f *Function) Running() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, e := range f.all {
		select {
		case <-e.exited:
		default:
			n++
		}
	}
	return n
}

// Close stops every process: those that registered an extension get
// SIGTERM and a short grace period (as in Lambda's shutdown phase), then
// SIGKILL. Invocations after Close fail with ErrClosed.
func (f *Function) Close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	close(f.done)
	envs := make([]*env, 0, len(f.all))
	for _, e := range f.all {
		envs = append(envs, e)
	}
	f.all, f.idle = map[int]*env{}, nil
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range envs {
		wg.Add(1)
		go func() { defer wg.Done(); e.stop(shutdownGrace) }()
	}
	wg.Wait()
}
