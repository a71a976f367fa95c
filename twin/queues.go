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

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/twin/cfn"
)

// sqsDefaultVisibility is SQS's default visibility timeout.
const sqsDefaultVisibility = 30 * time.Second

// dedupWindow is SQS FIFO's deduplication interval.
const dedupWindow = 5 * time.Minute

// queue is a local SQS queue on ElasticMQ.
type queue struct {
	id           string
	name, url    string
	arn          string
	fifo         bool
	contentBased bool // ContentBasedDeduplication
	visibility   time.Duration
	// groupScope: DeduplicationScope=messageGroup, which ElasticMQ ignores
	// (it deduplicates across the queue): see wireDedup.
	groupScope bool
	// dlq is the logical ID of the redrive target, if any.
	redriveTarget string

	dedup dedupLedger
}

// dedupLedger remembers, for five minutes, which message each
// deduplication id sent to a FIFO queue through the twin became, to report
// what SQS drops; and the long ids wireDedup could not carry in place.
type dedupLedger struct {
	mu    sync.Mutex
	seen  map[string]dedupSeen // by the id ElasticMQ got
	long  map[string]string    // hashed wire id → the sender's id
	swept time.Time            // when seen was last cleared of expired ids
}

type dedupSeen struct {
	at        time.Time
	messageID string
}

// Group-scoped deduplication ids. SQS with DeduplicationScope=messageGroup
// deduplicates per message group ("the deduplication scope ... at the
// message group level", CloudFormation AWS::SQS::Queue DeduplicationScope,
// https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-sqs-queue.html;
// high throughput for FIFO queues,
// https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/high-throughput-fifo.html).
// ElasticMQ 1.7.1 drops the attribute and deduplicates across the queue.
// So every send to such a queue that passes through the twin (the Pipe's,
// the twin's own failure records, and every client of the twin's SQS
// endpoint, see sqsfront.go) carries ElasticMQ a wire id that names the
// group: "~" + 12 hex digits of SHA-256(group) + "~" + the sender's id.
// ElasticMQ's own five-minute deduplication then applies per group, and
// everything that reads through the twin gets the sender's id back.
const (
	wireMark    = "~"
	wireHashLen = 12 // hex digits of SHA-256(group): 48 bits
	wirePrefix  = 1 + wireHashLen + 1
	maxDedupLen = 128 // SQS's limit on MessageDeduplicationId
)

func groupHash(group string) string {
	h := sha256.Sum256([]byte(group))
	return hex.EncodeToString(h[:])[:wireHashLen]
}

// wireDedup returns the deduplication id to give ElasticMQ for the
// sender's id in group. Queues without group scope get id unchanged. An id
// too long to carry in place is sent hashed, and remembered here so
// plainDedup can give it back.
func (q *queue) wireDedup(group, id string) string {
	if !q.groupScope || id == "" {
		return id
	}
	prefix := wireMark + groupHash(group)
	if len(prefix)+1+len(id) <= maxDedupLen {
		return prefix + wireMark + id
	}
	h := sha256.Sum256([]byte(id))
	wire := prefix + "#" + hex.EncodeToString(h[:])
	q.dedup.mu.Lock()
	defer q.dedup.mu.Unlock()
	if q.dedup.long == nil {
		q.dedup.long = map[string]string{}
	}
	q.dedup.long[wire] = id
	return wire
}

// plainDedup undoes wireDedup: the id the sender gave. group, if known,
// must match the id's; ids ElasticMQ got from elsewhere pass unchanged.
func (q *queue) plainDedup(group, wire string) string {
	if !q.groupScope || len(wire) <= wirePrefix || !strings.HasPrefix(wire, wireMark) {
		return wire
	}
	h := wire[1 : 1+wireHashLen]
	if _, err := hex.DecodeString(h); err != nil || (group != "" && h != groupHash(group)) {
		return wire
	}
	switch wire[wirePrefix-1] {
	case wireMark[0]:
		return wire[wirePrefix:]
	case '#':
		q.dedup.mu.Lock()
		defer q.dedup.mu.Unlock()
		if id, ok := q.dedup.long[wire]; ok {
			return id
		}
	}
	return wire
}

// plainAttributes rewrites a received message's MessageDeduplicationId
// attribute back to the sender's id.
func (q *queue) plainAttributes(attrs map[string]string) {
	const key = string(sqstypes.MessageSystemAttributeNameMessageDeduplicationId)
	if v, ok := attrs[key]; ok {
		attrs[key] = q.plainDedup(attrs[string(sqstypes.MessageSystemAttributeNameMessageGroupId)], v)
	}
}

// contentDedup is the id SQS derives with ContentBasedDeduplication: the
// SHA-256 of the body (attributes not included).
func contentDedup(body string) string {
	h := sha256.Sum256([]byte(body))
	return hex.EncodeToString(h[:])
}

// observe records that a send of wire id to q came back as messageID, and
// reports an earlier send it duplicated: SQS answers a duplicate with
// success and the first message's id, within five minutes.
func (q *queue) observe(wire, messageID string, now time.Time) *dedupSeen {
	if !q.fifo || wire == "" {
		return nil
	}
	q.dedup.mu.Lock()
	defer q.dedup.mu.Unlock()
	if now.Sub(q.dedup.swept) > time.Second { // not on every send: a busy queue holds thousands
		q.dedup.swept = now
		for k, v := range q.dedup.seen {
			if now.Sub(v.at) > dedupWindow {
				delete(q.dedup.seen, k)
			}
		}
	}
	if s, ok := q.dedup.seen[wire]; ok && s.messageID == messageID && now.Sub(s.at) <= dedupWindow {
		return &s
	}
	if q.dedup.seen == nil {
		q.dedup.seen = map[string]dedupSeen{}
	}
	q.dedup.seen[wire] = dedupSeen{at: now, messageID: messageID}
	return nil
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
	q := &queue{id: res.LogicalID, name: name, fifo: fifo, visibility: visibility,
		contentBased: fifo && bool(p.ContentBasedDeduplication), groupScope: fifo && p.DeduplicationScope == "messageGroup"}
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
	if err := tw.startFront(); err != nil {
		return nil, err
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
	tw.front.register(q)
	tw.log.Info("twin: queue", obs.KeyLogicalID, res.LogicalID, obs.KeyURL, q.url, obs.KeyFIFO, fifo, obs.KeyVisibility, visibility, obs.KeyRedriveTo, q.redriveTarget)
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
		in.MessageGroupId = aws.String(group)
		in.MessageDeduplicationId = aws.String(q.wireDedup(group, contentDedup(string(body))))
	}
	for attempt := 1; ; attempt++ {
		out, err := tw.sqs.SendMessage(ctx, in)
		if err == nil {
			return aws.ToString(out.MessageId), nil
		}
		if ctx.Err() != nil {
			return "", err
		}
		tw.log.Error("twin: send to queue failed; retrying", obs.KeyQueue, q.id, obs.KeyAttempt, attempt, obs.Err(err))
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(min(time.Duration(attempt)*200*time.Millisecond, 2*time.Second)):
		}
	}
}
