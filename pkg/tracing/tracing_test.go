//go:build !notrace

package tracing_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs/obstest"
	"github.com/fourlanes/fourlanes/pkg/tracing"
)

// fakeDynamoDB answers every call with one item and records the trace
// headers it was sent.
type fakeDynamoDB struct {
	mu      sync.Mutex
	headers []string
}

func (f *fakeDynamoDB) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.headers = append(f.headers, r.Header.Get("X-Amzn-Trace-Id"))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-RequestId", "req-1")
	_, _ = w.Write([]byte(`{"Item":{"pk":{"S":"a"}}}`))
}

func (f *fakeDynamoDB) traceHeaders() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.headers...)
}

// span is what the test reads of an exported OTLP JSON span.
type span struct {
	TraceID      string `json:"traceId"`
	SpanID       string `json:"spanId"`
	ParentSpanID string `json:"parentSpanId"`
	Name         string `json:"name"`
	Kind         int    `json:"kind"`
	Start        string `json:"startTimeUnixNano"`
	Attributes   []struct {
		Key   string         `json:"key"`
		Value map[string]any `json:"value"`
	} `json:"attributes"`
	Links  []struct{ TraceID, SpanID string } `json:"links"`
	Status struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"status"`
}

func (s span) attr(k string) any {
	for _, a := range s.Attributes {
		if a.Key == k {
			for _, v := range a.Value {
				return v
			}
		}
	}
	return nil
}

// collector is an OTLP/HTTP receiver: it decodes the JSON requests posted
// to /v1/traces, or answers status when status is not 200.
type collector struct {
	mu     sync.Mutex
	status int
	spans  []span
	types  []string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.types = append(c.types, r.Header.Get("Content-Type"))
	if r.URL.Path != "/v1/traces" || r.Method != http.MethodPost {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if c.status != 0 && c.status != http.StatusOK {
		http.Error(w, "collector says no", c.status)
		return
	}
	var req struct {
		ResourceSpans []struct {
			Resource struct {
				Attributes []struct {
					Key   string         `json:"key"`
					Value map[string]any `json:"value"`
				} `json:"attributes"`
			} `json:"resource"`
			ScopeSpans []struct {
				Spans []span `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	w.WriteHeader(http.StatusOK)
}

func (c *collector) got() []span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]span(nil), c.spans...)
}

func baseConfig() aws.Config {
	return aws.Config{
		Region: "eu-west-1",
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		}),
	}
}

func getItem(ctx context.Context, cfg aws.Config, url string) error {
	c := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(url)
		o.DisableValidateResponseChecksum = true
	})
	_, err := c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String("t"),
		Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}},
	})
	return err
}

// captureLogs routes slog's default logger to a buffer for the test.
func captureLogs(t *testing.T) *obstest.Buffer {
	t.Helper()
	buf := &obstest.Buffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return buf
}

// setup sets the environment and forgets earlier decisions.
func setup(t *testing.T, mode, endpoint string) {
	t.Helper()
	t.Setenv(keys.EnvTracing, mode)
	t.Setenv(keys.EnvOTLPTracesEndpoint, endpoint)
	t.Setenv(keys.EnvOTLPEndpoint, "")
	t.Setenv("_X_AMZN_TRACE_ID", "")
	tracing.Reset()
	t.Cleanup(tracing.Reset)
}

// TestOffIsNoop: without FOURLANES_TRACING=otel, or without an exporter,
// nothing is added to the config and Invocation returns the handler
// itself.
func TestOffIsNoop(t *testing.T) {
	for _, tc := range []struct{ mode, endpoint, warn string }{
		{"", "http://127.0.0.1:1/v1/traces", ""},
		{"off", "", ""},
		{"otel", "", "no exporter is configured"},
		{"jaeger", "http://127.0.0.1:1/v1/traces", "unknown tracing mode"},
	} {
		t.Run(tc.mode+"/"+tc.endpoint, func(t *testing.T) {
			logs := captureLogs(t)
			setup(t, tc.mode, tc.endpoint)
			cfg := baseConfig()
			tracing.Instrument(&cfg)
			if n := len(cfg.APIOptions); n != 0 {
				t.Errorf("got %d API options, want 0", n)
			}
			if tracing.Enabled() {
				t.Error("Enabled() = true, want false")
			}
			calls := 0
			h := func(context.Context, int) (int, error) { calls++; return 1, nil }
			w := tracing.Invocation("fn", h)
			if _, _ = w(context.Background(), 0); calls != 1 {
				t.Errorf("wrapped handler ran %d times, want 1", calls)
			}
			if tc.warn != "" && !strings.Contains(logs.String(), tc.warn) {
				t.Errorf("logs: want a warning containing %q, got\n%s", tc.warn, logs)
			}
			if tc.warn == "" && strings.Contains(logs.String(), "WARN") {
				t.Errorf("logs: want no warning, got\n%s", logs)
			}
		})
	}
}

