package localaws

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	ilocal "github.com/fourlanes/fourlanes/internal/localaws"
)

// A test binary that imports this package starts its own servers when the
// environment names none: our DynamoDB in the test's process, ElasticMQ as a
// child process (from ElasticMQLibDir).
func init() {
	ilocal.UseServers(starter(StartDynamoDB), starter(StartElasticMQ))
}

func starter(start func(context.Context) (*Server, error)) ilocal.Starter {
	return func(ctx context.Context) (string, func(), error) {
		s, err := start(ctx)
		if err != nil {
			return "", nil, err
		}
		return s.Endpoint, s.Stop, nil
	}
}

// What a Go test of any module needs of the local servers. Each resolves
// the run's servers: FOURLANES_DYNAMODB_ENDPOINT and FOURLANES_SQS_ENDPOINT
// when set, else one of each per test binary, started on first use and
// stopped by Main. A test that cannot get one is skipped, or fails when
// CI=true.

// Region and AccountID are what the local servers and their clients claim to be.
const (
	Region    = ilocal.Region
	AccountID = ilocal.AccountID
)

// Environment variables naming the run's servers.
const (
	EnvDynamoDBEndpoint = ilocal.EnvDynamoDBEndpoint
	EnvSQSEndpoint      = ilocal.EnvSQSEndpoint
)

// Fault is one rule of our DynamoDB's fault injection (InjectFault).
type Fault = ilocal.Fault

// Main runs a package's tests and stops the servers they started:
//
//	func TestMain(m *testing.M) { localaws.Main(m) }
func Main(m *testing.M) { ilocal.Main(m) }

// Run is Main for a TestMain with clean-up of its own: it returns the exit code.
func Run(m *testing.M) int { return ilocal.Run(m) }

// InCI reports whether CI=true: integration tests must run there, never skip.
func InCI() bool { return ilocal.InCI() }

// DynamoDBEndpoint and SQSEndpoint return the run's endpoints.
func DynamoDBEndpoint(t testing.TB) string { t.Helper(); return ilocal.DynamoDBEndpoint(t) }
func SQSEndpoint(t testing.TB) string      { t.Helper(); return ilocal.SQSEndpoint(t) }

// DynamoDB, DynamoDBStreams and SQS return clients for the run's servers.
func DynamoDB(t testing.TB) *dynamodb.Client { t.Helper(); return ilocal.DynamoDB(t) }
func DynamoDBStreams(t testing.TB) *dynamodbstreams.Client {
	t.Helper()
	return ilocal.DynamoDBStreams(t)
}
func SQS(t testing.TB) *sqs.Client { t.Helper(); return ilocal.SQS(t) }

// NewDynamoDB, NewDynamoDBStreams and NewSQS return clients for an endpoint,
// with dummy credentials and nothing read from the environment.
func NewDynamoDB(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return ilocal.NewDynamoDB(endpoint, optFns...)
}
func NewDynamoDBStreams(endpoint string, optFns ...func(*dynamodbstreams.Options)) *dynamodbstreams.Client {
	return ilocal.NewDynamoDBStreams(endpoint, optFns...)
}
func NewSQS(endpoint string, optFns ...func(*sqs.Options)) *sqs.Client {
	return ilocal.NewSQS(endpoint, optFns...)
}

// UniqueName returns a table or queue name no other test will use.
func UniqueName(t testing.TB, prefix string) string { t.Helper(); return ilocal.UniqueName(t, prefix) }

// CreateTable creates the table described by in, waits until it is ACTIVE and deletes
// it when the test ends.
func CreateTable(t testing.TB, client *dynamodb.Client, in *dynamodb.CreateTableInput) *ddbtypes.TableDescription {
	t.Helper()
	return ilocal.CreateTable(t, client, in)
}

// CreateQueue creates a queue and deletes it when the test ends (".fifo" added for a
// FIFO queue); it returns the queue URL.
func CreateQueue(t testing.TB, client *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	return ilocal.CreateQueue(t, client, name, attrs)
}

// QueueARN returns the ARN of the queue at url.
func QueueARN(t testing.TB, client *sqs.Client, url string) string {
	t.Helper()
	return ilocal.QueueARN(t, client, url)
}

// InjectFault arms f, which must name the test's own table, on the DynamoDB db talks to.
func InjectFault(t testing.TB, db *dynamodb.Client, f Fault) {
	t.Helper()
	ilocal.InjectFault(t, db, f)
}

// Config returns an aws.Config for the local servers: Region, dummy
// credentials and HTTPClient, nothing read from the environment.
func Config() aws.Config { return ilocal.Config() }

// HTTPClient is the HTTP client of Config.
func HTTPClient() aws.HTTPClient { return ilocal.HTTPClient() }
