package twin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/internal/twin/cfn"
)

// table is a local DynamoDB table.
type table struct {
	id        string
	name      string
	arn       string
	streamARN string // empty without a stream
}

// createTable creates the table on DynamoDB Local: keys, secondary indexes,
// stream (view type) and TTL. Billing, encryption and point-in-time
// recovery are AWS-side settings DynamoDB Local has no use for.
func (tw *Twin) createTable(ctx context.Context, res *cfn.Resource) (*resource, error) {
	var p cfn.TableProps
	if err := tw.rv.Decode(res, &p, "TableName", "KeySchema", "AttributeDefinitions", "GlobalSecondaryIndexes",
		"LocalSecondaryIndexes", "StreamSpecification", "TimeToLiveSpecification"); err != nil {
		return nil, err
	}
	if len(p.KeySchema) == 0 {
		return nil, errors.New("no KeySchema")
	}
	name := tw.name(res.LogicalID, 255)
	if p.TableName != "" {
		name = tw.cfg.StackName + "-" + p.TableName
	}
	in := &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: ddbtypes.BillingModePayPerRequest}
	for _, a := range p.AttributeDefinitions {
		in.AttributeDefinitions = append(in.AttributeDefinitions, ddbtypes.AttributeDefinition{
			AttributeName: aws.String(a.AttributeName), AttributeType: ddbtypes.ScalarAttributeType(a.AttributeType),
		})
	}
	in.KeySchema = keySchema(p.KeySchema)
	for _, g := range p.GlobalSecondaryIndexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, ddbtypes.GlobalSecondaryIndex{
			IndexName: aws.String(g.IndexName), KeySchema: keySchema(g.KeySchema), Projection: projection(g.Projection),
		})
	}
	for _, l := range p.LocalSecondaryIndexes {
		in.LocalSecondaryIndexes = append(in.LocalSecondaryIndexes, ddbtypes.LocalSecondaryIndex{
			IndexName: aws.String(l.IndexName), KeySchema: keySchema(l.KeySchema), Projection: projection(l.Projection),
		})
	}
	if s := p.StreamSpecification; s != nil && s.StreamViewType != "" && (s.StreamEnabled == nil || bool(*s.StreamEnabled)) {
		in.StreamSpecification = &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewType(s.StreamViewType)}
	}
	out, err := tw.ddb.CreateTable(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("create table %s: %w", name, err)
	}
	w := dynamodb.NewTableExistsWaiter(tw.ddb, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 200*time.Millisecond
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
		return nil, fmt.Errorf("table %s active: %w", name, err)
	}
	if ttl := p.TimeToLiveSpecification; ttl != nil && bool(ttl.Enabled) && ttl.AttributeName != "" {
		_, err := tw.ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               aws.String(name),
			TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(ttl.AttributeName), Enabled: aws.Bool(true)},
		})
		if err != nil {
			return nil, fmt.Errorf("table %s TTL: %w", name, err)
		}
	}
	tb := &table{id: res.LogicalID, name: name, arn: arnOf("dynamodb", "table/"+name), streamARN: aws.ToString(out.TableDescription.LatestStreamArn)}
	attrs := map[string]any{"Arn": tb.arn}
	if tb.streamARN != "" {
		// AWS::DynamoDB::Table calls it StreamArn; so does GlobalTable.
		attrs["StreamArn"] = tb.streamARN
		attrs["LatestStreamArn"] = tb.streamARN
	}
	tw.log.Info("twin: table", "logical_id", res.LogicalID, "name", name, "stream", tb.streamARN != "")
	return &resource{id: res.LogicalID, typ: res.Type, ref: name, attrs: attrs, table: tb}, nil
}

func keySchema(ks []cfn.KeyElement) []ddbtypes.KeySchemaElement {
	out := make([]ddbtypes.KeySchemaElement, len(ks))
	for i, k := range ks {
		out[i] = ddbtypes.KeySchemaElement{AttributeName: aws.String(k.AttributeName), KeyType: ddbtypes.KeyType(k.KeyType)}
	}
	return out
}

func projection(p cfn.Projection) *ddbtypes.Projection {
	pt := p.ProjectionType
	if pt == "" {
		pt = string(ddbtypes.ProjectionTypeAll)
	}
	out := &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionType(pt)}
	if len(p.NonKeyAttributes) > 0 {
		out.NonKeyAttributes = p.NonKeyAttributes
	}
	return out
}

// tableByStream returns the table whose stream is arn.
func (tw *Twin) tableByStream(arn string) *table {
	for _, r := range tw.resources {
		if r.table != nil && r.table.streamARN == arn {
			return r.table
		}
	}
	return nil
}

// TableName returns the local name of the table with logical ID id.
func (tw *Twin) TableName(id string) (string, error) {
	r, err := tw.lookup(id, cfn.TypeTable, cfn.TypeGlobalTable)
	if err != nil {
		return "", err
	}
	return r.table.name, nil
}

// StreamARN returns the local stream ARN of the table with logical ID id.
func (tw *Twin) StreamARN(id string) (string, error) {
	r, err := tw.lookup(id, cfn.TypeTable, cfn.TypeGlobalTable)
	if err != nil {
		return "", err
	}
	if r.table.streamARN == "" {
		return "", fmt.Errorf("twin: table %s has no stream", id)
	}
	return r.table.streamARN, nil
}
