// Package notifications emails customers about their orders (the example's
// DURABLE subscriber): one email per order event, recorded in the state table
// so that a redelivery never sends twice.
package notifications

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// Email is one message to a customer.
type Email struct {
	To, Subject, Body string
	// Key identifies the email ("<event_id>:order-email"); a mailer that
	// supports idempotency keys should pass it on.
	Key string
}

// Mailer sends email. Send must return an error only when the email was not
// accepted.
type Mailer interface {
	Send(ctx context.Context, m Email) error
}

// LogMailer "sends" by logging: the example has no mail service.
type LogMailer struct{ Logger *slog.Logger }

// Send logs m.
func (l LogMailer) Send(ctx context.Context, m Email) error {
	log := l.Logger
	if log == nil {
		log = slog.Default()
	}
	log.InfoContext(ctx, "email sent", slog.String("to", m.To), slog.String("subject", m.Subject), slog.String("key", m.Key))
	return nil
}

// SentLog records which emails went out. Reserve, MarkSent and Release are
// each one conditional write.
type SentLog interface {
	// Reserve records that the email keyed key is being sent by token. If an
	// earlier attempt holds it, ok is false and sent says whether that
	// attempt finished sending.
	Reserve(ctx context.Context, key, token string) (ok, sent bool, err error)
	MarkSent(ctx context.Context, key, token string) error
	// Release drops a reservation whose send failed, so a retry can send.
	Release(ctx context.Context, key, token string) error
}

// Notifier is notifications' handler receiver.
type Notifier struct {
	Mailer Mailer
	Sent   SentLog
	Logger *slog.Logger
}

// OnOrderEvent sends the customer one email for the order event e.
//
// Order of work: reserve the key, send, mark sent. A send that fails releases
// the reservation so the delivery's retry can send. A crash between sending
// and marking leaves the reservation: the next delivery does not send again
// (never twice) and logs that the email may be missing.
func (n *Notifier) OnOrderEvent(ctx context.Context, e envelope.Envelope) error {
	m, err := compose(e)
	if err != nil {
		return delivery.Permanent(err) // retrying cannot fix a payload
	}
	m.Key = e.ID + ":order-email"
	log := n.Logger
	if log == nil {
		log = slog.Default()
	}
	token := newToken()
	ok, sent, err := n.Sent.Reserve(ctx, m.Key, token)
	if err != nil {
		return err
	}
	if !ok {
		if !sent {
			log.WarnContext(ctx, "an earlier attempt reserved this email and did not record sending it; not sending twice, it may be missing",
				slog.String("key", m.Key))
		}
		return nil
	}
	if err := n.Mailer.Send(ctx, m); err != nil {
		if rerr := n.Sent.Release(context.WithoutCancel(ctx), m.Key, token); rerr != nil {
			return errors.Join(fmt.Errorf("send %s: %w", m.Key, err), fmt.Errorf("release reservation: %w", rerr))
		}
		return fmt.Errorf("send %s: %w", m.Key, err)
	}
	return n.Sent.MarkSent(context.WithoutCancel(ctx), m.Key, token)
}