// TestInvocationAndSDKSpans: in Lambda, an invocation's span continues
// Lambda's segment (the X-Ray header aws-lambda-go puts in the context), an
// AWS SDK call is its child and carries the trace downstream, and both reach
// the OTLP/HTTP endpoint, as JSON, before the handler returns.
func TestInvocationAndSDKSpans(t *testing.T) {
	captureLogs(t)
	col := &collector{}
	colSrv := httptest.NewServer(col)
	defer colSrv.Close()
	setup(t, tracing.ModeOTel, colSrv.URL+"/v1/traces")
	db := &fakeDynamoDB{}
	dbSrv := httptest.NewServer(db)
	defer dbSrv.Close()

	cfg := baseConfig()
	tracing.Instrument(&cfg)
	if !tracing.Enabled() || len(cfg.APIOptions) == 0 {
		t.Fatalf("Enabled %v, %d API options; want true, > 0", tracing.Enabled(), len(cfg.APIOptions))
	}
	const (
		root     = "1-5759e988-bd862e3fe1be46a994272793"
		traceID  = "5759e988bd862e3fe1be46a994272793"
		lambdaID = "53995c3f42cd8ad8"
	)
	ctx := context.WithValue(context.Background(), "x-amzn-trace-id", "Root="+root+";Parent="+lambdaID+";Sampled=1")
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "inv-1"})
	var inHandler string
	h := tracing.Invocation("durable-consumer", func(ctx context.Context, _ struct{}) (string, error) {
		inHandler = tracing.TraceID(ctx)
		return "ok", getItem(ctx, cfg, dbSrv.URL)
	})
	if out, err := h(ctx, struct{}{}); err != nil || out != "ok" {
		t.Fatalf("handler: got %q, %v; want ok, nil", out, err)
	}
	if inHandler != traceID {
		t.Errorf("trace id in the handler: got %q, want %s", inHandler, traceID)
	}
	spans := col.got() // exported before the handler returned: no waiting
	if len(spans) != 2 {
		t.Fatalf("exported spans: got %d (%+v), want 2 (invocation, DynamoDB.GetItem)", len(spans), spans)
	}
	var inv, call span
	for _, s := range spans {
		switch s.Name {
		case "durable-consumer":
			inv = s
		case "DynamoDB.GetItem":
			call = s
		}
	}
	if inv.TraceID != traceID || inv.ParentSpanID != lambdaID || inv.Kind != 2 || inv.attr("faas.invocation_id") != "inv-1" {
		t.Errorf("invocation span: got %+v; want trace %s, parent %s, kind server, faas.invocation_id inv-1", inv, traceID, lambdaID)
	}
	if call.TraceID != traceID || call.ParentSpanID != inv.SpanID || call.Kind != 3 ||
		call.attr("rpc.method") != "GetItem" || call.attr("aws.request_id") != "req-1" || call.attr("cloud.region") != "eu-west-1" {
		t.Errorf("SDK call span: got %+v; want child of %s, kind client, GetItem, request id req-1, region eu-west-1", call, inv.SpanID)
	}
	if hs := db.traceHeaders(); len(hs) != 1 || hs[0] != "Root="+root+";Parent="+call.SpanID+";Sampled=1" {
		t.Errorf("X-Amzn-Trace-Id sent to DynamoDB: got %q, want Root=%s;Parent=%s;Sampled=1", hs, root, call.SpanID)
	}
	if col.types[0] != "application/json" {
		t.Errorf("Content-Type: got %q, want application/json", col.types[0])
	}
}

// TestHandlerErrorIsRecorded: a failed invocation's span has status error
// and the handler's error, unchanged, is returned.
func TestHandlerErrorIsRecorded(t *testing.T) {
	captureLogs(t)
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	setup(t, tracing.ModeOTel, srv.URL+"/v1/traces")
	boom := errors.New("boom")
	err := tracing.InvocationErr("tamper-watch", func(context.Context, int) error { return boom })(context.Background(), 1)
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	spans := col.got()
	if len(spans) != 1 || spans[0].Status.Code != 2 || spans[0].Status.Message != "boom" {
		t.Errorf("got %+v, want one span with status error \"boom\"", spans)
	}
	if spans[0].ParentSpanID != "" || len(spans[0].TraceID) != 32 {
		t.Errorf("outside Lambda the invocation is a root span: got %+v", spans[0])
	}
	// X-Ray-compatible: the trace id starts with its start time.
	if ts := spans[0].TraceID[:8]; ts < "5f000000" {
		t.Errorf("trace id %s does not start with the time in Unix seconds", spans[0].TraceID)
	}
}

