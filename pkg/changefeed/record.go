package changefeed

import (
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// Stream event names.
const (
	EventInsert = "INSERT"
	EventModify = "MODIFY"
	EventRemove = "REMOVE"
)

// Record is one stream record, whichever API delivered it (a Lambda event
// source mapping, or GetRecords), with typed images.
type Record struct {
	EventID        string
	EventName      string // INSERT, MODIFY, REMOVE, or a name the SDK does not know
	SequenceNumber string
	StreamARN      string
	Created        time.Time // ApproximateCreationDateTime
	Keys           envelope.Item
	NewImage       envelope.Item // nil on a delete
	OldImage       envelope.Item // nil on an insert
	// UserType and UserPrincipal are the record's userIdentity: for a TTL
	// delete, "Service" and "dynamodb.amazonaws.com".
	UserType, UserPrincipal string
}

// Table returns the table name in the record's stream ARN.
func (r Record) Table() string { return TableOfStream(r.StreamARN) }

// TableOfStream returns the table name in a DynamoDB stream ARN
// (arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>), or "".
func TableOfStream(arn string) string {
	_, rest, ok := strings.Cut(arn, ":table/")
	if !ok {
		return ""
	}
	name, _, ok := strings.Cut(rest, "/stream/")
	if !ok {
		return ""
	}
	return name
}

// FromLambda converts a record as a Lambda event source mapping delivers it.
func FromLambda(r events.DynamoDBEventRecord) (Record, error) {
	out := Record{
		EventID: r.EventID, EventName: r.EventName, SequenceNumber: r.Change.SequenceNumber, StreamARN: r.EventSourceArn,
		Created: r.Change.ApproximateCreationDateTime.UTC(),
	}
	if r.Change.ApproximateCreationDateTime.IsZero() {
		out.Created = time.Time{}
	}
	if r.UserIdentity != nil {
		out.UserType, out.UserPrincipal = r.UserIdentity.Type, r.UserIdentity.PrincipalID
	}
	var err error
	if out.Keys, err = lambdaImage("Keys", r.Change.Keys); err != nil {
		return out, err
	}
	if out.NewImage, err = lambdaImage("NewImage", r.Change.NewImage); err != nil {
		return out, err
	}
	if out.OldImage, err = lambdaImage("OldImage", r.Change.OldImage); err != nil {
		return out, err
	}
	return out, nil
}

func lambdaImage(name string, img map[string]events.DynamoDBAttributeValue) (envelope.Item, error) {
	if img == nil {
		return nil, nil
	}
	it, err := envelope.ItemFromStreamImage(img)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return it, nil
}

// FromStreams converts a record read with the DynamoDB Streams API
// (GetRecords) from the stream streamARN.
func FromStreams(r streamtypes.Record, streamARN string) (Record, error) {
	out := Record{EventID: aws.ToString(r.EventID), EventName: string(r.EventName), StreamARN: streamARN}
	if r.UserIdentity != nil {
		out.UserType, out.UserPrincipal = aws.ToString(r.UserIdentity.Type), aws.ToString(r.UserIdentity.PrincipalId)
	}
	sr := r.Dynamodb
	if sr == nil {
		return out, fmt.Errorf("stream record %s has no dynamodb section", out.EventID)
	}
	out.SequenceNumber = aws.ToString(sr.SequenceNumber)
	if sr.ApproximateCreationDateTime != nil {
		out.Created = sr.ApproximateCreationDateTime.UTC()
	}
	var err error
	if out.Keys, err = streamsImage("Keys", sr.Keys); err != nil {
		return out, err
	}
	if out.NewImage, err = streamsImage("NewImage", sr.NewImage); err != nil {
		return out, err
	}
	if out.OldImage, err = streamsImage("OldImage", sr.OldImage); err != nil {
		return out, err
	}
	return out, nil
}

func streamsImage(name string, img map[string]streamtypes.AttributeValue) (envelope.Item, error) {
	if img == nil {
		return nil, nil
	}
	it, err := envelope.ItemFromStreamsSDK(img)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return it, nil
}

// ToLambda renders r as a Lambda event source mapping delivers it: the
// inverse of FromLambda (tests and the local twin build events with it).
func ToLambda(r Record) (events.DynamoDBEventRecord, error) {
	out := events.DynamoDBEventRecord{
		AWSRegion: regionOf(r.StreamARN), EventID: r.EventID, EventName: r.EventName, EventSource: "aws:dynamodb",
		EventVersion: "1.1", EventSourceArn: r.StreamARN,
		Change: events.DynamoDBStreamRecord{SequenceNumber: r.SequenceNumber, StreamViewType: "NEW_AND_OLD_IMAGES"},
	}
	if !r.Created.IsZero() {
		out.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: r.Created}
	}
	if r.UserType != "" || r.UserPrincipal != "" {
		out.UserIdentity = &events.DynamoDBUserIdentity{Type: r.UserType, PrincipalID: r.UserPrincipal}
	}
	var err error
	for _, x := range []struct {
		it  envelope.Item
		dst *map[string]events.DynamoDBAttributeValue
	}{{r.Keys, &out.Change.Keys}, {r.NewImage, &out.Change.NewImage}, {r.OldImage, &out.Change.OldImage}} {
		if x.it == nil {
			continue
		}
		if *x.dst, err = envelope.ToStreamImage(x.it); err != nil {
			return out, err
		}
	}
	return out, nil
}

func regionOf(arn string) string {
	parts := strings.SplitN(arn, ":", 5)
	if len(parts) < 5 {
		return ""
	}
	return parts[3]
}
