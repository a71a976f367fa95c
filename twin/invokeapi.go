package twin

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fourlanes/fourlanes/twin/lambdart"
)

// startInvokeAPI serves the part of the Lambda API that invokes functions
// (POST /2015-03-31/functions/{name}/invocations), so that SDK clients
// and the AWS CLI with AWS_ENDPOINT_URL_LAMBDA pointed at the twin (and
// functions of the stack itself) can invoke its functions.
func (tw *Twin) startInvokeAPI() error {
	ln, err := listen("Lambda (and CloudFormation)", tw.cfg.Ports.Lambda)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /2015-03-31/functions/{name}/invocations", tw.handleInvoke)
	mux.Handle("POST /{$}", tw.cloudFormationAPI(tw.cfg.Now())) // CloudFormation's DescribeStacks (cloudformation.go)
	tw.invokeLn = ln
	tw.invokeSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go tw.invokeSrv.Serve(ln) //nolint:errcheck // ends with Close
	tw.closers = append(tw.closers, func() { tw.invokeSrv.Close() })
	return nil
}

// InvokeEndpoint is the base URL of the twin's Lambda Invoke API, for
// AWS_ENDPOINT_URL_LAMBDA.
func (tw *Twin) InvokeEndpoint() string { return "http://" + tw.invokeLn.Addr().String() }

func (tw *Twin) handleInvoke(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	f := tw.functionByRef(name)
	if f == nil {
		lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+name)
		return
	}
	if q := r.URL.Query().Get("Qualifier"); q != "" && q != "$LATEST" {
		lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+name+":"+q+" (the twin runs $LATEST only)")
		return
	}
	payload, err := io.ReadAll(io.LimitReader(r.Body, 6<<20+1))
	if err != nil || len(payload) > 6<<20 {
		lambdaError(w, http.StatusRequestEntityTooLarge, "RequestTooLargeException", "Request must be smaller than 6291456 bytes for the InvokeFunction operation")
		return
	}
	if len(payload) == 0 {
		payload = []byte("{}")
	}
	if !json.Valid(payload) {
		lambdaError(w, http.StatusBadRequest, "InvalidRequestContentException", "Could not parse request body into json")
		return
	}
	switch r.Header.Get("X-Amz-Invocation-Type") {
	case "DryRun":
		w.WriteHeader(http.StatusNoContent)
		return
	case "Event":
		tw.wg.Add(1)
		go func() {
			defer tw.wg.Done()
			_, _ = tw.invoke(tw.ctx, f, "InvokeAPI", payload, []string{"async"}, nil, 0)
		}()
		w.WriteHeader(http.StatusAccepted)
		return
	}
	res, err := tw.invoke(tw.ctx, f, "InvokeAPI", payload, nil, nil, 0)
	if err != nil {
		lambdaError(w, http.StatusServiceUnavailable, "ServiceException", "twin stopping: "+err.Error())
		return
	}
	h := w.Header()
	h.Set("X-Amz-Executed-Version", "$LATEST")
	h.Set("X-Amzn-Requestid", res.RequestID)
	h.Set("Content-Type", "application/json")
	if res.Err != nil {
		h.Set("X-Amz-Function-Error", "Unhandled")
	}
	if r.Header.Get("X-Amz-Log-Type") == "Tail" {
		h.Set("X-Amz-Log-Result", base64.StdEncoding.EncodeToString([]byte(tw.lines.tail(f.id, res.RequestID, 4096))))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(res.Payload)
}

func lambdaError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Type": "User", "message": msg})
}

// lineRing keeps the most recent function output lines, to return an
// invocation's log tail (X-Amz-Log-Type: Tail) as Lambda does.
type lineRing struct {
	mu    sync.Mutex
	lines []taggedLine
}

type taggedLine struct {
	fn   string
	line lambdart.Line
}

const lineRingSize = 4000

func (lr *lineRing) add(fn string, l lambdart.Line) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if len(lr.lines) >= lineRingSize {
		lr.lines = append(lr.lines[:0], lr.lines[lineRingSize/2:]...)
	}
	lr.lines = append(lr.lines, taggedLine{fn: fn, line: l})
}

// tail returns the last max bytes of what the function printed during the
// invocation requestID.
func (lr *lineRing) tail(fn, requestID string, max int) string {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	var b strings.Builder
	for _, t := range lr.lines {
		if t.fn == fn && t.line.RequestID == requestID {
			b.WriteString(t.line.Text)
			b.WriteByte('\n')
		}
	}
	s := b.String()
	if len(s) > max {
		s = s[len(s)-max:]
	}
	return s
}
