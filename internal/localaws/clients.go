package localaws

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Region and AccountID are what the local servers and their clients claim to be.
const (
	Region    = "us-east-1"
	AccountID = "000000000000"
)

// Config returns an aws.Config for the local servers: Region and static dummy credentials.
// It reads nothing from the environment, so a developer's AWS profile can never leak in.
func Config() aws.Config {
	return aws.Config{
		Region: Region,
		// Letters and digits only, like a real access key id, so any server or tool that
		// checks its shape accepts it.
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "fourlanes", SecretAccessKey: "local", Source: "localaws"}, nil
		}),
	}
}

// NewDynamoDB returns a DynamoDB client for the local DynamoDB at endpoint. The SDK checks
// every response's x-amz-crc32, as it does against AWS.
func NewDynamoDB(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.NewFromConfig(Config(), append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
	}}, optFns...)...)
}

// NewDynamoDBStreams returns a DynamoDB Streams client for the local DynamoDB at endpoint
// (it serves both APIs on one port, as internal/twin/ddb does).
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
