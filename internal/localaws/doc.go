// Package localaws runs the two local AWS stand-ins this project tests against,
// the project's own DynamoDB (internal/twin/ddb, with its Streams API) and
// ElasticMQ (SQS, FIFO included), and hands out SDK clients configured for them.
//
// DynamoDB runs in the calling process and needs nothing installed. ElasticMQ
// comes from the repository's .cache folder, which scripts/deps.sh fills
// (`make deps`). Each server is a fresh in-memory instance on a free 127.0.0.1
// port; Stop stops it, and it dies with the process that started it.
//
// Tests use the helpers DynamoDB, DynamoDBStreams and SQS. They resolve an
// endpoint in this order:
//
//  1. FOURLANES_DYNAMODB_ENDPOINT / FOURLANES_SQS_ENDPOINT, which `make test`
//     sets so one pair of servers serves the whole run;
//  2. one server per test binary, started on first use (ElasticMQ only when the
//     .cache holds it), and stopped by Main when the binary's tests are done
//     (without Main it still dies with the test binary, as every server started
//     here does);
//  3. otherwise the test is skipped, or fails when CI=true.
//
// A package with integration tests writes:
//
//	func TestMain(m *testing.M) { localaws.Main(m) }
package localaws
