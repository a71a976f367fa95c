package obs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

func TestLoggerCarriesContext(t *testing.T) {
	var buf bytes.Buffer
	log := obs.NewLogger(&buf, "info")
	ctx := tenancy.MustWithTenant(context.Background(), "acme")
	ctx = obs.WithLane(obs.WithEvent(ctx, "ev-1"), "DURABLE")
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "req-9"})
	log.InfoContext(ctx, "delivered", obs.KeySubscription, "notifications.order-email")
	log.DebugContext(ctx, "hidden at info")

	var rec map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &rec); err != nil {
		t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
	}
	want := map[string]string{
		obs.KeyRequestID: "req-9", obs.KeyTenant: "acme", obs.KeyEventID: "ev-1",
		obs.KeyLane: "DURABLE", obs.KeySubscription: "notifications.order-email", "msg": "delivered",
	}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("%s: got %v, want %q", k, rec[k], v)
		}
	}
}

func TestRequestIDPrefersExplicit(t *testing.T) {
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "lambda"})
	if got := obs.RequestID(obs.WithRequestID(ctx, "mine")); got != "mine" {
		t.Errorf("got %q, want mine", got)
	}
	if got := obs.RequestID(ctx); got != "lambda" {
		t.Errorf("got %q, want lambda", got)
	}
}

// TestCountWritesEMF checks the line CloudWatch Logs turns into a metric: the
// namespace, the dimension set and the value.
func TestCountWritesEMF(t *testing.T) {
	var buf bytes.Buffer
	obs.NewMetrics(&buf).Count(keys.MetricDeadLettered, 2, "Lane", "DURABLE")
	var rec struct {
		AWS struct {
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		DeadLettered float64
		Lane         string
	}
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &rec); err != nil {
		t.Fatalf("not an EMF line: %q: %v", buf.String(), err)
	}
	if len(rec.AWS.CloudWatchMetrics) != 1 {
		t.Fatalf("got %d metric directives: %s", len(rec.AWS.CloudWatchMetrics), buf.String())
	}
	d := rec.AWS.CloudWatchMetrics[0]
	if d.Namespace != keys.MetricNamespace || len(d.Metrics) != 1 || d.Metrics[0].Name != keys.MetricDeadLettered || d.Metrics[0].Unit != "Count" {
		t.Errorf("directive %+v", d)
	}
	if len(d.Dimensions) != 1 || len(d.Dimensions[0]) != 1 || d.Dimensions[0][0] != "Lane" || rec.Lane != "DURABLE" {
		t.Errorf("dimensions %v, Lane %q", d.Dimensions, rec.Lane)
	}
	if rec.DeadLettered != 2 {
		t.Errorf("value: got %v, want 2", rec.DeadLettered)
	}
}