func compose(e envelope.Envelope) (Email, error) {
	switch {
	case e.Type == orders.TypePlaced && e.SchemaVersion == 1:
		var p orders.PlacedV1
		if err := e.DecodePayload(&p); err != nil {
			return Email{}, err
		}
		return Email{To: p.CustomerEmail, Subject: "We received your order " + p.OrderID,
			Body: fmt.Sprintf("%d lines, total %d cents.", len(p.Items), p.TotalCents)}, nil
	case e.Type == orders.TypePlaced && e.SchemaVersion == 2:
		var p orders.PlacedV2
		if err := e.DecodePayload(&p); err != nil {
			return Email{}, err
		}
		return Email{To: p.CustomerEmail, Subject: "We received your order " + p.OrderID,
			Body: fmt.Sprintf("%d lines, total %d.%02d %s.", len(p.Items), p.TotalCents/100, p.TotalCents%100, p.Currency)}, nil
	case e.Type == orders.TypePaid && e.SchemaVersion == 1:
		var p orders.PaidV1
		if err := e.DecodePayload(&p); err != nil {
			return Email{}, err
		}
		return Email{To: p.CustomerEmail, Subject: "Payment received for order " + p.OrderID, Body: "Reference " + p.PaymentRef + "."}, nil
	case e.Type == orders.TypeShipped && e.SchemaVersion == 1:
		var p orders.ShippedV1
		if err := e.DecodePayload(&p); err != nil {
			return Email{}, err
		}
		return Email{To: p.CustomerEmail, Subject: "Order " + p.OrderID + " shipped", Body: "Carrier " + p.Carrier + " " + p.TrackingNumber}, nil
	case e.Type == orders.TypeCancelled && e.SchemaVersion == 1:
		var p orders.CancelledV1
		if err := e.DecodePayload(&p); err != nil {
			return Email{}, err
		}
		return Email{To: p.CustomerEmail, Subject: "Order " + p.OrderID + " cancelled", Body: "Reason: " + p.Reason}, nil
	}
	return Email{}, fmt.Errorf("no email for %s schema version %d", e.Type, e.SchemaVersion)
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// DynamoSentLog is the SentLog in the state table: pk sent#<key>, sk "sent".
type DynamoSentLog struct {
	DB interface {
		PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
		UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
		DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	}
	Table string
	// Retention is how long a sent record is kept (default 30 days, as long
	// as a completed claim: longer than any redelivery).
	Retention time.Duration
	Now       func() time.Time
}

var _ SentLog = (*DynamoSentLog)(nil)

const (
	sentSending = "sending"
	sentSent    = "sent"
)

func (d *DynamoSentLog) key(k string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		keys.AttrPK: &types.AttributeValueMemberS{Value: keys.StateSentPrefix + k},
		keys.AttrSK: &types.AttributeValueMemberS{Value: keys.StateSentSK},
	}
}

func (d *DynamoSentLog) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// Reserve puts the record if absent.
func (d *DynamoSentLog) Reserve(ctx context.Context, key, token string) (bool, bool, error) {
	ret := d.Retention
	if ret <= 0 {
		ret = 30 * 24 * time.Hour
	}
	item := d.key(key)
	item[keys.AttrStatus] = &types.AttributeValueMemberS{Value: sentSending}
	item[keys.AttrLeaseToken] = &types.AttributeValueMemberS{Value: token}
	item[keys.AttrExpiresAt] = &types.AttributeValueMemberN{Value: fmt.Sprint(d.now().Add(ret).Unix())}
	_, err := d.DB.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(d.Table),
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:            map[string]string{"#pk": keys.AttrPK},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		st, _ := ccf.Item[keys.AttrStatus].(*types.AttributeValueMemberS)
		return false, st != nil && st.Value == sentSent, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("reserve email %s: %w", key, err)
	}
	return true, false, nil
}

// MarkSent records that the email went out.
func (d *DynamoSentLog) MarkSent(ctx context.Context, key, token string) error {
	_, err := d.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(d.Table),
		Key:                       d.key(key),
		UpdateExpression:          aws.String("SET #st = :sent"),
		ConditionExpression:       aws.String("#tok = :tok"),
		ExpressionAttributeNames:  map[string]string{"#st": keys.AttrStatus, "#tok": keys.AttrLeaseToken},
		ExpressionAttributeValues: map[string]types.AttributeValue{":sent": &types.AttributeValueMemberS{Value: sentSent}, ":tok": &types.AttributeValueMemberS{Value: token}},
	})
	if err != nil {
		return fmt.Errorf("mark email %s sent: %w", key, err)
	}
	return nil
}

// Release deletes a reservation this token holds.
func (d *DynamoSentLog) Release(ctx context.Context, key, token string) error {
	_, err := d.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(d.Table),
		Key:                       d.key(key),
		ConditionExpression:       aws.String("#tok = :tok AND #st = :sending"),
		ExpressionAttributeNames:  map[string]string{"#st": keys.AttrStatus, "#tok": keys.AttrLeaseToken},
		ExpressionAttributeValues: map[string]types.AttributeValue{":sending": &types.AttributeValueMemberS{Value: sentSending}, ":tok": &types.AttributeValueMemberS{Value: token}},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("release email %s: %w", key, err)
	}
	return nil
}
