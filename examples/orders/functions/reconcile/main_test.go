package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs/obstest"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/twin/lambdart"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

func TestMain(m *testing.M) { localaws.Main(m) }

func buildBootstrap(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "bootstrap")
	if out, err := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestBootstrapMissingEnv: a misconfigured function fails at cold start, naming
// every missing variable.
func TestBootstrapMissingEnv(t *testing.T) {
	bin := buildBootstrap(t)
	cmd := exec.Command(bin)
	cmd.Env = []string{"AWS_LAMBDA_RUNTIME_API=127.0.0.1:1", "AWS_REGION=eu-west-1"}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("got %v, want exit status 1\n%s", err, out)
	}
	if !strings.Contains(string(out), keys.EnvEventsTable+", "+keys.EnvStateTable) || !strings.Contains(string(out), `"level":"ERROR"`) {
		t.Errorf("cold-start error does not name both variables:\n%s", out)
	}
}

type testCatalog struct{}

func (testCatalog) Prepare(_ string, payload any) (int, map[string]any, error) {
	p, err := envelope.NormalizePayload(payload)
	return 1, p, err
}

// TestBootstrap runs the shipped binary (OpenTelemetry on, as in AWS) against our
// DynamoDB (twin/ddb) through the local Lambda Runtime API (twin/lambdart), with a Function URL request.
func TestBootstrap(t *testing.T) {
	bin := buildBootstrap(t)
	db := localaws.DynamoDB(t)
	eventsTable := aws.ToString(localaws.CreateTable(t, db, eventstore.TableSchema(localaws.UniqueName(t, "events"))).TableName)
	stateTable := aws.ToString(localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "state"))).TableName)
	store, err := eventstore.New(db, eventstore.Config{Table: eventsTable, Catalog: testCatalog{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := tenancy.MustWithTenant(context.Background(), "acme")
	for i := 0; i < 3; i++ {
		if _, err := store.Emit(ctx, "order.placed", map[string]any{"n": i}); err != nil {
			t.Fatal(err)
		}
	}

	col := newCollector()
	defer col.Close()

	req, err := os.ReadFile(filepath.Join("testdata", "function-url-request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var stdout obstest.Buffer
	fn := lambdart.New(lambdart.Spec{
		Name: "reconcile", ARN: "arn:aws:lambda:eu-west-1:123456789012:function:reconcile", Binary: bin,
		Env: map[string]string{
			keys.EnvEventsTable: eventsTable, keys.EnvStateTable: stateTable,
			"AWS_ENDPOINT_URL_DYNAMODB": aws.ToString(db.Options().BaseEndpoint),
			"AWS_REGION":                "us-east-1", "AWS_ACCESS_KEY_ID": "fourlanes", "AWS_SECRET_ACCESS_KEY": "local",
			"AWS_CONFIG_FILE": filepath.Join(t.TempDir(), "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(t.TempDir(), "none"),
			keys.EnvTracing: "otel", keys.EnvOTLPTracesEndpoint: col.URL + "/v1/traces",
		},
		Output:       func(l lambdart.Line) { _, _ = stdout.Write([]byte(l.Text + "\n")) },
		TraceSampled: true,
	})
	defer fn.Close()
	ictx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := fn.Invoke(ictx, req)
	if err != nil || res.Err != nil {
		t.Fatalf("invoke: %v %v\n%s", err, res.Err, stdout.String())
	}
	raw := res.Payload
	traceRoot, _, _ := strings.Cut(strings.TrimPrefix(res.TraceHeader, "Root="), ";")
	if !strings.HasPrefix(traceRoot, "1-") || !strings.HasSuffix(res.TraceHeader, "Sampled=1") {
		t.Fatalf("trace header %q: want a sampled X-Ray root", res.TraceHeader)
	}
	var resp events.LambdaFunctionURLResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatalf("response %s: %v", raw, err)
	}
	var body map[string]any
	_ = json.Unmarshal([]byte(resp.Body), &body)
	if resp.StatusCode != 200 || body["tenant"] != "acme" || body["chain_intact"] != true || body["last_seq"] != 3.0 {
		t.Fatalf("got %d %s, want 200 with acme intact at last_seq 3\n%s", resp.StatusCode, resp.Body, stdout.String())
	}
	// The runtime reads the process's output on its own goroutine: the line
	// may arrive after the response.
	if !stdout.WaitFor(`"msg":"reconcile serving`, 10*time.Second) {
		t.Fatalf("no start-up line saying what it serves within 10s:\n%s", stdout.String())
	}

	// OpenTelemetry: the invocation continued Lambda's trace, and its
	// DynamoDB calls are its children, all at the OTLP endpoint by the time
	// the invocation answered.
	hexRoot := strings.ReplaceAll(strings.TrimPrefix(traceRoot, "1-"), "-", "")
	spans := col.spans()
	var inv string
	for _, sp := range spans {
		if sp.Name == "reconcile" && sp.TraceID == hexRoot {
			inv = sp.SpanID
		}
	}
	calls := 0
	for _, sp := range spans {
		if strings.HasPrefix(sp.Name, "DynamoDB.") && sp.TraceID == hexRoot && sp.ParentSpanID == inv {
			calls++
		}
	}
	if inv == "" || calls == 0 {
		t.Errorf("spans at the collector: got %+v; want the invocation span \"reconcile\" under trace %s and DynamoDB calls as its children\n%s",
			spans, hexRoot, stdout.String())
	}
}

// collector is an OTLP/HTTP receiver that keeps the spans posted to it as
// JSON.
type collector struct {
	*httptest.Server
	mu  sync.Mutex
	got []otlpSpan
}

type otlpSpan struct {
	TraceID      string `json:"traceId"`
	SpanID       string `json:"spanId"`
	ParentSpanID string `json:"parentSpanId"`
	Name         string `json:"name"`
}

func newCollector() *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []otlpSpan `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if r.URL.Path != "/v1/traces" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "want OTLP JSON on /v1/traces", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				c.got = append(c.got, ss.Spans...)
			}
		}
	}))
	return c
}

func (c *collector) spans() []otlpSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]otlpSpan(nil), c.got...)
}
