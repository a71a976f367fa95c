// Package reminders is the library's DURABLE subscriber: for every loan event
// it sends the member one reminder (a due date on loan.opened, a thank-you on
// loan.returned), recorded in the backbone's state table so that a
// redelivery never sends twice. "Sending" is a log line: the example has no
// mail service.
package reminders

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/examples/library/loans"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Subscription is the name of reminders' one subscription.
const Subscription = "reminders.member"

// Module declares reminders' one subscription. DURABLE, because a reminder
// must not be lost; idempotent per event, because the lane delivers at least
// once.
var Module = catalog.Module[*Reminder]{
	Name: "reminders",
	Doc:  "Member reminders.",
	Subscribes: []catalog.Subscription[*Reminder]{
		{Name: Subscription, Types: "loan.*", Lane: catalog.Durable, Reads: []int{1},
			Doc: "One reminder per loan event, never sent twice.", Handler: (*Reminder).OnLoanEvent},
	},
}

// Sent is the line logged once per reminder sent.
const Sent = "reminder sent"

// StatePrefix starts the state-table key of each reminder sent:
// <StatePrefix><event id>, sort key StateSK.
const (
	StatePrefix = "reminders#"
	StateSK     = "sent"
)

// DB is the part of the DynamoDB client reminders uses.
type DB interface {
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

var _ DB = (*dynamodb.Client)(nil)

// Reminder is reminders' handler receiver.
type Reminder struct {
	DB         DB
	StateTable string
	Logger     *slog.Logger
	// Retention is how long a sent record is kept (default 30 days, as long
	// as a completed claim: longer than any redelivery).
	Retention time.Duration
}

// OnLoanEvent sends one reminder for the loan event e: it records the
// reminder under the event's id first (a conditional put), and logs Sent
// only when that record is new, so a redelivered event sends nothing.
func (r *Reminder) OnLoanEvent(ctx context.Context, e envelope.Envelope) error {
	subject, p, err := compose(e)
	if err != nil {
		return delivery.Permanent(err) // retrying cannot fix a payload
	}
	ret := r.Retention
	if ret <= 0 {
		ret = 30 * 24 * time.Hour
	}
	_, err = r.DB.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(r.StateTable),
		Item: map[string]types.AttributeValue{
			keys.AttrPK:        &types.AttributeValueMemberS{Value: StatePrefix + e.ID},
			keys.AttrSK:        &types.AttributeValueMemberS{Value: StateSK},
			"member":           &types.AttributeValueMemberS{Value: p.Member},
			"subject":          &types.AttributeValueMemberS{Value: subject},
			keys.AttrExpiresAt: &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(ret).Unix(), 10)},
		},
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": keys.AttrPK},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // sent by an earlier delivery
	}
	if err != nil {
		return fmt.Errorf("record reminder for %s: %w", e.ID, err)
	}
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	log.InfoContext(ctx, Sent, slog.String("event_id", e.ID), slog.String("tenant", e.TenantID),
		slog.String("loan_id", p.LoanID), slog.String("member", p.Member), slog.String("subject", subject))
	return nil
}

// compose decodes e into the reminder's subject and the loan it is about.
func compose(e envelope.Envelope) (string, loans.OpenedV1, error) {
	var p loans.OpenedV1 // loan.returned v1 has the same fields
	if e.SchemaVersion != 1 {
		return "", p, fmt.Errorf("no reminder for %s schema version %d", e.Type, e.SchemaVersion)
	}
	if err := e.DecodePayload(&p); err != nil {
		return "", p, err
	}
	switch e.Type {
	case loans.TypeOpened:
		return "Your copy of " + p.Book + " is due in three weeks", p, nil
	case loans.TypeReturned:
		return "Thank you for returning " + p.Book, p, nil
	}
	return "", p, fmt.Errorf("no reminder for %s", e.Type)
}
