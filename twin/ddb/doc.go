// Package ddb is the twin's own DynamoDB: a server speaking the DynamoDB and
// DynamoDB Streams JSON 1.0 wire protocols (X-Amz-Target DynamoDB_20120810.* and
// DynamoDBStreams_20120810.*), so aws-sdk-go-v2, boto3 and the AWS CLI work against
// it unchanged. It serves tables with their key schema and secondary indexes (GSIs
// created and deleted online, index.go), the item, batch and transaction
// operations, the full expression grammar, streams with shards and retention, TTL,
// consumed capacity by AWS's size rules, and fault injection for tests. It runs
// in-process (tests, the twin) or standalone (`fourlanes dynamodb -listen ADDR
// [-data DIR]`); with a DataDir it keeps a write-ahead log and snapshots (wal.go).
// Where it stands against AWS, operation by operation: docs/dynamodb-compatibility.md.
//
// Behaviour follows AWS's documentation, cited beside the code and in the parity
// suite (parity_test.go) and the conformance suite (conformance_test.go). Where AWS
// leaves something unspecified, the choice is written down where it is made.
package ddb
