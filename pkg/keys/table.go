package keys

import (
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// PKSKTable is the CreateTableInput of an on-demand table called name keyed
// by AttrPK (hash) and AttrSK (range), both strings: the schema of the state,
// search and change-feed tables infra/ deploys, written once here. Each
// owner exports it under its own name (delivery.StateTableSchema, …).
func PKSKTable(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(AttrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrSK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(AttrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(AttrSK), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	}
}

// KeyString renders an item's key (its string, number and binary
// attributes, in name order) as one string, for grouping or set membership
// by item.
func KeyString(k map[string]types.AttributeValue) string {
	names := make([]string, 0, len(k))
	for n := range k {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte('=')
		switch v := k[n].(type) {
		case *types.AttributeValueMemberS:
			b.WriteString("S:" + v.Value)
		case *types.AttributeValueMemberN:
			b.WriteString("N:" + v.Value)
		case *types.AttributeValueMemberB:
			b.WriteString(fmt.Sprintf("B:%x", v.Value))
		}
		b.WriteByte(0)
	}
	return b.String()
}
