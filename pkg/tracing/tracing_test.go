//go:build !notrace

package tracing_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-xray-sdk-go/xray"

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

func client(t *testing.T, cfg aws.Config, url string) *dynamodb.Client {
	t.Helper()
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(url)
		o.DisableValidateResponseChecksum = true
	})
}

func baseConfig() aws.Config {
	return aws.Config{
		Region: "us-east-1",
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		}),
	}
}

func getItem(ctx context.Context, c *dynamodb.Client) error {
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

func TestOffLeavesConfigAlone(t *testing.T) {
	for _, v := range []string{"", "off", "otel"} {
		t.Setenv(keys.EnvTracing, v)
		cfg := baseConfig()
		tracing.Instrument(&cfg)
		if n := len(cfg.APIOptions); n != 0 {
			t.Errorf("%s=%q: got %d API options, want 0", keys.EnvTracing, v, n)
		}
		if tracing.Enabled() {
			t.Errorf("%s=%q: Enabled() = true, want false", keys.EnvTracing, v)
		}
	}
}

// TestNoSegmentStillWorks: outside Lambda there is no segment; the call must
// succeed, promptly, with one warning and no panic.
func TestNoSegmentStillWorks(t *testing.T) {
	t.Setenv(keys.EnvTracing, tracing.ModeXRay)
	t.Setenv("AWS_XRAY_CONTEXT_MISSING", "")
	logs := captureLogs(t)
	fake := &fakeDynamoDB{}
	srv := httptest.NewServer(fake)
	defer srv.Close()

	cfg := baseConfig()
	tracing.Instrument(&cfg)
	if len(cfg.APIOptions) == 0 {
		t.Fatal("Instrument added no API options with FOURLANES_TRACING=xray")
	}
	if !tracing.Enabled() {
		t.Fatal("Enabled() = false with FOURLANES_TRACING=xray")
	}
	c := client(t, cfg, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	for i := 0; i < 3; i++ {
		if err := getItem(ctx, c); err != nil {
			t.Fatalf("GetItem without a segment: %v", err)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("3 untraced calls took %v; tracing must not block", d)
	}
	if got := strings.Count(logs.String(), `"level":"WARN","msg":"X-Ray: no segment`); got != 1 {
		t.Errorf("context-missing warnings: got %d, want 1 (then debug)\n%s", got, logs)
	}
}

// TestLambdaFacadeSegment: in Lambda, aws-lambda-go puts the trace header in
// the context; the call carries it downstream and a subsegment reaches the
// daemon address over UDP.
func TestLambdaFacadeSegment(t *testing.T) {
	t.Setenv(keys.EnvTracing, tracing.ModeXRay)
	t.Setenv("AWS_XRAY_CONTEXT_MISSING", "")
	captureLogs(t)
	fake := &fakeDynamoDB{}
	srv := httptest.NewServer(fake)
	defer srv.Close()

	daemon, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer daemon.Close()

	cfg := baseConfig()
	tracing.Instrument(&cfg)
	if err := xray.Configure(xray.Config{DaemonAddr: daemon.LocalAddr().String()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = xray.Configure(xray.Config{DaemonAddr: "127.0.0.1:2000"}) })

	const root = "1-5759e988-bd862e3fe1be46a994272793"
	ctx := context.WithValue(context.Background(), xray.LambdaTraceHeaderKey,
		"Root="+root+";Parent=53995c3f42cd8ad8;Sampled=1")
	if err := getItem(ctx, client(t, cfg, srv.URL)); err != nil {
		t.Fatalf("GetItem under a facade segment: %v", err)
	}
	hs := fake.traceHeaders()
	if len(hs) != 1 || !strings.Contains(hs[0], "Root="+root) {
		t.Errorf("X-Amzn-Trace-Id sent downstream: got %q, want one header with Root=%s", hs, root)
	}

	// The subsegment document: "{header}\n{json}".
	_ = daemon.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64*1024)
	n, _, err := daemon.ReadFromUDP(buf)
	if err != nil {
		t.Fatalf("no subsegment reached the daemon address: %v", err)
	}
	_, body, ok := strings.Cut(string(buf[:n]), "\n")
	if !ok {
		t.Fatalf("daemon datagram %q has no header line", buf[:n])
	}
	var doc struct {
		Name    string         `json:"name"`
		TraceID string         `json:"trace_id"`
		AWS     map[string]any `json:"aws"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("subsegment %s: %v", body, err)
	}
	if doc.Name != "DynamoDB" || doc.TraceID != root || doc.AWS["operation"] != "GetItem" {
		t.Errorf("subsegment: got name %q trace %q operation %v, want DynamoDB %s GetItem", doc.Name, doc.TraceID, doc.AWS["operation"], root)
	}
}
