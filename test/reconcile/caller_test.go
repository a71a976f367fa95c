package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
)

// TestHandlerLogsCaller: every call logs who made it, even one refused
// before any work (here a POST, which needs no tables): the SigV4 identity
// from requestContext.authorizer.iam, or that the call came without one.
func TestHandlerLogsCaller(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "function-url-request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var signed events.LambdaFunctionURLRequest
	if err := json.Unmarshal(raw, &signed); err != nil {
		t.Fatal(err)
	}
	signed.RequestContext.HTTP.Method = "POST"
	direct := signed
	direct.RequestContext.Authorizer = nil
	direct.RequestContext.HTTP.UserAgent = ""
	direct.Headers = map[string]string{"user-agent": "fourlanes-scheduler"}

	tests := []struct {
		name      string
		req       events.LambdaFunctionURLRequest
		caller    string
		userAgent string
	}{
		{"through the URL", signed, "arn:aws:sts::123456789012:assumed-role/fourlanes-operator/operator", signed.RequestContext.HTTP.UserAgent},
		{"invoked directly", direct, "", "fourlanes-scheduler"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := reconcile.NewHandler(nil, obs.NewLogger(&logs, "info"))
			resp, err := h.Handle(context.Background(), tt.req)
			if err != nil || resp.StatusCode != 405 {
				t.Fatalf("got %d %v, want 405", resp.StatusCode, err)
			}
			first, _, _ := bytes.Cut(logs.Bytes(), []byte("\n"))
			var rec map[string]any
			if err := json.Unmarshal(first, &rec); err != nil {
				t.Fatalf("first log line %q: %v", first, err)
			}
			if rec[obs.KeyCallerARN] != tt.caller || rec[obs.KeyUserAgent] != tt.userAgent || rec["method"] != "POST" {
				t.Errorf("caller line %v, want caller %q user agent %q", rec, tt.caller, tt.userAgent)
			}
			if tt.caller != "" && rec[obs.KeyCallerAccount] != "123456789012" {
				t.Errorf("caller account %v, want 123456789012", rec[obs.KeyCallerAccount])
			}
		})
	}
}
