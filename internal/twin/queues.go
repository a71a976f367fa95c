package twin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/fourlanes/fourlanes/internal/twin/cfn"
)

// sqsDefaultVisibility is SQS's default visibility timeout.
const sqsDefaultVisibility = 30 * time.Second

// dedupWindow is SQS FIFO's deduplication interval.
const dedupWindow = 5 * time.Minute

// queue is a local SQS queue on ElasticMQ.
type queue struct {
	id         string
	name, url  string
	arn        string
	fifo       bool
	visibility time.Duration
	// groupScope: DeduplicationScope=messageGroup. ElasticMQ ignores the
	// attribute and deduplicates across the queue; see dedup.
	groupScope bool
	// dlq is the logical ID of the redrive target, if any.
	redriveTarget string

	dedup dedupLedger
}

// dedupLedger remembers the deduplication ids the twin sent to a FIFO
// queue in the last five minutes, to report what SQS drops and to keep
// per-group scope on a server that only knows per-queue scope.
type dedupLedger struct {
	mu   sync.Mutex
	seen map[string]dedupSeen // by scope key (group + id, or id)
	ids  map[string]dedupSeen // by plain id, for the cross-group check
}

type dedupSeen struct {
	group     string
	at        time.Time
	messageID string
	// entry is the earlier entry of the same send batch, or -1.
	entry int
}

func (l *dedupLedger) gc(now time.Time) {
	for k, v := range l.seen {
		if now.Sub(v.at) > dedupWindow {
			delete(l.seen, k)
		}
	}
	for k, v := range l.ids {
		if now.Sub(v.at) > dedupWindow {
			delete(l.ids, k)
		}
	}
}

// plan returns the deduplication id to send for (group, id) and whether
// SQS will drop the message as a duplicate of an earlier one. With
// DeduplicationScope=messageGroup, an id another group used within the
// window is sent scoped to its group (a hash of group and id), because
// ElasticMQ, unlike SQS, would drop it.
func (q *queue) plan(group, id string, now time.Time) (send string, dup *dedupSeen) {
	q.dedup.mu.Lock()
	defer q.dedup.mu.Unlock()
	if q.dedup.seen == nil {
		q.dedup.seen, q.dedup.ids = map[string]dedupSeen{}, map[string]dedupSeen{}
	}
	q.dedup.gc(now)
	key := id
	if q.groupScope {
		key = group + "\x00" + id
	}
	if s, ok := q.dedup.seen[key]; ok {
		s.entry = -1
		return id, &s
	}
	send = id
	if q.groupScope {
		if s, ok := q.dedup.ids[id]; ok && s.group != group {
			h := sha256.Sum256([]byte(group + "\x00" + id))
			send = "g-" + hex.EncodeToString(h[:])[:62]
		}
	}
	return send, nil
}

func (q *queue) remember(group, id, messageID string, now time.Time) {
	q.dedup.mu.Lock()
	defer q.dedup.mu.Unlock()
	key := id
	if q.groupScope {
		key = group + "\x00" + id
	}
	s := dedupSeen{group: group, at: now, messageID: messageID}
	q.dedup.seen[key] = s
	if _, ok := q.dedup.ids[id]; !ok {
		q.dedup.ids[id] = s
	}
}

