package twin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/twin/cfn"
)

// table is a local DynamoDB table.
type table struct {
	id        string
	name      string
	arn       string
	streamARN string // empty without a stream
}

// createTable creates the table on the local DynamoDB: keys, secondary
// indexes, stream (view type) and TTL. Billing, encryption and point-in-time
// recovery are AWS-side settings the twin has no use for. A table of that
// name already there (a DynamoDB that keeps its state across restarts, as
// `fourlanes dev`'s does) is taken as it is when its keys, indexes and
// stream match the template's, as a CloudFormation update that changes
// nothing would leave it.
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
	var desc *ddbtypes.TableDescription
	out, err := tw.ddb.CreateTable(ctx, in)
	if inUse := (*ddbtypes.ResourceInUseException)(nil); errors.As(err, &inUse) {
		if desc, err = tw.adoptTable(ctx, in); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("create table %s: %w", name, err)
	} else {
		desc = out.TableDescription
	}
	w := dynamodb.NewTableExistsWaiter(tw.ddb, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 200*time.Millisecond
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
		return nil, fmt.Errorf("table %s active: %w", name, err)
	}
	if ttl := p.TimeToLiveSpecification; ttl != nil && bool(ttl.Enabled) && ttl.AttributeName != "" && !tw.ttlEnabled(ctx, name, ttl.AttributeName) {
		_, err := tw.ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               aws.String(name),
			TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(ttl.AttributeName), Enabled: aws.Bool(true)},
		})
		if err != nil {
			return nil, fmt.Errorf("table %s TTL: %w", name, err)
		}
	}
	tb := &table{id: res.LogicalID, name: name, arn: arnOf("dynamodb", "table/"+name), streamARN: aws.ToString(desc.LatestStreamArn)}
	attrs := map[string]any{"Arn": tb.arn}
	if tb.streamARN != "" {
		// AWS::DynamoDB::Table calls it StreamArn; so does GlobalTable.
		attrs["StreamArn"] = tb.streamARN
		attrs["LatestStreamArn"] = tb.streamARN
	}
	tw.log.Info("twin: table", obs.KeyLogicalID, res.LogicalID, obs.KeyName, name, obs.KeyStream, tb.streamARN != "")
	return &resource{id: res.LogicalID, typ: res.Type, ref: name, attrs: attrs, table: tb}, nil
}

// adoptTable returns the description of the table that in names, already on
// the server, when it matches in (keys, indexes, stream view type);
// otherwise an error that says how to start afresh.
func (tw *Twin) adoptTable(ctx context.Context, in *dynamodb.CreateTableInput) (*ddbtypes.TableDescription, error) {
	name := aws.ToString(in.TableName)
	out, err := tw.ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: in.TableName})
	if err != nil {
		return nil, fmt.Errorf("table %s exists: %w", name, err)
	}
	d := out.Table
	var wantIdx, gotIdx []string
	for _, g := range in.GlobalSecondaryIndexes {
		wantIdx = append(wantIdx, "G:"+aws.ToString(g.IndexName)+keyString(g.KeySchema))
	}
	for _, l := range in.LocalSecondaryIndexes {
		wantIdx = append(wantIdx, "L:"+aws.ToString(l.IndexName)+keyString(l.KeySchema))
	}
	for _, g := range d.GlobalSecondaryIndexes {
		gotIdx = append(gotIdx, "G:"+aws.ToString(g.IndexName)+keyString(g.KeySchema))
	}
	for _, l := range d.LocalSecondaryIndexes {
		gotIdx = append(gotIdx, "L:"+aws.ToString(l.IndexName)+keyString(l.KeySchema))
	}
	slices.Sort(wantIdx)
	slices.Sort(gotIdx)
	var wantView, gotView ddbtypes.StreamViewType
	if in.StreamSpecification != nil {
		wantView = in.StreamSpecification.StreamViewType
	}
	if s := d.StreamSpecification; s != nil && aws.ToBool(s.StreamEnabled) {
		gotView = s.StreamViewType
	}
	var diff string
	switch {
	case keyString(in.KeySchema) != keyString(d.KeySchema):
		diff = fmt.Sprintf("key schema %s, the template's %s", keyString(d.KeySchema), keyString(in.KeySchema))
	case !slices.Equal(wantIdx, gotIdx):
		diff = fmt.Sprintf("indexes %v, the template's %v", gotIdx, wantIdx)
	case wantView != gotView:
		diff = fmt.Sprintf("stream view type %q, the template's %q", gotView, wantView)
	}
	if diff != "" {
		return nil, fmt.Errorf("table %s is already on the local DynamoDB with %s: remove the DynamoDB's data folder (or the table) to start afresh", name, diff)
	}
	tw.log.Info("twin: table already there; keeping it", obs.KeyName, name)
	return d, nil
}

func keyString(ks []ddbtypes.KeySchemaElement) string {
	var b strings.Builder
	for _, k := range ks {
		fmt.Fprintf(&b, "(%s %s)", aws.ToString(k.AttributeName), k.KeyType)
	}
	return b.String()
}

// ttlEnabled reports whether the table's TTL is already on for attr (a table
// kept from an earlier run), where enabling it again would fail as on AWS.
func (tw *Twin) ttlEnabled(ctx context.Context, table, attr string) bool {
	out, err := tw.ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil || out.TimeToLiveDescription == nil {
		return false
	}
	d := out.TimeToLiveDescription
	return aws.ToString(d.AttributeName) == attr &&
		(d.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabled || d.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabling)
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
