package localaws

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Region and AccountID are what the local servers and their clients claim to be.
const (
	Region    = "us-east-1"
	AccountID = "000000000000"
)

// Config returns an aws.Config for the local servers: Region, static dummy credentials and
// HTTPClient(). It reads nothing from the environment, so a developer's AWS profile can
// never leak in.
func Config() aws.Config {
	return aws.Config{
		Region:     Region,
		HTTPClient: HTTPClient(),
		// Letters and digits only, like a real access key id, so any server or tool that
		// checks its shape accepts it.
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "fourlanes", SecretAccessKey: "local", Source: "localaws"}, nil
		}),
	}
}

// HTTPClient returns the SDK's default HTTP client with one change: the transport gets its
// own copy of each request body. smithy-go closes the request body as soon as Do returns;
// when a fast server's response beats the transport's write loop to its final read of the
// body (net/http reads once more to check for EOF), that read reports io.EOF from the
// closed body, the write loop tears the connection down, and a 200 response still being
// read fails: "deserialization failed ... use of closed network connection"
// (aws/aws-sdk-go-v2#2737). The SDK's default retryer hides it, but a client with retries
// off fails, and a retried non-idempotent call can apply twice. A server cannot prevent
// it: the race is between two of the client's goroutines after the server has the whole
// body. Measured against twin/ddb (its TestLargeResponsesNoRetries): 7 in
// 8,000 Queries of a 20 KB page failed without this, none in 6,000 with it.
func HTTPClient() aws.HTTPClient {
	return ownBodyClient{awshttp.NewBuildableClient()}
}

type ownBodyClient struct{ c aws.HTTPClient }

func (o ownBodyClient) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r = r.WithContext(r.Context()) // the caller's request keeps its own body
		// A *bytes.Reader behind io.NopCloser is also what net/http recognises as
		// in-memory, so it writes small requests in one packet.
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	return o.c.Do(r)
}

// NewDynamoDB returns a DynamoDB client for the local DynamoDB at endpoint. The SDK checks
// every response's x-amz-crc32, as it does against AWS.
func NewDynamoDB(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.NewFromConfig(Config(), append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
	}}, optFns...)...)
}

// NewDynamoDBStreams returns a DynamoDB Streams client for the local DynamoDB at endpoint
// (it serves both APIs on one port, as twin/ddb does).
func NewDynamoDBStreams(endpoint string, optFns ...func(*dynamodbstreams.Options)) *dynamodbstreams.Client {
	return dynamodbstreams.NewFromConfig(Config(), append([]func(*dynamodbstreams.Options){func(o *dynamodbstreams.Options) {
		o.BaseEndpoint = aws.String(endpoint)
	}}, optFns...)...)
}

// NewSQS returns an SQS client for the ElasticMQ at endpoint.
func NewSQS(endpoint string, optFns ...func(*sqs.Options)) *sqs.Client {
	return sqs.NewFromConfig(Config(), append([]func(*sqs.Options){func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(endpoint)
	}}, optFns...)...)
}
