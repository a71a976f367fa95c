package ddb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fourlanes/fourlanes/pkg/obs"
)

// Operation is one API action: it decodes its own input from body and returns the
// output to encode as JSON (or an *Error).
type Operation func(ctx context.Context, db *DB, body []byte) (any, error)

var (
	opsMu sync.RWMutex
	ops   = map[string]Operation{}
)

// register adds an operation under its full X-Amz-Target ("DynamoDB_20120810.PutItem").
// Each operation file registers its own in init.
func register(target string, op Operation) {
	opsMu.Lock()
	defer opsMu.Unlock()
	if _, dup := ops[target]; dup {
		panic("ddb: operation registered twice: " + target)
	}
	ops[target] = op
}

const (
	targetDynamoDB = "DynamoDB_20120810."
	targetStreams  = "DynamoDBStreams_20120810."
	errTypePrefix  = "com.amazonaws.dynamodb.v20120810#"
	maxRequestBody = 16 << 20
)

var requestSeq atomic.Uint64

// Handler returns the http.Handler that serves db on the DynamoDB and DynamoDB Streams
// JSON 1.0 protocols. Any SigV4 signature (or none) is accepted. Every response carries
// x-amz-crc32 (the CRC32 of its body) and x-amzn-RequestId, as AWS's do.
func (db *DB) Handler() http.Handler {
	return http.HandlerFunc(db.serveHTTP)
}

func (db *DB) serveHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := "fourlanes-" + strconv.FormatUint(requestSeq.Add(1), 10)
	if r.Method == http.MethodGet && (r.URL.Path == "/" || r.URL.Path == "") {
		// AWS answers a plain GET with a health line; tools probe with it.
		writeRaw(w, reqID, http.StatusOK, []byte(`{"healthy":true}`))
		return
	}
	if strings.HasPrefix(r.URL.Path, adminPrefix) {
		if r.URL.Path == adminPrefix+"clock" {
			db.serveClock(w, r)
			return
		}
		db.serveAdmin(w, r)
		return
	}
	target := r.Header.Get("X-Amz-Target")
	opsMu.RLock()
	op := ops[target]
	opsMu.RUnlock()
	if op == nil {
		if r.Method != http.MethodPost {
			writeError(w, reqID, newError(http.StatusBadRequest, CodeSerialization, "only POST is served"))
			return
		}
		writeError(w, reqID, newError(http.StatusBadRequest, CodeUnknownOperation, "unknown operation %q", target))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil {
		writeError(w, reqID, newError(http.StatusBadRequest, CodeSerialization, "reading the request body: %v", err))
		return
	}
	if len(body) > maxRequestBody {
		// AWS refuses a request over its 16 MB limit with HTTP 413 (Request Entity
		// Too Large), before it reads the operation; the error type it names is not
		// documented, so the SDKs' generic handling of the status is what matters.
		e := validationf("Request size exceeds %d bytes", maxRequestBody)
		e.Status = http.StatusRequestEntityTooLarge
		writeError(w, reqID, e)
		return
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	action := target[strings.IndexByte(target, '.')+1:]
	ctx := withRequest(r.Context(), &requestInfo{action: action, id: reqID, body: body})
	out, err := op(ctx, db, body)
	ri := requestFrom(ctx)
	if ri.dropResponse {
		// Fault injection: the operation ran (and committed) but the caller never
		// hears: the connection closes with no response, an ambiguous outcome.
		dropConnection(w)
		return
	}
	if ri.delay > 0 {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(ri.delay):
		}
	}
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			db.log.Error("ddb: operation failed", obs.KeyAction, action, obs.Err(err))
			e = newError(http.StatusInternalServerError, CodeInternalServerError, "Internal server error: %v", err)
		}
		writeError(w, reqID, e)
		return
	}
	b, err := json.Marshal(out)
	if err != nil {
		db.log.Error("ddb: encoding a response", obs.KeyAction, action, obs.Err(err))
		writeError(w, reqID, newError(http.StatusInternalServerError, CodeInternalServerError, "encoding the response: %v", err))
		return
	}
	writeRaw(w, reqID, http.StatusOK, b)
}

func writeRaw(w http.ResponseWriter, reqID string, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("x-amzn-RequestId", reqID)
	h.Set("x-amz-crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeError(w http.ResponseWriter, reqID string, e *Error) {
	payload := map[string]any{"__type": errTypePrefix + e.Code, "message": e.Message}
	if e.Item != nil {
		payload["Item"] = e.Item
	}
	if e.Reasons != nil {
		payload["CancellationReasons"] = e.Reasons
	}
	b, _ := json.Marshal(payload)
	status := e.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	writeRaw(w, reqID, status, b)
}

func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler) // net/http closes the connection without a response
}

// requestInfo is what one request carries through its operation: the action, and
// what an injected fault asks the server to do with the response.
type requestInfo struct {
	action       string
	id           string
	body         []byte // the request's JSON, for faults that match on it
	dropResponse bool
	delay        time.Duration
}

type ctxKey struct{}

func withRequest(ctx context.Context, ri *requestInfo) context.Context {
	return context.WithValue(ctx, ctxKey{}, ri)
}

func requestFrom(ctx context.Context) *requestInfo {
	if ri, ok := ctx.Value(ctxKey{}).(*requestInfo); ok {
		return ri
	}
	return &requestInfo{}
}

// decode unmarshals an operation's input, turning JSON errors into the
// SerializationException / ValidationException AWS sends.
func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return e
		}
		return newError(http.StatusBadRequest, CodeSerialization, "%v", err)
	}
	return nil
}
