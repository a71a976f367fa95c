package lambdart_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/twin/lambdart"
)

// binDir holds the test functions, built for this host by TestMain.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lambdart-test-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	for _, fn := range []string{"fakefn", "initfail"} {
		out, err := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", filepath.Join(dir, fn, "bootstrap"), "./testdata/"+fn).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build testdata/%s: %v\n%s", fn, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func fakeFn(*testing.T) string { return filepath.Join(binDir, "fakefn", "bootstrap") }

type lines struct {
	mu  sync.Mutex
	all []lambdart.Line
}

func (l *lines) add(x lambdart.Line) { l.mu.Lock(); l.all = append(l.all, x); l.mu.Unlock() }
func (l *lines) find(sub string) (lambdart.Line, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.all {
		if strings.Contains(x.Text, sub) {
			return x, true
		}
	}
	return lambdart.Line{}, false
}

func newFn(t *testing.T, timeout time.Duration, conc int) (*lambdart.Function, *lines) {
	t.Helper()
	out := &lines{}
	f := lambdart.New(lambdart.Spec{
		Name: "fake", ARN: "arn:aws:lambda:us-east-1:000000000000:function:fake", Binary: fakeFn(t),
		Env: map[string]string{"FAKE_SETTING": "from-template", "PATH": "/usr/bin:/bin"}, Timeout: timeout, Concurrency: conc, Output: out.add,
	})
	t.Cleanup(f.Close)
	return f, out
}

type resp struct {
	Echo      string `json:"echo"`
	PID       int    `json:"pid"`
	RequestID string `json:"request_id"`
	ARN       string `json:"arn"`
	Env       string `json:"env"`
	Deadline  bool   `json:"deadline"`
}

func invoke(t *testing.T, f *lambdart.Function, payload string) (lambdart.Result, resp) {
	t.Helper()
	res, err := f.Invoke(context.Background(), []byte(payload))
	if err != nil {
		t.Fatalf("invoke %s: %v", payload, err)
	}
	var r resp
	if res.Err == nil {
		if err := json.Unmarshal(res.Payload, &r); err != nil {
			t.Fatalf("response %s: %v", res.Payload, err)
		}
	}
	return res, r
}

func TestInvokeReusesEnvironment(t *testing.T) {
	f, _ := newFn(t, 5*time.Second, 1)
	res1, r1 := invoke(t, f, `{"echo":"one"}`)
	if res1.Err != nil || r1.Echo != "one" {
		t.Fatalf("first invoke: got %+v %s, want echo one", res1.Err, res1.Payload)
	}
	if !res1.Cold {
		t.Errorf("first invoke: Cold = false, want true")
	}
	if r1.RequestID != res1.RequestID || r1.ARN != "arn:aws:lambda:us-east-1:000000000000:function:fake" || r1.Env != "from-template" || !r1.Deadline {
		t.Errorf("context in the function: got %+v, want request id %s, the ARN, the env and a deadline", r1, res1.RequestID)
	}
	res2, r2 := invoke(t, f, `{"echo":"two"}`)
	if res2.Cold || r2.PID != r1.PID {
		t.Errorf("second invoke: cold=%v pid %d, want the warm process %d", res2.Cold, r2.PID, r1.PID)
	}
}

func TestHandlerErrorKeepsProcess(t *testing.T) {
	f, _ := newFn(t, 5*time.Second, 1)
	_, r1 := invoke(t, f, `{"echo":"x"}`)
	res, _ := invoke(t, f, `{"error":"boom"}`)
	if res.Err == nil || res.Err.Message != "boom" || res.Err.Type != "errorString" {
		t.Fatalf("handler error: got %+v, want errorString boom", res.Err)
	}
	if !strings.Contains(string(res.Payload), `"errorMessage":"boom"`) {
		t.Errorf("error document: got %s", res.Payload)
	}
	_, r2 := invoke(t, f, `{"echo":"y"}`)
	if r2.PID != r1.PID {
		t.Errorf("after a handler error: pid %d, want the same process %d", r2.PID, r1.PID)
	}
}

