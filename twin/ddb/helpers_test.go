package ddb

// Set-up shared by the in-package tests (package ddb). The external tests (package
// ddb_test) cannot use these unexported helpers, and use localaws.HTTPClient() for the
// client; they share only the exported TestClock.

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// TestClock is Options.Now for tests: they move it by hand to expire tokens,
// iterators, records and TTLs. It is exported (from a test file, so only tests see it)
// for the external test package too.
type TestClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewTestClock returns a TestClock that reads start until moved.
func NewTestClock(start time.Time) *TestClock {
	return &TestClock{t: start}
}

func (c *TestClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *TestClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// startServer serves db over HTTP until the test ends, then closes the server and db.
func startServer(t testing.TB, db *DB) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(db.Handler())
	t.Cleanup(func() {
		srv.Close()
		db.Close()
	})
	return srv
}

// testConfig is the SDK configuration for a server of the tests': static credentials,
// no retries (so a test sees every error the server sends) and ownBodyClient.
func testConfig() aws.Config {
	return aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
		HTTPClient:  ownBodyClient{&http.Client{}},
	}
}

// newDDBClient is a DynamoDB client (testConfig) for the server at url.
func newDDBClient(url string) *dynamodb.Client {
	return dynamodb.NewFromConfig(testConfig(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(url) })
}

// newStreamsClient is a DynamoDB Streams client (testConfig) for the server at url.
func newStreamsClient(url string) *dynamodbstreams.Client {
	return dynamodbstreams.NewFromConfig(testConfig(), func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(url) })
}

// pkTableInput is CreateTable for a pay-per-request table keyed by pk (S); callers add
// sort keys, indexes and streams to it.
func pkTableInput(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}
}

// ownBodyClient gives the transport its own copy of each request body. smithy-go's
// ClientHandler closes the request body as soon as Do returns; when the response
// arrives before the transport's write loop has made its last read of the body (it
// reads once more for EOF), that read fails, the connection is torn down and the
// SDK fails to read a 200 response: "deserialization failed ... use of closed
// network connection" (aws/aws-sdk-go-v2#2737). Measured here: about 1 call in 100
// against this server on a loaded machine; 0 in 2,000 with this wrapper. It is
// localaws.HTTPClient's wrapper, which these tests cannot import (localaws imports ddb).
type ownBodyClient struct{ c *http.Client }

func (o ownBodyClient) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	return o.c.Do(r)
}
