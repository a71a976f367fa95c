package eventstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Page is one page of a tenant's events in seq order.
type Page struct {
	Events []envelope.Envelope
	// Raw holds each event's item, parallel to Events, for callers that must
	// report on rows that do not decode (Events[i] is then the zero value and
	// Errs[i] says why).
	Raw  []map[string]types.AttributeValue
	Errs []error
	// Next is the seq to pass as after for the following page; 0 when done.
	Next int64
	// Reads counts the items DynamoDB returned for this page.
	Reads int
}

// Events reads up to limit of tenant's events with seq > after, in seq order,
// with strongly consistent reads. A row that does not decode is returned in
// Raw with its error rather than failing the page, so a verifier can name it.
func (s *Store) Events(ctx context.Context, tenant string, after int64, limit int32) (Page, error) {
	return s.events(ctx, tenant, after, limit, true)
}

func (s *Store) events(ctx context.Context, tenant string, after int64, limit int32, decode bool) (Page, error) {
	if limit <= 0 {
		limit = 500
	}
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(s.cfg.Table),
		ConsistentRead:         aws.Bool(true),
		KeyConditionExpression: aws.String("#t = :t AND #s > :s"),
		ExpressionAttributeNames: map[string]string{
			"#t": keys.AttrTenant, "#s": keys.AttrSeq,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t": &types.AttributeValueMemberS{Value: tenant},
			":s": &types.AttributeValueMemberN{Value: strconv.FormatInt(after, 10)},
		},
		Limit: aws.Int32(limit),
	})
	if err != nil {
		return Page{}, fmt.Errorf("read events of tenant %q after seq %d: %w", tenant, after, err)
	}
	p := Page{Reads: len(out.Items)}
	if !decode {
		p.Raw = out.Items
	}
	for _, it := range out.Items {
		if !decode {
			break
		}
		e, err := envelope.FromItem(it)
		p.Events = append(p.Events, e)
		p.Raw = append(p.Raw, it)
		p.Errs = append(p.Errs, err)
	}
	if out.LastEvaluatedKey != nil {
		n, ok := out.LastEvaluatedKey[keys.AttrSeq].(*types.AttributeValueMemberN)
		if !ok {
			return p, fmt.Errorf("read events of tenant %q: page key has no seq", tenant)
		}
		if p.Next, err = strconv.ParseInt(n.Value, 10, 64); err != nil {
			return p, fmt.Errorf("read events of tenant %q: page key seq %q: %w", tenant, n.Value, err)
		}
	}
	return p, nil
}

// EventRows is Events without decoding: p.Raw holds the rows, and
// p.Events and p.Errs are nil, for a verifier that checks rows in place
// (chain.Verifier.NextItem) and decodes only those it must.
func (s *Store) EventRows(ctx context.Context, tenant string, after int64, limit int32) (Page, error) {
	return s.events(ctx, tenant, after, limit, false)
}

// AllEvents reads every event of tenant in seq order. For tests and small
// tenants; reconcile pages with Events.
func (s *Store) AllEvents(ctx context.Context, tenant string) ([]envelope.Envelope, error) {
	var all []envelope.Envelope
	after := int64(0)
	for {
		p, err := s.Events(ctx, tenant, after, 1000)
		if err != nil {
			return nil, err
		}
		for i, e := range p.Events {
			if p.Errs[i] != nil {
				return nil, fmt.Errorf("event row of tenant %q: %w", tenant, p.Errs[i])
			}
			all = append(all, e)
		}
		if p.Next == 0 {
			return all, nil
		}
		after = p.Next
	}
}

// Tenants lists tenants that have a head row, a page at a time: pass the
// returned cursor back to continue; "" means done.
func (s *Store) Tenants(ctx context.Context, cursor string, limit int32) ([]string, string, error) {
	in := &dynamodb.ScanInput{
		TableName:                aws.String(s.cfg.Table),
		FilterExpression:         aws.String("#s = :h"),
		ProjectionExpression:     aws.String("#t"),
		ExpressionAttributeNames: map[string]string{"#s": keys.AttrSeq, "#t": keys.AttrTenant},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":h": &types.AttributeValueMemberN{Value: strconv.Itoa(keys.HeadSeq)},
		},
	}
	if limit > 0 {
		in.Limit = aws.Int32(limit)
	}
	if cursor != "" {
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			keys.AttrTenant: &types.AttributeValueMemberS{Value: cursor},
			keys.AttrSeq:    &types.AttributeValueMemberN{Value: strconv.Itoa(keys.HeadSeq)},
		}
	}
	out, err := s.db.Scan(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("list tenants: %w", err)
	}
	var ts []string
	for _, it := range out.Items {
		if t, ok := it[keys.AttrTenant].(*types.AttributeValueMemberS); ok {
			ts = append(ts, t.Value)
		}
	}
	next := ""
	if out.LastEvaluatedKey != nil {
		if t, ok := out.LastEvaluatedKey[keys.AttrTenant].(*types.AttributeValueMemberS); ok {
			next = t.Value
		}
	}
	return ts, next, nil
}
