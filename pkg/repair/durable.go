package repair

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// visibility returns the visibility timeout for messages received now: the
// rest of the run plus a margin, so a message left open is not received
// again in this run.
func visibility(end time.Time) int32 {
	s := int32(time.Until(end).Seconds()) + 30
	return min(max(s, 30), 43200)
}

func (r *Repairer) receive(ctx context.Context, url string, end time.Time) ([]sqstypes.Message, error) {
	out, err := r.cfg.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(url),
		MaxNumberOfMessages:         10,
		WaitTimeSeconds:             1,
		VisibilityTimeout:           visibility(end),
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
	})
	if err != nil {
		return nil, fmt.Errorf("receive from %s: %w", url, err)
	}
	return out.Messages, nil
}

// release makes messages left open visible again once the run is done with
// them, so the next run sees them at once (during the run they stay hidden,
// so it does not spin on them).
func (r *Repairer) release(ctx context.Context, url string, held []sqstypes.Message) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, m := range held {
		_, err := r.cfg.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
		if err != nil {
			r.cfg.Logger.WarnContext(ctx, "could not make an open message visible again; it reappears when its visibility timeout ends",
				slog.String(obs.KeyMessageID, aws.ToString(m.MessageId)), obs.Err(err))
		}
	}
}

func (r *Repairer) delete(ctx context.Context, url string, m sqstypes.Message) error {
	_, err := r.cfg.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
	if err != nil {
		return fmt.Errorf("delete message %s: %w", aws.ToString(m.MessageId), err)
	}
	return nil
}

// drainDurable drains the DURABLE FIFO DLQ (see the package doc).
func (r *Repairer) drainDurable(ctx context.Context, sr *SourceReport, end time.Time) (bool, error) {
	url := r.cfg.DurableDLQ
	seen := map[string]bool{} // bodies tried in this run
	return r.drain(ctx, url, end, func(m sqstypes.Message) bool {
		key := bodyKey(aws.ToString(m.Body))
		if seen[key] {
			// Re-parked earlier in this run: held in flight until the
			// run ends, so the next receive moves past it.
			return false
		}
		seen[key] = true
		return r.durableMessage(ctx, sr, url, m)
	})
}

// drain receives url's messages until it is empty or time runs out, and
// hands each to repair, which reports whether it deleted the message. The
// others stay in flight until the drain ends, then become visible again.
func (r *Repairer) drain(ctx context.Context, url string, end time.Time, repair func(sqstypes.Message) bool) (bool, error) {
	var held []sqstypes.Message
	defer func() { r.release(ctx, url, held) }()
	for ctx.Err() == nil {
		msgs, err := r.receive(ctx, url, end)
		if err != nil {
			if ctx.Err() != nil {
				return false, nil // out of time for this source
			}
			return false, err
		}
		if len(msgs) == 0 {
			return true, nil
		}
		for i, m := range msgs {
			if ctx.Err() != nil {
				held = append(held, msgs[i:]...) // not started: back in the queue for the next run
				return false, nil
			}
			if !repair(m) {
				held = append(held, m)
			}
		}
	}
	return false, nil
}

func bodyKey(body string) string {
	h := sha256.Sum256([]byte(body))
	return hex.EncodeToString(h[:])
}

// bodyEvent is what a DLQ body says about the event it carries.
type bodyEvent struct {
	env envelope.Envelope
	err error
}

func decodeBody(body string) bodyEvent {
	e, err := envelope.FromJSON([]byte(body))
	if err != nil {
		return bodyEvent{env: e, err: fmt.Errorf("body is not an envelope: %w", err)}
	}
	return bodyEvent{env: e}
}

