package localaws

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Fault is one rule of the local DynamoDB's fault injection, as its admin
// API takes it (POST /_fourlanes/faults; internal/twin/ddb, faults.go).
type Fault struct {
	Action  string  `json:"action"`
	Table   string  `json:"table"`
	Match   string  `json:"match,omitempty"`
	Kind    string  `json:"kind"` // drop, delay, error, throttle, stall
	Count   int     `json:"count,omitempty"`
	Rate    float64 `json:"rate,omitempty"`
	DelayMs int64   `json:"delayMs,omitempty"`
}

// InjectFault arms f on the DynamoDB that db talks to. f must name a table
// (the test's own): the server is shared by every test of the run, and a
// rule scoped to one table touches no other test.
func InjectFault(t testing.TB, db *dynamodb.Client, f Fault) {
	t.Helper()
	if f.Table == "" {
		t.Fatal("localaws.InjectFault: the fault must name the test's own table")
	}
	body, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	admin := strings.TrimRight(aws.ToString(db.Options().BaseEndpoint), "/") + "/_fourlanes/faults"
	res, err := http.Post(admin, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("arm fault %s: %v", body, err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(res.Body)
		t.Fatalf("arm fault %s: %s: %s", body, res.Status, msg)
	}
}