func TestExitMidInvocationRestarts(t *testing.T) {
	f, _ := newFn(t, 5*time.Second, 1)
	_, r1 := invoke(t, f, `{"echo":"x"}`)
	res, _ := invoke(t, f, `{"exit":true}`)
	if res.Err == nil || res.Err.Type != lambdart.ErrTypeExit {
		t.Fatalf("exit: got %+v, want %s", res.Err, lambdart.ErrTypeExit)
	}
	res2, r2 := invoke(t, f, `{"echo":"z"}`)
	if !res2.Cold || r2.PID == r1.PID || r2.Echo != "z" {
		t.Errorf("after exit: cold=%v pid %d (old %d) echo %q, want a fresh process", res2.Cold, r2.PID, r1.PID, r2.Echo)
	}
}

func TestPanicRestarts(t *testing.T) {
	f, _ := newFn(t, 5*time.Second, 1)
	res, _ := invoke(t, f, `{"panic":"bad"}`)
	if res.Err == nil || !strings.Contains(res.Err.Message, "bad") {
		t.Fatalf("panic: got %+v, want the panic's message", res.Err)
	}
	res2, r2 := invoke(t, f, `{"echo":"after"}`)
	if res2.Err != nil || r2.Echo != "after" {
		t.Fatalf("after panic: got %+v %s", res2.Err, res2.Payload)
	}
}

func TestTimeoutKills(t *testing.T) {
	f, _ := newFn(t, 300*time.Millisecond, 1)
	res, _ := invoke(t, f, `{"sleep_ms":5000}`)
	if res.Err == nil || res.Err.Type != lambdart.ErrTypeTimeout || !strings.Contains(res.Err.Message, "Task timed out after 0.30 seconds") {
		t.Fatalf("timeout: got %+v, want Sandbox.Timedout after 0.30 seconds", res.Err)
	}
	if res.Duration > 3*time.Second {
		t.Errorf("timeout took %v, want about 300ms", res.Duration)
	}
	if n := f.Running(); n != 0 {
		t.Errorf("processes after a timeout: got %d, want 0", n)
	}
}

func TestKillMidInvocation(t *testing.T) {
	f, out := newFn(t, 10*time.Second, 1)
	invoke(t, f, `{"echo":"warm"}`)
	done := make(chan lambdart.Result, 1)
	go func() {
		res, _ := f.Invoke(context.Background(), []byte(`{"print":"working","sleep_ms":5000}`))
		done <- res
	}()
	deadline := time.Now().Add(10 * time.Second)
	var l lambdart.Line
	for {
		var ok bool
		if l, ok = out.find("working"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the function never printed 'working'")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if l.RequestID == "" {
		t.Errorf("line printed mid-invocation has no request id")
	}
	if !f.KillRequest(l.RequestID) {
		t.Fatalf("KillRequest(%s) found no process", l.RequestID)
	}
	res := <-done
	if res.Err == nil || res.Err.Type != lambdart.ErrTypeExit || !strings.Contains(res.Err.Message, "signal: killed") {
		t.Fatalf("killed invocation: got %+v, want Runtime.ExitError signal: killed", res.Err)
	}
}

func TestConcurrencyCap(t *testing.T) {
	f, _ := newFn(t, 10*time.Second, 2)
	var wg sync.WaitGroup
	pids := make(chan int, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, r := invoke(t, f, `{"sleep_ms":200}`)
			pids <- r.PID
		}()
	}
	wg.Wait()
	close(pids)
	seen := map[int]bool{}
	for p := range pids {
		seen[p] = true
	}
	if len(seen) != 2 {
		t.Errorf("processes for 4 concurrent invokes with concurrency 2: got %d, want 2", len(seen))
	}
}

func TestCloseSendsSIGTERM(t *testing.T) {
	f, out := newFn(t, 5*time.Second, 1)
	invoke(t, f, `{"echo":"x"}`)
	f.Close()
	if _, ok := out.find("sigterm: flushed"); !ok {
		t.Errorf("Close: the SIGTERM hook did not run (the function registered an extension)")
	}
	if _, err := f.Invoke(context.Background(), []byte(`{}`)); err == nil {
		t.Errorf("Invoke after Close: got nil error, want ErrClosed")
	}
}

