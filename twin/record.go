package twin

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// record is one DynamoDB stream record in the shape Lambda and Pipes hand
// to a function (the "Records" of a DynamoDB event; the elements of a Pipe's
// batch).
type record struct {
	Seq string
	// Arrival is the record's ApproximateCreationDateTime.
	Arrival time.Time
	// Seen estimates when the record was written: when the twin first read
	// it (it reads ahead within a poll interval), but never more than a
	// minute after Arrival, so a record read long after its write (by a
	// twin restarted on kept state, say) still shows its age. Arrival alone
	// is too coarse: AWS rounds it down to the second. Record ages and
	// iterator age use Seen.
	Seen      time.Time
	EventID   string
	EventName string
	Shard     string
	// JSON is the record as the function receives it.
	JSON json.RawMessage
	// Keys describes the item's key, for logs: tenant_id=t1 seq=4.
	Keys string
}

// newRecord converts a record read with the Streams API to Lambda's shape.
func newRecord(r streamtypes.Record, streamARN, shard string, readAt time.Time) (*record, error) {
	sr := r.Dynamodb
	if sr == nil {
		return nil, fmt.Errorf("stream record %s has no dynamodb field", aws.ToString(r.EventID))
	}
	dyn := map[string]any{
		"Keys":           attrMap(sr.Keys),
		"SequenceNumber": aws.ToString(sr.SequenceNumber),
		"SizeBytes":      aws.ToInt64(sr.SizeBytes),
		"StreamViewType": string(sr.StreamViewType),
	}
	var arrival time.Time
	if sr.ApproximateCreationDateTime != nil {
		arrival = *sr.ApproximateCreationDateTime
		dyn["ApproximateCreationDateTime"] = arrival.Unix()
	}
	if sr.NewImage != nil {
		dyn["NewImage"] = attrMap(sr.NewImage)
	}
	if sr.OldImage != nil {
		dyn["OldImage"] = attrMap(sr.OldImage)
	}
	doc := map[string]any{
		"eventID":        aws.ToString(r.EventID),
		"eventName":      string(r.EventName),
		"eventVersion":   aws.ToString(r.EventVersion),
		"eventSource":    aws.ToString(r.EventSource),
		"awsRegion":      aws.ToString(r.AwsRegion),
		"dynamodb":       dyn,
		"eventSourceARN": streamARN,
	}
	if r.UserIdentity != nil {
		doc["userIdentity"] = map[string]any{"type": aws.ToString(r.UserIdentity.Type), "principalId": aws.ToString(r.UserIdentity.PrincipalId)}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("stream record %s: %w", aws.ToString(r.EventID), err)
	}
	seen := readAt
	if !arrival.IsZero() && seen.Sub(arrival) > time.Minute {
		seen = arrival.Add(time.Minute)
	}
	return &record{
		Seq: aws.ToString(sr.SequenceNumber), Arrival: arrival, Seen: seen, EventID: aws.ToString(r.EventID),
		EventName: string(r.EventName), Shard: shard, JSON: b, Keys: keySummary(sr.Keys),
	}, nil
}

// attrMap renders attribute values in DynamoDB's JSON form ({"S": "x"}).
func attrMap(m map[string]streamtypes.AttributeValue) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = attrValue(v)
	}
	return out
}

func attrValue(v streamtypes.AttributeValue) map[string]any {
	switch x := v.(type) {
	case *streamtypes.AttributeValueMemberS:
		return map[string]any{"S": x.Value}
	case *streamtypes.AttributeValueMemberN:
		return map[string]any{"N": x.Value}
	case *streamtypes.AttributeValueMemberB:
		return map[string]any{"B": base64.StdEncoding.EncodeToString(x.Value)}
	case *streamtypes.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": x.Value}
	case *streamtypes.AttributeValueMemberNULL:
		return map[string]any{"NULL": x.Value}
	case *streamtypes.AttributeValueMemberSS:
		return map[string]any{"SS": nonNil(x.Value)}
	case *streamtypes.AttributeValueMemberNS:
		return map[string]any{"NS": nonNil(x.Value)}
	case *streamtypes.AttributeValueMemberBS:
		l := make([]string, len(x.Value))
		for i, b := range x.Value {
			l[i] = base64.StdEncoding.EncodeToString(b)
		}
		return map[string]any{"BS": l}
	case *streamtypes.AttributeValueMemberL:
		l := make([]any, len(x.Value))
		for i, e := range x.Value {
			l[i] = attrValue(e)
		}
		return map[string]any{"L": l}
	case *streamtypes.AttributeValueMemberM:
		return map[string]any{"M": attrMap(x.Value)}
	}
	return map[string]any{}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func keySummary(keys map[string]streamtypes.AttributeValue) string {
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, k := range names {
		var v string
		switch x := keys[k].(type) {
		case *streamtypes.AttributeValueMemberS:
			v = x.Value
		case *streamtypes.AttributeValueMemberN:
			v = x.Value
		default:
			v = fmt.Sprintf("%T", x)
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, " ")
}

// seqs lists the sequence numbers of recs.
func seqs(recs []*record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}
