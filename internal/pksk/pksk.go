// Package pksk builds the CreateTableInput of the tables infra/ deploys with
// string keys keys.AttrPK and keys.AttrSK (state, search, change feed), so
// their schema is written once; each owner exports it under its own name.
package pksk

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Table is an on-demand table called name keyed by pk (hash) and sk (range),
// both strings.
func Table(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(keys.AttrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(keys.AttrSK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(keys.AttrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(keys.AttrSK), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	}
}
