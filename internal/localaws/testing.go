package localaws

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Environment variables naming endpoints that tests use instead of starting their own servers.
// `make test` sets both for the whole run.
const (
	EnvDynamoDBEndpoint = "FOURLANES_DYNAMODB_ENDPOINT"
	EnvSQSEndpoint      = "FOURLANES_SQS_ENDPOINT"
)

// ErrNotInstalled reports that a server (or what it needs, Java) is missing.
var ErrNotInstalled = errors.New("not installed")

// Starter starts a local server for the tests of one binary and returns its
// endpoint and how to stop it. A starter that cannot run here (nothing
// installed) returns an error wrapping ErrNotInstalled: the test is then
// skipped, or fails when CI=true.
type Starter func(ctx context.Context) (endpoint string, stop func(), err error)

// lazyServer is one server shared by the tests of one test binary, started on first use.
type lazyServer struct {
	env   string
	what  string
	start Starter // nil: only the environment variable names one

	once     sync.Once
	stopFn   func()
	endpoint string
	err      error
}

var (
	sharedDynamoDB = &lazyServer{env: EnvDynamoDBEndpoint, what: "DynamoDB"}
	sharedSQS      = &lazyServer{env: EnvSQSEndpoint, what: "SQS (ElasticMQ)"}
)

// UseServers makes the tests of this binary start their own servers when the
// environment names none: the twin module's localaws package registers its
// in-process DynamoDB and its ElasticMQ so. Without it (the runtime module's
// own tests, which must not depend on the twin) the servers come only from
// the environment, as `make test` sets it.
func UseServers(dynamoDB, sqs Starter) {
	sharedDynamoDB.start, sharedSQS.start = dynamoDB, sqs
}

func (l *lazyServer) resolve(t testing.TB) string {
	t.Helper()
	if e := os.Getenv(l.env); e != "" {
		return e
	}
	l.once.Do(func() {
		if l.start == nil {
			l.err = fmt.Errorf("no %s: set %s (scripts/with-servers.sh does, as `make test` runs it): %w", l.what, l.env, ErrNotInstalled)
			return
		}
		l.endpoint, l.stopFn, l.err = l.start(context.Background())
	})
	switch {
	case l.err == nil:
		return l.endpoint
	case !errors.Is(l.err, ErrNotInstalled):
		t.Fatalf("start local server: %v", l.err)
	case InCI():
		t.Fatalf("integration test cannot run and CI=true forbids skipping it: %v", l.err)
	default:
		t.Skipf("skipping integration test: %v", l.err)
	}
	return ""
}

func (l *lazyServer) stop() {
	if l.stopFn != nil {
		l.stopFn()
	}
}

// InCI reports whether CI=true (or another true value): integration tests must run there,
// never skip. It is the project's one test of it.
func InCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// Main runs the tests of a package and then stops the servers its tests started.
// Use it as the package's TestMain:
//
//	func TestMain(m *testing.M) { localaws.Main(m) }
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run runs the package's tests, stops the servers they started and returns the exit
// code, for a TestMain with clean-up of its own to do before os.Exit.
func Run(m *testing.M) int {
	code := m.Run()
	sharedDynamoDB.stop()
	sharedSQS.stop()
	return code
}

// DynamoDBEndpoint returns the endpoint of this test run's DynamoDB: the one `make test`
// exports, else one this test binary starts once (see UseServers).
func DynamoDBEndpoint(t testing.TB) string {
	t.Helper()
	return sharedDynamoDB.resolve(t)
}

// SQSEndpoint returns the endpoint of this test run's ElasticMQ: the one `make test`
// exports, else one this test binary starts once (see UseServers; skipped without one,
// failed when CI=true).
func SQSEndpoint(t testing.TB) string {
	t.Helper()
	return sharedSQS.resolve(t)
}

// DynamoDB returns a DynamoDB client for this test run's DynamoDB (see the package doc).
func DynamoDB(t testing.TB) *dynamodb.Client {
	t.Helper()
	return NewDynamoDB(sharedDynamoDB.resolve(t))
}

// DynamoDBStreams returns a DynamoDB Streams client for the same DynamoDB as DynamoDB.
func DynamoDBStreams(t testing.TB) *dynamodbstreams.Client {
	t.Helper()
	return NewDynamoDBStreams(sharedDynamoDB.resolve(t))
}

// SQS returns an SQS client for this test run's ElasticMQ (see the package doc),
// skipping the test when there is none and CI is not set.
func SQS(t testing.TB) *sqs.Client {
	t.Helper()
	return NewSQS(sharedSQS.resolve(t))
}

// maxNameLen keeps a name valid for an SQS FIFO queue (80 characters, ".fifo" included);
// DynamoDB table names allow more.
const maxNameLen = 80 - len(".fifo")

// UniqueName returns a name for a table or queue that no other test, in this binary or in
// another sharing the same servers, will use: prefix, the test's name, and 48 random bits,
// in the characters both DynamoDB and SQS accept.
func UniqueName(t testing.TB, prefix string) string {
	t.Helper()
	suffix := fmt.Sprintf("-%012x", rand.Uint64()>>16)
	base := sanitize(prefix + "-" + t.Name())
	if len(base) > maxNameLen-len(suffix) {
		base = base[:maxNameLen-len(suffix)]
	}
	return base + suffix
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '-'
	}, s)
}

// CreateTable creates the table described by in, waits until it is ACTIVE, and deletes it when
// the test ends. A nil TableName gets a UniqueName; an unset billing mode becomes on-demand.
// It returns the table's description (LatestStreamArn is there when in enables a stream).
func CreateTable(t testing.TB, client *dynamodb.Client, in *dynamodb.CreateTableInput) *ddbtypes.TableDescription {
	t.Helper()
	ctx := context.Background()
	input := *in
	if input.TableName == nil {
		input.TableName = aws.String(UniqueName(t, "tbl"))
	}
	if input.BillingMode == "" && input.ProvisionedThroughput == nil {
		input.BillingMode = ddbtypes.BillingModePayPerRequest
	}
	name := *input.TableName
	if _, err := client.CreateTable(ctx, &input); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	t.Cleanup(func() {
		// Not t.Context(): it is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		if rnf := (*ddbtypes.ResourceNotFoundException)(nil); err != nil && !errors.As(err, &rnf) {
			t.Errorf("delete table %s: %v", name, err)
		}
	})
	w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, 500*time.Millisecond
	})
	out, err := w.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute)
	if err != nil {
		t.Fatalf("wait for table %s to be ACTIVE: %v", name, err)
	}
	return out.Table
}

// CreateQueue creates an SQS queue named name with attrs and deletes it when the test ends.
// With attrs["FifoQueue"] == "true", ".fifo" is appended to name if missing.
// It returns the queue URL.
func CreateQueue(t testing.TB, client *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	if attrs["FifoQueue"] == "true" && !strings.HasSuffix(name, ".fifo") {
		name += ".fifo"
	}
	out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	url := aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
		if gone := (*sqstypes.QueueDoesNotExist)(nil); err != nil && !errors.As(err, &gone) {
			t.Errorf("delete queue %s: %v", name, err)
		}
	})
	return url
}

// QueueARN returns the ARN of the queue at url, as a redrive policy or an event source names it.
func QueueARN(t testing.TB, client *sqs.Client, url string) string {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatalf("queue ARN of %s: %v", url, err)
	}
	return out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
}