func TestInitError(t *testing.T) {
	f := lambdart.New(lambdart.Spec{Name: "initfail", ARN: "arn:aws:lambda:us-east-1:000000000000:function:initfail", Binary: filepath.Join(binDir, "initfail", "bootstrap"), Timeout: 5 * time.Second})
	t.Cleanup(f.Close)
	res, err := f.Invoke(context.Background(), []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Err == nil || res.Err.Type != lambdart.ErrTypeInit || !strings.Contains(res.Err.Message, "missing EVENTS_TABLE") {
		t.Fatalf("init error: got %+v, want Runtime.InitError naming the cause", res.Err)
	}
}

// TestOutputBeforeOutcome: when Invoke returns, every line the process wrote
// before it answered has reached Output, attributed to its invocation, for a
// response and for an error alike. A reader that takes its time over each
// line (as a collector that parses them does) makes the lines trail the
// answer without the runtime's sync.
func TestOutputBeforeOutcome(t *testing.T) {
	out := &lines{}
	f := lambdart.New(lambdart.Spec{
		Name: "fake", ARN: "arn:aws:lambda:us-east-1:000000000000:function:fake", Binary: fakeFn(t),
		Env: map[string]string{"PATH": "/usr/bin:/bin"}, Timeout: 5 * time.Second,
		Output: func(l lambdart.Line) { time.Sleep(20 * time.Microsecond); out.add(l) },
	})
	t.Cleanup(f.Close)
	const perInvoke = 100
	for i := range 10 {
		payload := fmt.Sprintf(`{"lines":%d}`, perInvoke)
		if i%2 == 1 {
			payload = fmt.Sprintf(`{"lines":%d,"error":"boom"}`, perInvoke)
		}
		res, _ := invoke(t, f, payload)
		mine, wrong := 0, 0
		out.mu.Lock()
		for _, l := range out.all {
			if strings.HasSuffix(l.Text, " of "+res.RequestID) {
				mine++
				if l.RequestID != res.RequestID {
					wrong++
				}
			}
		}
		out.mu.Unlock()
		if mine != perInvoke || wrong != 0 {
			t.Fatalf("invocation %d (%s): %d of its %d lines had reached Output when Invoke returned, %d attributed to another request; want all, none",
				i, payload, mine, perInvoke, wrong)
		}
	}
	if l, ok := out.find("lambdart-sync"); ok {
		t.Errorf("a sync marker reached Output: %q", l.Text)
	}
}

// TestRedeploy: new code reaches the next invocation (a cold start, its
// init error and all), while the invocation in flight finishes on the code
// it started with, and its environment is not reused.
func TestRedeploy(t *testing.T) {
	f, out := newFn(t, 5*time.Second, 1)
	_, warm := invoke(t, f, `{"echo":"old"}`)
	done := make(chan resp, 1)
	go func() {
		_, r := invoke(t, f, `{"echo":"in flight","print":"started in flight","sleep_ms":300}`)
		done <- r
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, ok := out.find("started in flight"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the in-flight invocation never started")
		}
	}
	f.Redeploy(filepath.Join(binDir, "initfail", "bootstrap"))
	if got := f.Spec().Binary; !strings.HasSuffix(got, filepath.Join("initfail", "bootstrap")) {
		t.Errorf("Spec().Binary after Redeploy: %s", got)
	}
	if r := <-done; r.Echo != "in flight" || r.PID != warm.PID {
		t.Errorf("in-flight invocation: echo %q pid %d, want it finished on the old process %d", r.Echo, r.PID, warm.PID)
	}
	res, err := f.Invoke(context.Background(), []byte(`{"echo":"new"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Err == nil || res.Err.Type != lambdart.ErrTypeInit {
		t.Errorf("after Redeploy: %+v, want the new code's init error (a new process)", res.Err)
	}
}
