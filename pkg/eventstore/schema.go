package eventstore

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TableSchema is the events table as infra/ deploys it (keys and stream),
// for tests and local runs that create the table themselves.
func TableSchema(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(keys.AttrTenant), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(keys.AttrSeq), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(keys.AttrTenant), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(keys.AttrSeq), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
		StreamSpecification: &types.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: types.StreamViewTypeNewAndOldImages,
		},
	}
}
