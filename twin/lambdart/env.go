package lambdart

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// Runtime API and Extensions API headers (docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html).
const (
	hdrRequestID   = "Lambda-Runtime-Aws-Request-Id"
	hdrDeadline    = "Lambda-Runtime-Deadline-Ms"
	hdrFunctionARN = "Lambda-Runtime-Invoked-Function-Arn"
	hdrTraceID     = "Lambda-Runtime-Trace-Id"
	hdrErrorType   = "Lambda-Runtime-Function-Error-Type"
	hdrErrorBody   = "Lambda-Runtime-Function-Error-Body"
	hdrExtName     = "Lambda-Extension-Name"
	hdrExtID       = "Lambda-Extension-Identifier"
)

type invocation struct {
	id       string
	trace    string // the X-Ray trace header handed to the process
	payload  []byte
	deadline time.Time
	done     chan outcome // buffered: one outcome
}

// syncWaiter is a syncOutput call waiting for its marker n to be read.
type syncWaiter struct {
	n    uint64
	done chan struct{}
}

type outcome struct {
	payload []byte
	err     *InvokeError
}

// env is one execution environment: a bootstrap process and the Runtime API
// listener it talks to.
type env struct {
	f   *Function
	id  int
	bin string // the code it runs (Function.Redeploy replaces the function's)
	ln  net.Listener
	srv *http.Server
	cmd *exec.Cmd

	next      chan *invocation
	ready     chan struct{} // closed at the first /next
	readyOnce sync.Once
	initErr   chan *InvokeError // from /runtime/init/error
	exited    chan struct{}     // closed when the process has exited
	exitErr   error
	shutdown  chan struct{} // closed when the twin stops the environment
	stopOnce  sync.Once

	// The output pipe's write end, kept for syncOutput's markers until the
	// process exits; syncMark starts a marker line (a NUL, which no log line
	// of a function holds, and a nonce of the environment).
	syncMu    sync.Mutex
	out       *os.File
	syncMark  string
	syncSeq   uint64
	syncWait  []syncWaiter
	syncEnded bool // the reader stopped reading lines

	mu            sync.Mutex
	cur           *invocation
	extended      bool // an extension registered: SIGTERM before SIGKILL
	shutdownEvent bool // it subscribed to SHUTDOWN
}