// createQueue creates the queue on ElasticMQ with its FIFO, visibility,
// retention, delay and redrive settings. The redrive target is created
// first (the policy names its ARN). Encryption is an AWS-side setting.
func (tw *Twin) createQueue(ctx context.Context, res *cfn.Resource) (*resource, error) {
	var p cfn.QueueProps
	if err := tw.rv.Decode(res, &p, "QueueName", "FifoQueue", "ContentBasedDeduplication", "DeduplicationScope",
		"FifoThroughputLimit", "VisibilityTimeout", "MessageRetentionPeriod", "DelaySeconds",
		"ReceiveMessageWaitTimeSeconds", "MaximumMessageSize", "RedrivePolicy"); err != nil {
		return nil, err
	}
	fifo := bool(p.FifoQueue)
	name := tw.name(res.LogicalID, 80-len(".fifo"))
	if p.QueueName != "" {
		name = tw.cfg.StackName + "-" + strings.TrimSuffix(p.QueueName, ".fifo")
		if len(name) > 75 {
			name = name[:75]
		}
	}
	if fifo {
		name += ".fifo"
	}
	attrs := map[string]string{}
	if fifo {
		attrs["FifoQueue"] = "true"
		attrs["ContentBasedDeduplication"] = strconv.FormatBool(bool(p.ContentBasedDeduplication))
		if p.DeduplicationScope != "" {
			attrs["DeduplicationScope"] = p.DeduplicationScope
		}
		if p.FifoThroughputLimit != "" {
			attrs["FifoThroughputLimit"] = p.FifoThroughputLimit
		}
	}
	visibility := sqsDefaultVisibility
	setInt := func(k string, v *cfn.Int) {
		if v != nil {
			attrs[k] = strconv.Itoa(int(*v))
		}
	}
	if p.VisibilityTimeout != nil {
		visibility = time.Duration(*p.VisibilityTimeout) * time.Second
	}
	setInt("VisibilityTimeout", p.VisibilityTimeout)
	setInt("MessageRetentionPeriod", p.MessageRetentionPeriod)
	setInt("DelaySeconds", p.DelaySeconds)
	setInt("ReceiveMessageWaitTimeSeconds", p.ReceiveMessageWaitTimeSeconds)
	setInt("MaximumMessageSize", p.MaximumMessageSize)
	q := &queue{id: res.LogicalID, name: name, fifo: fifo, visibility: visibility, groupScope: p.DeduplicationScope == "messageGroup"}
	if rp := p.RedrivePolicy; rp != nil {
		b, err := json.Marshal(map[string]any{"deadLetterTargetArn": rp.DeadLetterTargetArn, "maxReceiveCount": int(rp.MaxReceiveCount)})
		if err != nil {
			return nil, err
		}
		attrs["RedrivePolicy"] = string(b)
		if target := tw.queueByARN(rp.DeadLetterTargetArn); target != nil {
			q.redriveTarget = target.id
		}
	}
	out, err := tw.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return nil, fmt.Errorf("create queue %s: %w", name, err)
	}
	q.url = aws.ToString(out.QueueUrl)
	got, err := tw.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return nil, fmt.Errorf("queue %s ARN: %w", name, err)
	}
	q.arn = got.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	tw.log.Info("twin: queue", "logical_id", res.LogicalID, "url", q.url, "fifo", fifo, "visibility", visibility, "redrive_to", q.redriveTarget)
	return &resource{
		id: res.LogicalID, typ: res.Type, ref: q.url, queue: q,
		attrs: map[string]any{"Arn": q.arn, "QueueName": q.name, "QueueUrl": q.url},
	}, nil
}

// queueByARN returns the queue whose ARN is arn.
func (tw *Twin) queueByARN(arn string) *queue {
	for _, r := range tw.resources {
		if r.queue != nil && r.queue.arn == arn {
			return r.queue
		}
	}
	return nil
}

// QueueURL returns the local URL of the queue with logical ID id.
func (tw *Twin) QueueURL(id string) (string, error) {
	r, err := tw.lookup(id, cfn.TypeQueue)
	if err != nil {
		return "", err
	}
	return r.queue.url, nil
}

// QueueDepth returns a queue's visible and in-flight message counts.
func (tw *Twin) QueueDepth(ctx context.Context, id string) (visible, inFlight int, err error) {
	r, err := tw.lookup(id, cfn.TypeQueue)
	if err != nil {
		return 0, 0, err
	}
	out, err := tw.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(r.queue.url),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		return 0, 0, fmt.Errorf("queue %s depth: %w", id, err)
	}
	visible, _ = strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	inFlight, _ = strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible, inFlight, nil
}

// sendToQueue sends one message (an on-failure record, a Pipe DLQ record)
// to a queue the twin created, retrying until it lands or ctx ends: a
// failure record must not be lost to a transient error.
func (tw *Twin) sendToQueue(ctx context.Context, q *queue, body []byte, group string) (string, error) {
	in := &sqs.SendMessageInput{QueueUrl: aws.String(q.url), MessageBody: aws.String(string(body))}
	if q.fifo {
		// FIFO destinations are refused by AWS for stream failures; a DLQ
		// fed by the twin itself still needs the two ids.
		h := sha256.Sum256(body)
		in.MessageGroupId = aws.String(group)
		in.MessageDeduplicationId = aws.String(hex.EncodeToString(h[:]))
	}
	for attempt := 1; ; attempt++ {
		out, err := tw.sqs.SendMessage(ctx, in)
		if err == nil {
			return aws.ToString(out.MessageId), nil
		}
		if ctx.Err() != nil {
			return "", err
		}
		tw.log.Error("twin: send to queue failed; retrying", "queue", q.id, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(min(time.Duration(attempt)*200*time.Millisecond, 2*time.Second)):
		}
	}
}