// durableMessage repairs one message and reports whether the original left
// the queue (deleted when fixed, or re-parked when open).
func (r *Repairer) durableMessage(ctx context.Context, sr *SourceReport, url string, m sqstypes.Message) (gone bool) {
	it := Item{Source: SourceDurableDLQ, MessageID: aws.ToString(m.MessageId), Via: ViaLog}
	b := decodeBody(aws.ToString(m.Body))
	it.Tenant, it.EventID, it.Seq = b.env.TenantID, b.env.ID, b.env.Seq
	open := func(reason string, err error) {
		it.Outcome, it.Reason = Open, reason
		if err != nil {
			it.Error = err.Error()
		}
		id, rerr := r.repark(ctx, url, m, b.env.TenantID)
		switch {
		case id == "":
			it.Error += fmt.Sprintf(" (left in place: re-park failed: %v)", rerr)
		case rerr != nil:
			it.Reason += "; re-parked as " + id + ", but the original could not be deleted"
			it.Error += fmt.Sprintf(" (%v)", rerr)
		default:
			it.Reason += "; re-parked as " + id
			gone = true
		}
		r.record(ctx, sr, it)
	}
	if b.env.TenantID == "" || b.env.Seq < 1 || b.env.ID == "" {
		open("undecodable: the body does not name an event (tenant, seq, id)", b.err)
		return gone
	}
	logged, err := r.readEvent(ctx, b.env.TenantID, b.env.Seq)
	if err != nil {
		open("cannot re-read the event from the log", err)
		return gone
	}
	if diff := differs(b, logged); diff != "" {
		open("the message differs from the log's copy; not delivered (run reconcile on the tenant)", fmt.Errorf("%s", diff))
		return gone
	}
	subs, why, err := r.deliver(ctx, logged)
	it.Subscriptions = subs
	if why != "" {
		open(why, err)
		return gone
	}
	// Settled now: the watermarks move if this event was their gap.
	if _, err := r.cfg.Deliverer.Settled(ctx, logged.TenantID, []int64{logged.Seq}); err != nil {
		r.cfg.Logger.WarnContext(ctx, "delivered from the DLQ, but the delivery watermarks could not be moved; the unsettled source moves them", obs.Err(err))
	}
	if err := r.delete(ctx, url, m); err != nil {
		// Delivered (idempotent): a later run finds every claim completed.
		it.Outcome, it.Reason, it.Error = Open, "delivered, but the message could not be deleted", err.Error()
		r.record(ctx, sr, it)
		return false
	}
	it.Outcome, it.Reason = Fixed, "redelivered from the log"
	r.record(ctx, sr, it)
	return true
}

// differs says how a DLQ body and the log's copy of its event disagree, or "".
func differs(b bodyEvent, logged envelope.Envelope) string {
	if b.err != nil {
		return b.err.Error()
	}
	if b.env.ID != logged.ID {
		return fmt.Sprintf("the log's event at seq %d is %s, the message names %s", logged.Seq, logged.ID, b.env.ID)
	}
	if b.env.Hash != logged.Hash {
		return fmt.Sprintf("hash: message %s, log %s", b.env.Hash, logged.Hash)
	}
	mb, err1 := b.env.CanonicalBytes()
	lb, err2 := logged.CanonicalBytes()
	if err1 != nil || err2 != nil || !bytes.Equal(mb, lb) {
		return "the message's canonical bytes differ from the log's"
	}
	return ""
}

// repark sends the message's body again to the FIFO queue (same group, a
// new deduplication id) and then deletes the original, so that a message
// that stays open does not hide its tenant's later messages. It returns the
// new message's id. If the send fails the original is left in place.
func (r *Repairer) repark(ctx context.Context, url string, m sqstypes.Message, tenant string) (string, error) {
	group := m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]
	if group == "" {
		group = tenant
	}
	if group == "" {
		group = "dlq-repair"
	}
	// A new deduplication id: the queue may still remember the old one.
	dedup := fmt.Sprintf("%s%d-%s", keys.DedupReparkPrefix, r.cfg.Now().UnixNano(), bodyKey(aws.ToString(m.Body))[:32])
	out, err := r.cfg.SQS.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(url), MessageBody: m.Body, MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedup),
	})
	if err != nil {
		return "", fmt.Errorf("re-park message %s: %w", aws.ToString(m.MessageId), err)
	}
	if err := r.delete(ctx, url, m); err != nil {
		// Both copies are there now; the next run fixes or re-parks each.
		return aws.ToString(out.MessageId), err
	}
	return aws.ToString(out.MessageId), nil
}