func startEnv(f *Function, id int) (*env, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("runtime API listener: %w", err)
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	e := &env{
		f: f, id: id, ln: ln, syncMark: "\x00lambdart-sync-" + hex.EncodeToString(nonce[:]) + ":",
		next: make(chan *invocation), ready: make(chan struct{}), initErr: make(chan *InvokeError, 1),
		exited: make(chan struct{}), shutdown: make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", e.handleNext)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", e.handleResponse)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", e.handleError)
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", e.handleInitError)
	mux.HandleFunc("POST /2020-01-01/extension/register", e.handleExtRegister)
	mux.HandleFunc("GET /2020-01-01/extension/event/next", e.handleExtNext)
	e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go e.srv.Serve(ln) //nolint:errcheck // ends with Close

	bin := f.binary()
	e.bin = bin
	cmd := exec.Command(bin)
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = e.environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// One pipe for stdout and stderr: one stream, in order, like a Lambda
	// log stream. The twin keeps a copy of its write end for syncOutput.
	stdout, w, err := os.Pipe()
	if err != nil {
		e.srv.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = w, w
	e.cmd, e.out = cmd, w

	started := make(chan error, 1)
	go func() {
		// Linux sends Pdeathsig when the thread that forked the child ends:
		// keep this goroutine on its own thread while the child lives.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		read := make(chan struct{})
		go func() { defer close(read); e.readLines(stdout) }()
		e.exitErr = cmd.Wait()
		e.closeOutput() // the reader now ends at the end of what the process wrote
		<-read
		stdout.Close()
		close(e.exited)
	}()
	if err := <-started; err != nil {
		stdout.Close()
		w.Close()
		e.srv.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	return e, nil
}

func (e *env) environ() []string {
	m := make(map[string]string, len(e.f.spec.Env)+2)
	for k, v := range e.f.spec.Env {
		m[k] = v
	}
	m["AWS_LAMBDA_RUNTIME_API"] = e.ln.Addr().String()
	var b [16]byte
	_, _ = rand.Read(b[:])
	m["AWS_LAMBDA_LOG_STREAM_NAME"] = time.Now().UTC().Format("2006/01/02") + "/[$LATEST]" + hex.EncodeToString(b[:])
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func (e *env) readLines(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		text := sc.Text()
		if i := strings.Index(text, e.syncMark); i >= 0 {
			n, _ := strconv.ParseUint(text[i+len(e.syncMark):], 10, 64)
			e.synced(n)
			// A partial line the process left unfinished before the mark.
			if text = text[:i]; text == "" {
				continue
			}
		}
		if e.f.spec.Output != nil {
			e.f.spec.Output(Line{Function: e.f.spec.Name, Env: e.id, RequestID: e.current(), Text: text})
		}
	}
	e.syncMu.Lock()
	e.syncEnded = true // nothing more will be read: syncOutput returns at once
	e.syncMu.Unlock()
	e.synced(math.MaxUint64)
	_, _ = io.Copy(io.Discard, r) // a line over the limit: drain, so the process never blocks
}

// syncOutput returns once every line the process wrote before the call has
// been passed to Spec.Output (or after syncTimeout, or when the output
// ends). The Runtime API calls it before it hands an invocation's outcome
// back, so whoever invoked the function finds the invocation's lines there
// as soon as Invoke returns: the lines travel on a pipe read by a goroutine
// of their own, and without this can trail the response.
//
// It writes a marker line into the pipe through the twin's own copy of its
// write end: a pipe keeps the order of writes, and the process wrote its
// lines before it sent the response, so the marker reaches the reader after
// all of them. The reader drops the marker.
func (e *env) syncOutput() {
	e.syncMu.Lock()
	if e.out == nil || e.syncEnded {
		e.syncMu.Unlock()
		return
	}
	e.syncSeq++
	n, done := e.syncSeq, make(chan struct{})
	e.syncWait = append(e.syncWait, syncWaiter{n, done})
	w := e.out
	e.syncMu.Unlock()
	// The write end is in blocking mode (the child shares it), and a pipe
	// that the reader stopped draining would hold the write: never wait on
	// it here for more than syncTimeout.
	go func() { _, _ = fmt.Fprintf(w, "%s%d\n", e.syncMark, n) }()
	t := time.NewTimer(syncTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// synced releases the syncOutput calls whose marker n or an earlier one
// has been read.
func (e *env) synced(n uint64) {
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	keep := e.syncWait[:0]
	for _, sw := range e.syncWait {
		if sw.n <= n {
			close(sw.done)
			continue
		}
		keep = append(keep, sw)
	}
	e.syncWait = keep
}

// closeOutput closes the twin's copy of the write end once the process has
// exited, so that the reader sees the end of the output.
func (e *env) closeOutput() {
	e.syncMu.Lock()
	defer e.syncMu.Unlock()
	if e.out != nil {
		e.out.Close()
		e.out = nil
	}
}

func (e *env) current() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur == nil {
		return ""
	}
	return e.cur.id
}

// awaitInit waits for the process to ask for its first invocation.
func (e *env) awaitInit(ctx context.Context) error {
	t := time.NewTimer(InitTimeout)
	defer t.Stop()
	select {
	case <-e.ready:
		return nil
	case ie := <-e.initErr:
		return fmt.Errorf("init error: %s", ie.Error())
	case <-e.exited:
		select {
		case ie := <-e.initErr: // reported, then exited: the report is the reason
			return fmt.Errorf("init error: %s", ie.Error())
		default:
		}
		return fmt.Errorf("runtime exited during init: %v", e.exitErr)
	case <-t.C:
		return fmt.Errorf("init did not finish within %v", InitTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *env) exitError(requestID string) *InvokeError {
	msg := "Runtime exited without providing a reason"
	if e.exitErr != nil {
		msg = "Runtime exited with error: " + e.exitErr.Error()
	}
	return &InvokeError{Type: ErrTypeExit, Message: "RequestId: " + requestID + " Error: " + msg}
}

// kill sends SIGKILL to the process group; it reports whether the process
// was still running.
func (e *env) kill() bool {
	select {
	case <-e.exited:
		return false
	default:
	}
	_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
	return true
}

// stop ends the environment: SIGTERM first when an extension registered
// and grace > 0, then SIGKILL; it waits for the exit and closes the listener.
func (e *env) stop(grace time.Duration) {
	e.stopOnce.Do(func() {
		close(e.shutdown)
		e.mu.Lock()
		term := e.extended && grace > 0
		e.mu.Unlock()
		if term {
			_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-e.exited:
			case <-time.After(grace):
			}
		}
		e.kill()
		<-e.exited
		e.srv.Close()
	})
}

func (e *env) handleNext(w http.ResponseWriter, r *http.Request) {
	e.readyOnce.Do(func() { close(e.ready) })
	select {
	case inv := <-e.next:
		e.mu.Lock()
		e.cur = inv
		e.mu.Unlock()
		h := w.Header()
		h.Set(hdrRequestID, inv.id)
		h.Set(hdrDeadline, strconv.FormatInt(inv.deadline.UnixMilli(), 10))
		h.Set(hdrFunctionARN, e.f.spec.ARN)
		h.Set(hdrTraceID, inv.trace)
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(inv.payload)
	case <-r.Context().Done():
		// The process is gone, or the twin is stopping it: during shutdown
		// Lambda hands out nothing and leaves /next hanging, as here.
	}
}

// take returns the in-flight invocation if id names it, and clears it.
func (e *env) take(w http.ResponseWriter, id string) *invocation {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur == nil || e.cur.id != id {
		writeJSON(w, http.StatusBadRequest, map[string]string{"errorMessage": "Invalid request ID " + id, "errorType": "InvalidRequestID"})
		return nil
	}
	inv := e.cur
	e.cur = nil
	return inv
}

func (e *env) handleResponse(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxResponseBytes+1))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e.syncOutput() // the invocation's lines reach Output before its outcome
	inv := e.take(w, r.PathValue("id"))
	if inv == nil {
		return
	}
	var o outcome
	switch {
	case len(body) > MaxResponseBytes:
		o.err = &InvokeError{Type: ErrTypeTooLarge, Message: fmt.Sprintf("Response payload size exceeded maximum allowed payload size (%d bytes).", MaxResponseBytes)}
		o.payload = errorDoc(o.err)
	case r.Trailer.Get(hdrErrorType) != "":
		// A streamed response that failed midway reports the error in trailers.
		o.err = &InvokeError{Type: r.Trailer.Get(hdrErrorType), Message: decodeTrailerBody(r.Trailer.Get(hdrErrorBody))}
		o.payload = errorDoc(o.err)
	default:
		o.payload = body
	}
	inv.done <- o
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "OK"})
}

