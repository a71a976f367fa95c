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
// API takes it (POST /_fourlanes/faults; twin/ddb, faults.go).
type Fault struct {
	Action  string  `json:"action"`
	Table   string  `json:"table"`
	Match   string  `json:"match,omitempty"`
	Kind    string  `json:"kind"` // drop, delay, error, throttle, stall
	Count   int     `json:"count,omitempty"`
	Rate    float64 `json:"rate,omitempty"`
	Seed    uint64  `json:"seed,omitempty"`
	DelayMs int64   `json:"delayMs,omitempty"`
	Hits    int     `json:"hits,omitempty"` // listing only
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
	res, err := http.Post(adminURL(db), "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("arm fault %s: %v", body, err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(res.Body)
		t.Fatalf("arm fault %s: %s: %s", body, res.Status, msg)
	}
}

// ArmedFaults lists the fault rules still armed on the DynamoDB db talks to,
// each with what is left of its count and what it has hit.
func ArmedFaults(t testing.TB, db *dynamodb.Client) []Fault {
	t.Helper()
	res, err := http.Get(adminURL(db))
	if err != nil {
		t.Fatalf("list faults: %v", err)
	}
	defer res.Body.Close()
	var fs []Fault
	if err := json.NewDecoder(res.Body).Decode(&fs); err != nil {
		t.Fatalf("list faults: %v", err)
	}
	return fs
}

// ClearFaults disarms every fault rule of the DynamoDB db talks to: use it on
// a DynamoDBProcess of the test's own, never on the run's shared server.
func ClearFaults(t testing.TB, db *dynamodb.Client) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, adminURL(db), nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("clear faults: %v", err)
	}
	res.Body.Close()
}

func adminURL(db *dynamodb.Client) string {
	return strings.TrimRight(aws.ToString(db.Options().BaseEndpoint), "/") + "/_fourlanes/faults"
}
