package tamper

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Changes to the state table that are findings. The state table is updated
// by design, but three kinds of row are deleted only by TTL or, for a dead
// letter, by its own resolution: deleting one by hand erases an undelivered
// event (a dead letter), or makes dlq-repair deliver again what was
// delivered (a claim or a watermark: what a point-in-time restore of the
// table does too).
const (
	// DeadLetterRemoved: a dead letter was deleted while its claim entry
	// does not say completed (or could not be read).
	DeadLetterRemoved Change = "dead_letter_removed"
	// ClaimRemoved: an event's claim item was deleted other than by TTL.
	ClaimRemoved Change = "claim_removed"
	// WatermarkRemoved: a delivery watermark was deleted.
	WatermarkRemoved Change = "watermark_removed"
)

// ttlPrincipal is the userIdentity of the REMOVE records that TTL makes
// (DynamoDB Developer Guide, "DynamoDB Streams and Time to Live"): type
// Service, principalId dynamodb.amazonaws.com. No caller can make a delete
// carry it.
const ttlPrincipal = "Service:dynamodb.amazonaws.com"

// ItemReader reads one state-table item (the claim item of a deleted dead
// letter), consistently.
type ItemReader interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// InspectState decides whether one stream record of the state table is a
// protected row deleted. A dead letter's delete is honest only when its
// claim entry says completed (delivery.DynamoStore.Resolve marks it and
// deletes the dead letter in one transaction): InspectState reads the claim
// item with claims from table, and an error reading it is a finding too.
func InspectState(ctx context.Context, raw json.RawMessage, claims ItemReader, table string) (Finding, bool) {
	var rec events.DynamoDBEventRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		var head struct {
			EventID   string `json:"eventID"`
			EventName string `json:"eventName"`
		}
		_ = json.Unmarshal(raw, &head)
		if head.EventName == "INSERT" || head.EventName == "MODIFY" {
			return Finding{}, false
		}
		return Finding{Change: Unreadable, EventName: head.EventName, EventID: head.EventID,
			What: "state-table stream record does not decode: " + err.Error()}, true
	}
	if rec.EventName != "REMOVE" {
		return Finding{}, false
	}
	f := Finding{EventName: rec.EventName, EventID: rec.EventID, StreamSeq: rec.Change.SequenceNumber}
	if u := rec.UserIdentity; u != nil {
		f.Principal = u.Type + ":" + u.PrincipalID
	}
	if f.Principal == ttlPrincipal {
		return Finding{}, false
	}
	pk, okPK := rec.Change.Keys[keys.AttrPK]
	sk, okSK := rec.Change.Keys[keys.AttrSK]
	if !okPK || !okSK || pk.DataType() != events.DataTypeString || sk.DataType() != events.DataTypeString {
		f.Change, f.What = Unreadable, fmt.Sprintf("state-table REMOVE whose key has no string %s and %s", keys.AttrPK, keys.AttrSK)
		return f, true
	}
	f.Seq = sk.String()
	switch p := pk.String(); {
	case strings.HasPrefix(p, keys.StateDeadPrefix):
		f.Tenant = strings.TrimPrefix(p, keys.StateDeadPrefix)
		eventID, sub, _ := strings.Cut(sk.String(), ":")
		why, honest := resolved(ctx, claims, table, eventID, sub)
		if honest {
			return Finding{}, false
		}
		f.Change, f.What = DeadLetterRemoved, fmt.Sprintf("dead letter of event %s for subscription %s deleted, but %s", eventID, sub, why)
	case strings.HasPrefix(p, keys.StateEventClaimPrefix):
		f.Tenant = str(rec.Change.OldImage, keys.AttrTenant)
		f.Change, f.What = ClaimRemoved, fmt.Sprintf("claim item of event %s deleted before its TTL (a redelivery would run its subscriptions again)", strings.TrimPrefix(p, keys.StateEventClaimPrefix))
	case strings.HasPrefix(p, keys.StateWatermarkPrefix):
		f.Tenant = strings.TrimPrefix(p, keys.StateWatermarkPrefix)
		f.Change, f.What = WatermarkRemoved, fmt.Sprintf("delivery watermark of subscription %s deleted", sk.String())
	default:
		return Finding{}, false
	}
	return f, true
}

// resolved reports whether the claim entry of (eventID, sub) says
// completed, and if not, why not.
func resolved(ctx context.Context, claims ItemReader, table, eventID, sub string) (string, bool) {
	if claims == nil || table == "" {
		return "tamper-watch has no state table to check its claim in", false
	}
	out, err := claims.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			keys.AttrPK: &types.AttributeValueMemberS{Value: keys.StateEventClaimPrefix + eventID},
			keys.AttrSK: &types.AttributeValueMemberS{Value: keys.StateEventClaimSK},
		}})
	if err != nil {
		return "its claim could not be read to check it was resolved: " + err.Error(), false
	}
	entry, ok := out.Item[keys.AttrSubClaimPrefix+sub].(*types.AttributeValueMemberM)
	if !ok {
		return "its event's claim item has no entry for the subscription", false
	}
	st, _ := entry.Value[keys.ClaimFieldStatus].(*types.AttributeValueMemberS)
	if st == nil || st.Value != keys.ClaimCompleted {
		status := "none"
		if st != nil {
			status = st.Value
		}
		return fmt.Sprintf("its claim entry is %s, not %s: the event was not delivered", status, keys.ClaimCompleted), false
	}
	return "", true
}

// tableOf is the table name in a stream ARN
// (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME/stream/LABEL).
func tableOf(streamARN string) string {
	_, rest, ok := strings.Cut(streamARN, ":table/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}
