// Package localaws is what the runtime's own tests need of the local AWS
// stand-ins the project tests against (its own DynamoDB, with its Streams API,
// and ElasticMQ for SQS): SDK clients configured for them, fresh tables and
// queues per test, and fault rules on the DynamoDB's admin API.
//
// The servers themselves live in the twin module
// (github.com/fourlanes/fourlanes/twin/localaws), which this module must not
// depend on. Tests resolve an endpoint in this order:
//
//  1. FOURLANES_DYNAMODB_ENDPOINT / FOURLANES_SQS_ENDPOINT, which `make test`
//     sets (scripts/with-servers.sh) so one pair of servers serves the whole run;
//  2. in a test binary that imports the twin's localaws (which calls
//     UseServers), one server per test binary, started on first use and stopped
//     by Main when the binary's tests are done;
//  3. otherwise the test is skipped, or fails when CI=true.
//
// A package with integration tests writes:
//
//	func TestMain(m *testing.M) { localaws.Main(m) }
package localaws