// TestLoggerLambdaFields: within an invocation every record carries the
// function's name, whether this is the process's first invocation, and the
// X-Ray trace id aws-lambda-go put in the context; the time is under
// "timestamp", as Lambda's log-level filtering reads it.
func TestLoggerLambdaFields(t *testing.T) {
	obs.ResetColdStart()
	withFunctionName(t, "fourlanes-reconcile")
	var buf bytes.Buffer
	log := obs.NewLogger(&buf, "info")
	invoke := func(id, header string) context.Context {
		//nolint:staticcheck // aws-lambda-go's own key for the trace header
		return context.WithValue(invocation(id), "x-amzn-trace-id", header)
	}
	log.InfoContext(context.Background(), "init")
	log.InfoContext(invoke("req-1", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"), "first")
	log.InfoContext(invoke("req-2", "Root=1-5759e989-000000000000000000000002;Sampled=0"), "second")

	var recs []map[string]any
	for l := range strings.Lines(buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		if _, ok := rec["timestamp"]; !ok || rec["time"] != nil {
			t.Errorf("want the time under timestamp: %v", rec)
		}
		recs = append(recs, rec)
	}
	if len(recs) != 3 {
		t.Fatalf("got %d records, want 3", len(recs))
	}
	for _, k := range []string{obs.KeyFunctionName, obs.KeyColdStart, obs.KeyTraceID} {
		if v, ok := recs[0][k]; ok {
			t.Errorf("outside an invocation: %s = %v, want none", k, v)
		}
	}
	for i, want := range []map[string]any{
		{obs.KeyFunctionName: "fourlanes-reconcile", obs.KeyColdStart: true, obs.KeyTraceID: "1-5759e988-bd862e3fe1be46a994272793", obs.KeyRequestID: "req-1"},
		{obs.KeyFunctionName: "fourlanes-reconcile", obs.KeyColdStart: false, obs.KeyTraceID: "1-5759e989-000000000000000000000002", obs.KeyRequestID: "req-2"},
	} {
		for k, v := range want {
			if recs[i+1][k] != v {
				t.Errorf("record %q: %s = %v, want %v", recs[i+1]["msg"], k, recs[i+1][k], v)
			}
		}
	}
}

// TestSetupLevel: Setup's level is AWS_LAMBDA_LOG_LEVEL (what the console
// sets), else LOG_LEVEL, else info; above INFO it warns that Lambda drops the
// EMF lines.
func TestSetupLevel(t *testing.T) {
	for _, tc := range []struct {
		lambda, local string
		want          []string // of debug, info, warn, error
		emfWarning    bool
	}{
		{"", "", []string{"info", "warn", "error"}, false},
		{"", "debug", []string{"debug", "info", "warn", "error"}, false},
		{"INFO", "debug", []string{"info", "warn", "error"}, false},
		{"DEBUG", "error", []string{"debug", "info", "warn", "error"}, false},
		{"TRACE", "", []string{"debug", "info", "warn", "error"}, false},
		{"WARN", "debug", []string{"warn", "error"}, true},
		{"ERROR", "", []string{"error"}, true},
		{"FATAL", "", []string{"error"}, true},
		{"NOISY", "warn", []string{"warn", "error"}, false}, // not a level: LOG_LEVEL applies
	} {
		t.Run(tc.lambda+"/"+tc.local, func(t *testing.T) {
			t.Setenv("AWS_LAMBDA_LOG_LEVEL", tc.lambda)
			t.Setenv(keys.EnvLogLevel, tc.local)
			out := captureStdout(t, func() {
				log := obs.Setup()
				log.Debug("debug")
				log.Info("info")
				log.Warn("warn")
				log.Error("error")
			})
			var got []string
			warned := false
			for l := range strings.Lines(out) {
				var rec struct{ Msg string }
				if err := json.Unmarshal([]byte(l), &rec); err != nil {
					t.Fatalf("not JSON: %q", l)
				}
				if strings.Contains(rec.Msg, "EMF") {
					warned = true
					continue
				}
				got = append(got, rec.Msg)
			}
			if !slices.Equal(got, tc.want) || warned != tc.emfWarning {
				t.Errorf("got %v (EMF warning %v), want %v (%v)", got, warned, tc.want, tc.emfWarning)
			}
		})
	}
}

// captureStdout runs f with os.Stdout on a pipe and slog's default restored
// after, and returns what f wrote.
func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	prevOut, prevLog := os.Stdout, slog.Default()
	os.Stdout = w
	defer func() { os.Stdout = prevOut; slog.SetDefault(prevLog) }()
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); done <- b }()
	f()
	_ = w.Close()
	return string(<-done)
}

// TestColdStartSilentFirstInvocation: the first invocation is the cold one
// even when it logs nothing, since PerInvocation saw it begin.
func TestColdStartSilentFirstInvocation(t *testing.T) {
	obs.ResetColdStart()
	var buf bytes.Buffer
	log := obs.NewLogger(&buf, "info")
	h := obs.PerInvocationErr(obs.NewMetrics(io.Discard), func(ctx context.Context, msg string) error {
		if msg != "" {
			log.InfoContext(ctx, msg)
		}
		return nil
	})
	_ = h(invocation("req-silent"), "")
	_ = h(invocation("req-next"), "second")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("not one JSON record: %q", buf.String())
	}
	if rec[obs.KeyColdStart] != false {
		t.Errorf("second invocation: cold_start = %v, want false", rec[obs.KeyColdStart])
	}
}
