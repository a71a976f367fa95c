package obs_test

import (
	"bytes"
	"context"
	"encoding/json"
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
