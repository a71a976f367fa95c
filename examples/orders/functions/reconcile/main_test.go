package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// TestBootstrap runs the shipped binary (X-Ray on, as in AWS) against our
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

	daemon, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer daemon.Close()

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
			keys.EnvTracing: "xray", "AWS_XRAY_DAEMON_ADDRESS": daemon.LocalAddr().String(), "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
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

	// X-Ray: the SDK calls were traced under the invocation's trace id.
	_ = daemon.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64*1024)
	n, _, err := daemon.ReadFromUDP(buf)
	if err != nil {
		t.Fatalf("no X-Ray subsegment reached the daemon address: %v\n%s", err, stdout.String())
	}
	if doc := string(buf[:n]); !strings.Contains(doc, `"name":"DynamoDB"`) || !strings.Contains(doc, traceRoot) {
		t.Errorf("subsegment: got %s, want DynamoDB under trace %s", doc, traceRoot)
	}
}
