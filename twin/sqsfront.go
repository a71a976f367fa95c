package twin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fourlanes/fourlanes/pkg/obs"
)

// sqsFront is the SQS endpoint the twin hands to its functions
// (AWS_ENDPOINT_URL_SQS) and to tests (Twin.SQSEndpoint): a loopback proxy
// in front of ElasticMQ. It passes every request through, except that for a
// FIFO queue with DeduplicationScope=messageGroup it sends ElasticMQ
// group-scoped deduplication ids (queue.wireDedup) and gives receivers the
// sender's ids back (queue.plainDedup), so that every sender — the Pipe,
// dlq-repair, a test — gets SQS's per-group deduplication, and no consumer
// sees the ids the twin stored. It speaks the SQS JSON protocol that
// aws-sdk-go-v2 uses; a query-protocol send to such a queue passes through
// unscoped (and is logged).
type sqsFront struct {
	once    sync.Once
	url     string
	err     error
	backend *url.URL
	client  *http.Client
	pass    *httputil.ReverseProxy

	mu     sync.Mutex
	queues map[string]*queue // by queue name, the last segment of its URL

	queryWarned sync.Once
}

// maxSQSRequest bounds the request and response bodies the front reads:
// SQS takes at most 1 MiB per message and per batch, plus JSON overhead.
const maxSQSRequest = 8 << 20

// SQSEndpoint returns the SQS endpoint a client of the stack should use:
// the twin's front to ElasticMQ (see sqsFront), which keeps the SQS
// semantics ElasticMQ lacks. Config.SQSEndpoint is ElasticMQ itself.
func (tw *Twin) SQSEndpoint() string {
	if err := tw.startFront(); err != nil {
		return tw.cfg.SQSEndpoint
	}
	return tw.front.url
}

// startFront starts the front once; createQueue calls it, so it runs
// before any function is given its endpoint.
func (tw *Twin) startFront() error {
	f := &tw.front
	f.once.Do(func() {
		f.err = f.start(tw)
		if f.err != nil {
			f.err = fmt.Errorf("SQS endpoint: %w", f.err)
		}
	})
	return f.err
}

func (f *sqsFront) start(tw *Twin) error {
	backend, err := url.Parse(tw.cfg.SQSEndpoint)
	if err != nil {
		return err
	}
	ln, err := listen("SQS", tw.cfg.Ports.SQS)
	if err != nil {
		return err
	}
	f.backend = backend
	f.client = &http.Client{Timeout: 2 * time.Minute}
	f.pass = httputil.NewSingleHostReverseProxy(backend)
	f.url = "http://" + ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.serve(tw, w, r) }), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	tw.closers = append(tw.closers, func() { srv.Close() })
	tw.log.Info("twin: SQS endpoint", obs.KeyURL, f.url, obs.KeyElasticMQ, tw.cfg.SQSEndpoint)
	return nil
}

// register makes q's traffic through the front scoped as q says.
func (f *sqsFront) register(q *queue) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queues == nil {
		f.queues = map[string]*queue{}
	}
	f.queues[q.name] = q
}

// queueOf finds the twin's queue a request's QueueUrl names. It matches on
// the queue name, which ElasticMQ keys queues by, whatever host the URL has.
func (f *sqsFront) queueOf(queueURL string) *queue {
	u, err := url.Parse(queueURL)
	if err != nil || u.Path == "" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queues[path.Base(u.Path)]
}

func (f *sqsFront) serve(tw *Twin, w http.ResponseWriter, r *http.Request) {
	op, isJSON := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.")
	if !isJSON || r.Method != http.MethodPost || (op != "SendMessage" && op != "SendMessageBatch" && op != "ReceiveMessage") {
		if !isJSON && r.Method == http.MethodPost {
			f.warnQuery(tw, r)
		}
		f.pass.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxSQSRequest))
	if err != nil {
		http.Error(w, "read request: "+err.Error(), http.StatusBadRequest)
		return
	}
	var in struct {
		QueueURL string `json:"QueueUrl"`
	}
	_ = json.Unmarshal(body, &in) // ElasticMQ answers a malformed request itself
	q := f.queueOf(in.QueueURL)
	if q == nil || !q.fifo {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		f.pass.ServeHTTP(w, r)
		return
	}
	var sends []frontSend
	if op != "ReceiveMessage" && q.groupScope {
		if body, sends, err = scopeSends(q, op, body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	status, header, resp, err := f.forward(r, body)
	if err != nil {
		http.Error(w, "ElasticMQ: "+err.Error(), http.StatusBadGateway)
		return
	}
	if status == http.StatusOK {
		switch op {
		case "ReceiveMessage":
			if q.groupScope {
				resp = plainReceived(q, resp)
			}
		default:
			f.journalDuplicates(tw, q, op, body, sends, resp)
		}
	}
	for k, vs := range header {
		if k == "Content-Length" || k == "Content-Encoding" {
			continue
		}
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(resp)))
	w.WriteHeader(status)
	_, _ = w.Write(resp)
}

// forward sends the request, with body, to ElasticMQ and returns its answer.
func (f *sqsFront) forward(r *http.Request, body []byte) (int, http.Header, []byte, error) {
	u := *f.backend
	u.Path, u.RawQuery = r.URL.Path, r.URL.RawQuery
	req, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header = r.Header.Clone()
	req.Header.Del("Accept-Encoding") // the transport's own gzip handling, undone for us
	req.ContentLength = int64(len(body))
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxSQSRequest))
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, b, nil
}