// TestExportFailureIsLoud: a collector that refuses (or none listening)
// never changes an invocation's outcome, and each lost export is a warning.
func TestExportFailureIsLoud(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(col *httptest.Server) string
		want string
	}{
		{"refused", func(col *httptest.Server) string { return col.URL + "/v1/traces" }, "HTTP 503"},
		{"nothing listening", func(*httptest.Server) string { return "http://127.0.0.1:1/v1/traces" }, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := captureLogs(t)
			col := &collector{status: http.StatusServiceUnavailable}
			srv := httptest.NewServer(col)
			defer srv.Close()
			setup(t, tracing.ModeOTel, tc.url(srv))
			start := time.Now()
			out, err := tracing.Invocation("fn", func(context.Context, int) (int, error) { return 7, nil })(context.Background(), 1)
			if err != nil || out != 7 {
				t.Fatalf("got %d, %v; want 7, nil", out, err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("a failed export held the invocation %v", d)
			}
			if s := logs.String(); !strings.Contains(s, `"msg":"trace export failed`) || !strings.Contains(s, tc.want) {
				t.Errorf("logs: want a warning \"trace export failed\" naming %q, got\n%s", tc.want, s)
			}
		})
	}
}

// TestContinue: an event's work joins the trace its envelope carries, as a
// child of the emitting span, linked to the invocation; with tracing off the
// context still carries that trace.
func TestContinue(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	t.Run("off", func(t *testing.T) {
		setup(t, "", "")
		ctx, end := tracing.Continue(context.Background(), "deliver", tp)
		end(nil)
		if got := tracing.TraceParent(ctx); got != tp {
			t.Errorf("TraceParent: got %q, want %q", got, tp)
		}
	})
	t.Run("on", func(t *testing.T) {
		captureLogs(t)
		col := &collector{}
		srv := httptest.NewServer(col)
		defer srv.Close()
		setup(t, tracing.ModeOTel, srv.URL+"/v1/traces")
		var traceID string
		_, _ = tracing.Invocation("durable-consumer", func(ctx context.Context, _ int) (int, error) {
			ctx, end := tracing.Continue(ctx, "deliver billing", tp, tracing.String("fourlanes.subscription", "billing"))
			traceID = tracing.TraceID(ctx)
			end(nil)
			return 0, nil
		})(context.Background(), 0)
		if traceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("trace id in the work: got %q, want the envelope's", traceID)
		}
		var inv, work span
		for _, s := range col.got() {
			if s.Name == "deliver billing" {
				work = s
			} else {
				inv = s
			}
		}
		if work.ParentSpanID != "00f067aa0ba902b7" || work.Kind != 5 || work.attr("fourlanes.subscription") != "billing" {
			t.Errorf("work span: got %+v; want child of 00f067aa0ba902b7, kind consumer, subscription billing", work)
		}
		if len(work.Links) != 1 || work.Links[0].SpanID != inv.SpanID || work.Links[0].TraceID != inv.TraceID {
			t.Errorf("work span links: got %+v, want one to the invocation %s/%s", work.Links, inv.TraceID, inv.SpanID)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		setup(t, "", "")
		for _, bad := range []string{"garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-zz"} {
			if tracing.ValidTraceParent(bad) {
				t.Errorf("ValidTraceParent(%q) = true, want false", bad)
			}
			ctx, _ := tracing.Continue(context.Background(), "deliver", bad)
			if got := tracing.TraceID(ctx); got != "" {
				t.Errorf("Continue(%q): trace id %q, want none", bad, got)
			}
		}
	})
}

// TestXRayHeader: Lambda's trace header parses to the span context it
// names, and formats back; malformed ones give none.
func TestXRayHeader(t *testing.T) {
	const h = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	sc := tracing.ParseXRay(h)
	if !sc.IsValid() || !sc.IsRemote() || !sc.IsSampled() || sc.TraceID().String() != "5759e988bd862e3fe1be46a994272793" || sc.SpanID().String() != "53995c3f42cd8ad8" {
		t.Fatalf("ParseXRay(%q) = %+v", h, sc)
	}
	if got := tracing.FormatXRay(sc); got != h {
		t.Errorf("FormatXRay: got %q, want %q", got, h)
	}
	if sc := tracing.ParseXRay("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0;Lineage=a:1"); !sc.IsValid() || sc.IsSampled() {
		t.Errorf("Sampled=0: got %+v, want valid, not sampled", sc)
	}
	for _, bad := range []string{"", "Root=1-5759e988-bd862e3fe1be46a994272793", "Parent=53995c3f42cd8ad8",
		"Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", "Root=1-5759e988-bd862e3fe1be46a99427279z;Parent=53995c3f42cd8ad8",
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f"} {
		if sc := tracing.ParseXRay(bad); sc.IsValid() {
			t.Errorf("ParseXRay(%q) = %+v, want invalid", bad, sc)
		}
	}
	before := uint32(time.Now().Unix())
	tid, sid := tracing.NewIDs(context.Background())
	if got := uint32(tid[0])<<24 | uint32(tid[1])<<16 | uint32(tid[2])<<8 | uint32(tid[3]); got < before || got > before+2 || !sid.IsValid() {
		t.Errorf("NewIDs: trace id %s starts with %d, want the time %d", tid, got, before)
	}
}