func (e *env) handleError(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, MaxResponseBytes))
	e.syncOutput()
	inv := e.take(w, r.PathValue("id"))
	if inv == nil {
		return
	}
	ie := parseErrorDoc(body, r.Header.Get(hdrErrorType))
	inv.done <- outcome{payload: errorDocOr(body, ie), err: ie}
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "OK"})
}

func (e *env) handleInitError(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	ie := parseErrorDoc(body, r.Header.Get(hdrErrorType))
	select {
	case e.initErr <- ie:
	default:
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "OK"})
}

func (e *env) handleExtRegister(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Events []string `json:"events"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	e.mu.Lock()
	e.extended = true
	e.shutdownEvent = slices.Contains(req.Events, "SHUTDOWN")
	e.mu.Unlock()
	w.Header().Set(hdrExtID, uuid.NewString())
	writeJSON(w, http.StatusOK, map[string]string{"functionName": e.f.spec.Name, "functionVersion": "$LATEST", "handler": "bootstrap"})
}

func (e *env) handleExtNext(w http.ResponseWriter, r *http.Request) {
	// No lifecycle event is delivered but SHUTDOWN, and only to an extension
	// that subscribed to it (aws-lambda-go's SIGTERM extension subscribes to
	// nothing: its call hangs until the process ends).
	e.mu.Lock()
	wantShutdown := e.shutdownEvent
	e.mu.Unlock()
	shutdown := e.shutdown
	if !wantShutdown {
		shutdown = nil
	}
	select {
	case <-shutdown:
		writeJSON(w, http.StatusOK, map[string]any{
			"eventType": "SHUTDOWN", "shutdownReason": "spindown",
			"deadlineMs": time.Now().Add(shutdownGrace).UnixMilli(),
		})
	case <-r.Context().Done():
	}
}

func parseErrorDoc(body []byte, headerType string) *InvokeError {
	var doc struct {
		Type    string `json:"errorType"`
		Message string `json:"errorMessage"`
	}
	_ = json.Unmarshal(body, &doc)
	ie := &InvokeError{Type: doc.Type, Message: doc.Message}
	if ie.Type == "" {
		ie.Type = headerType
	}
	if ie.Type == "" {
		ie.Type = "Unhandled"
	}
	if ie.Message == "" && len(body) > 0 && doc.Type == "" {
		ie.Message = string(bytes.TrimSpace(body))
	}
	return ie
}

func decodeTrailerBody(b64 string) string {
	var doc struct {
		Message string `json:"errorMessage"`
	}
	raw, err := decodeBase64(b64)
	if err == nil && json.Unmarshal(raw, &doc) == nil && doc.Message != "" {
		return doc.Message
	}
	return b64
}

// errorDoc is the error document Lambda returns for a failed invocation.
func errorDoc(ie *InvokeError) []byte {
	b, _ := json.Marshal(map[string]string{"errorMessage": ie.Message, "errorType": ie.Type})
	return b
}

func errorDocOr(body []byte, ie *InvokeError) []byte {
	if json.Valid(body) && len(bytes.TrimSpace(body)) > 0 {
		return body
	}
	return errorDoc(ie)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// traceID is an X-Ray trace header for one invocation. Unsampled (the
// twin's default), nothing is sent to a daemon, and tracing code that needs a
// segment still finds one.
func traceID(sampled bool) string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	s := 0
	if sampled {
		s = 1
	}
	return fmt.Sprintf("Root=1-%08x-%s;Parent=%s;Sampled=%d", time.Now().Unix(), h[:24], h[24:40], s)
}

var errBadBase64 = errors.New("bad base64")

func decodeBase64(s string) ([]byte, error) {
	for _, enc := range []func(string) ([]byte, error){b64Std, b64Raw} {
		if b, err := enc(strings.TrimSpace(s)); err == nil {
			return b, nil
		}
	}
	return nil, errBadBase64
}

func b64Std(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }
func b64Raw(s string) ([]byte, error) { return base64.RawStdEncoding.DecodeString(s) }