// frontSend is one message of a send through the front: the entry id (""
// for SendMessage), its group, the sender's deduplication id and the one
// ElasticMQ got.
type frontSend struct {
	entry, group, dedup, wire string
}

// scopeSends rewrites the deduplication ids of a SendMessage or
// SendMessageBatch request to q's wire ids. A content-based id is made
// explicit first (SQS: SHA-256 of the body), or ElasticMQ would compare
// bodies across groups. Every other field passes unchanged.
func scopeSends(q *queue, op string, body []byte) ([]byte, []frontSend, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return body, nil, nil // ElasticMQ answers it
	}
	scope := func(m map[string]json.RawMessage) (frontSend, error) {
		var s frontSend
		var msgBody string
		for k, dst := range map[string]*string{"Id": &s.entry, "MessageGroupId": &s.group, "MessageDeduplicationId": &s.dedup, "MessageBody": &msgBody} {
			if raw, ok := m[k]; ok {
				if err := json.Unmarshal(raw, dst); err != nil {
					return s, fmt.Errorf("%s: %w", k, err)
				}
			}
		}
		if s.dedup == "" && q.contentBased {
			s.dedup = contentDedup(msgBody)
		}
		if s.dedup == "" {
			return s, nil // ElasticMQ refuses it, as SQS would
		}
		s.wire = q.wireDedup(s.group, s.dedup)
		raw, err := json.Marshal(s.wire)
		if err != nil {
			return s, err
		}
		m["MessageDeduplicationId"] = raw
		return s, nil
	}
	var sends []frontSend
	switch op {
	case "SendMessage":
		s, err := scope(req)
		if err != nil {
			return nil, nil, err
		}
		sends = append(sends, s)
	case "SendMessageBatch":
		var entries []map[string]json.RawMessage
		if err := json.Unmarshal(req["Entries"], &entries); err != nil {
			return body, nil, nil
		}
		for _, e := range entries {
			s, err := scope(e)
			if err != nil {
				return nil, nil, err
			}
			sends = append(sends, s)
		}
		raw, err := json.Marshal(entries)
		if err != nil {
			return nil, nil, err
		}
		req["Entries"] = raw
	}
	out, err := json.Marshal(req)
	return out, sends, err
}

// plainReceived gives a ReceiveMessage answer's messages their senders'
// deduplication ids back. Attributes are system attributes, outside the
// MD5 digests SQS clients check.
func plainReceived(q *queue, resp []byte) []byte {
	var out map[string]json.RawMessage
	if json.Unmarshal(resp, &out) != nil || out["Messages"] == nil {
		return resp
	}
	var msgs []map[string]json.RawMessage
	if json.Unmarshal(out["Messages"], &msgs) != nil {
		return resp
	}
	for _, m := range msgs {
		var attrs map[string]string
		if m["Attributes"] == nil || json.Unmarshal(m["Attributes"], &attrs) != nil {
			continue
		}
		q.plainAttributes(attrs)
		if raw, err := json.Marshal(attrs); err == nil {
			m["Attributes"] = raw
		}
	}
	raw, err := json.Marshal(msgs)
	if err != nil {
		return resp
	}
	out["Messages"] = raw
	b, err := json.Marshal(out)
	if err != nil {
		return resp
	}
	return b
}

// journalDuplicates journals each message of a send through the front that
// SQS dropped as a duplicate, as the Pipe does for its own sends.
func (f *sqsFront) journalDuplicates(tw *Twin, q *queue, op string, req []byte, sends []frontSend, resp []byte) {
	if sends == nil { // a queue without group scope: read the ids as sent
		var err error
		if _, sends, err = scopeSends(&queue{fifo: true, contentBased: q.contentBased}, op, req); err != nil {
			return
		}
	}
	ids := map[string]string{} // entry → message id
	switch op {
	case "SendMessage":
		var out struct{ MessageId string }
		if json.Unmarshal(resp, &out) != nil {
			return
		}
		ids[""] = out.MessageId
	case "SendMessageBatch":
		var out struct {
			Successful []struct{ Id, MessageId string }
		}
		if json.Unmarshal(resp, &out) != nil {
			return
		}
		for _, s := range out.Successful {
			ids[s.Id] = s.MessageId
		}
	}
	now := time.Now()
	for _, s := range sends {
		id, ok := ids[s.entry]
		if !ok || s.dedup == "" {
			continue
		}
		wire := s.wire
		if wire == "" {
			wire = s.dedup
		}
		if dup := q.observe(wire, id, now); dup != nil {
			tw.journal.add(Entry{Kind: KindDuplicate, Source: q.id, Items: []string{id},
				Keys:    []string{"MessageGroupId=" + s.group + " MessageDeduplicationId=" + s.dedup},
				Outcome: "dropped by SQS: deduplication id already used within 5 minutes",
				Detail:  fmt.Sprintf("sent through the twin's SQS endpoint; first sent as message %s at %s", dup.messageID, dup.at.Format(time.RFC3339Nano))})
		}
	}
}

// warnQuery logs, once, that a client speaks SQS's query protocol, which
// the front passes through without group-scoped deduplication.
func (f *sqsFront) warnQuery(tw *Twin, r *http.Request) {
	if r.URL.Query().Get("Action") == "" && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return
	}
	f.queryWarned.Do(func() {
		tw.log.Warn("twin: an SQS query-protocol client: its requests pass to ElasticMQ as they are, so DeduplicationScope=messageGroup is not honoured for its sends (the JSON protocol of the AWS SDKs is)",
			obs.KeyUserAgent, r.Header.Get("User-Agent"))
	})
}
