package twin

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/eventpattern"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// queueMapping is a Lambda event source mapping on an SQS queue. SQS
// itself keeps FIFO order: while messages of a group are in flight, no
// other message of that group is received, so each group has at most one
// batch in flight however many pollers run.
type queueMapping struct {
	tw        *Twin
	source    string
	fn        *function
	q         *queue
	batchSize int
	window    time.Duration // MaximumBatchingWindowInSeconds (standard queues)
	report    bool
	pollers   int
	filters   []*eventpattern.Pattern
	counters
}

func (tw *Twin) sqsMapping(id string, p cfn.MappingProps, fn *function, q *queue, filters []*eventpattern.Pattern, report bool) (*queueMapping, error) {
	size := cfn.IntOr(p.BatchSize, 10)
	if q.fifo && size > 10 {
		return nil, fmt.Errorf("BatchSize %d: a FIFO queue takes at most 10", size)
	}
	if size < 1 || size > 10000 {
		return nil, fmt.Errorf("BatchSize %d: want 1 to 10000", size)
	}
	if p.StartingPosition != "" {
		return nil, fmt.Errorf("StartingPosition is for streams, not SQS")
	}
	// AWS refuses the mapping when the function could outlive the message's
	// invisibility (services-sqs-configure).
	if fn.timeout > q.visibility {
		return nil, fmt.Errorf("queue %s visibility timeout %v is less than function %s timeout %v", q.id, q.visibility, fn.id, fn.timeout)
	}
	window := time.Duration(cfn.IntOr(p.MaximumBatchingWindowInSeconds, 0)) * time.Second
	if q.fifo && window > 0 {
		return nil, fmt.Errorf("MaximumBatchingWindowInSeconds: not supported for FIFO queues")
	}
	pollers := fn.rt.Spec().Concurrency
	if p.ScalingConfig != nil && p.ScalingConfig.MaximumConcurrency != nil {
		pollers = min(pollers, int(*p.ScalingConfig.MaximumConcurrency))
	}
	m := &queueMapping{tw: tw, source: id, fn: fn, q: q, batchSize: size, window: window, report: report, pollers: max(pollers, 1), filters: filters}
	tw.log.Info("twin: queue mapping", obs.KeyLogicalID, id, obs.KeyFunction, fn.id, obs.KeyQueue, q.id, obs.KeyBatchSize, size,
		obs.KeyReportBatchItemFailures, report, obs.KeyPollers, m.pollers, obs.KeyVisibility, q.visibility)
	return m, nil
}

func (m *queueMapping) stats() PollerStats { return m.snapshot() }

func (m *queueMapping) start(ctx context.Context, wg *sync.WaitGroup) {
	for range m.pollers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				m.pollOnce(ctx)
			}
		}()
	}
}

func (m *queueMapping) receive(ctx context.Context, n int) ([]sqstypes.Message, error) {
	out, err := m.tw.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(m.q.url),
		MaxNumberOfMessages:         int32(min(n, 10)),
		WaitTimeSeconds:             1, // short: the poller must notice a stop
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return nil, err
	}
	// The function sees the deduplication ids the senders gave.
	for _, msg := range out.Messages {
		m.q.plainAttributes(msg.Attributes)
	}
	return out.Messages, nil
}

func (m *queueMapping) pollOnce(ctx context.Context) {
	msgs, err := m.receive(ctx, m.batchSize)
	if err != nil {
		if ctx.Err() == nil {
			m.tw.log.Error("twin: receive", obs.KeySource, m.source, obs.KeyQueue, m.q.id, obs.Err(err))
			sleep(ctx, time.Second)
		}
		return
	}
	// A standard queue fills a batch from several receives: beyond 10
	// messages, or within the batching window.
	start := time.Now()
	for !m.q.fifo && len(msgs) > 0 && len(msgs) < m.batchSize && (len(msgs) >= 10 || time.Since(start) < m.window) {
		more, err := m.receive(ctx, m.batchSize-len(msgs))
		if err != nil || len(more) == 0 && time.Since(start) >= m.window {
			break
		}
		msgs = append(msgs, more...)
	}
	if len(msgs) == 0 {
		return
	}
	m.read.Add(int64(len(msgs)))
	// Messages no filter matches are deleted unseen, as Lambda does.
	if len(m.filters) > 0 {
		var keep, drop []sqstypes.Message
		for _, msg := range msgs {
			if m.match(msg) {
				keep = append(keep, msg)
			} else {
				drop = append(drop, msg)
			}
		}
		if len(drop) > 0 {
			m.filtered.Add(int64(len(drop)))
			m.delete(ctx, drop)
			m.tw.journal.add(Entry{Kind: KindFiltered, Source: m.source, Items: messageIDs(drop), Outcome: "ok", Detail: "no filter pattern matched: deleted"})
		}
		msgs = keep
		if len(msgs) == 0 {
			return
		}
	}
	payload, err := m.event(msgs)
	if err != nil {
		m.tw.log.Error("twin: build SQS event", obs.KeySource, m.source, obs.Err(err))
		return
	}
	m.invocations.Add(1)
	res, err := m.tw.invoke(ctx, m.fn, m.source, payload, messageIDs(msgs), messageKeys(msgs), 0)
	if err != nil {
		return // stopping: the messages reappear after their visibility timeout
	}
	failed := map[string]bool{}
	reason := ""
	switch {
	case res.Err != nil:
		reason = "function error: " + res.Err.Error()
		for _, msg := range msgs {
			failed[aws.ToString(msg.MessageId)] = true
		}
	case m.report:
		var whole bool
		failed, whole, reason = partialQueue(res.Payload, msgs)
		if whole {
			for _, msg := range msgs {
				failed[aws.ToString(msg.MessageId)] = true
			}
		} else if m.q.fifo {
			m.warnGaps(msgs, failed)
		}
	}
	var ok, left []sqstypes.Message
	for _, msg := range msgs {
		if failed[aws.ToString(msg.MessageId)] {
			left = append(left, msg)
		} else {
			ok = append(ok, msg)
		}
	}
	if len(ok) > 0 {
		m.delete(ctx, ok)
		m.delivered.Add(int64(len(ok)))
		m.tw.journal.add(Entry{Kind: KindDelivered, Source: m.source, Function: m.fn.id, RequestID: res.RequestID, Items: messageIDs(ok), Keys: messageKeys(ok), Outcome: "ok", Detail: "deleted from " + m.q.id})
	}
	if len(left) > 0 {
		detail := fmt.Sprintf("visible again after %v", m.q.visibility)
		if m.q.redriveTarget != "" {
			detail += "; redrive to " + m.q.redriveTarget + " after maxReceiveCount"
		}
		m.tw.journal.add(Entry{Kind: KindLeft, Source: m.source, Function: m.fn.id, RequestID: res.RequestID, Items: messageIDs(left), Keys: messageKeys(left), Outcome: reason, Detail: detail})
	}
}

// fifoGap is a message group of a FIFO batch whose partial batch response
// reports a message failed but not every later message of the group.
type fifoGap struct {
	group, failed string   // the group and its first failed message
	later         []string // later messages of the group not reported
}

// fifoGaps finds the groups of msgs (in the order received) where a
// message reported failed is followed by messages of its group that were
// not. Lambda deletes those as done, so they overtake the failed one; AWS's
// rule for FIFO queues: "stop processing messages after the first failure
// and return all failed and unprocessed messages" in batchItemFailures
// (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html).
func fifoGaps(msgs []sqstypes.Message, failed map[string]bool) []fifoGap {
	var gaps []fifoGap
	at := map[string]int{} // group → its index in gaps, once a message of it failed
	for _, msg := range msgs {
		id := aws.ToString(msg.MessageId)
		g := msg.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]
		i, seen := at[g]
		switch {
		case !seen && failed[id]:
			at[g] = len(gaps)
			gaps = append(gaps, fifoGap{group: g, failed: id})
		case seen && !failed[id]:
			gaps[i].later = append(gaps[i].later, id)
		}
	}
	return slices.DeleteFunc(gaps, func(g fifoGap) bool { return len(g.later) == 0 })
}

// warnGaps logs, at WARN, each group of a FIFO batch whose later messages
// the function let through after reporting an earlier one failed.
func (m *queueMapping) warnGaps(msgs []sqstypes.Message, failed map[string]bool) {
	for _, g := range fifoGaps(msgs, failed) {
		m.tw.log.Warn("twin: FIFO batchItemFailures reports a message failed but not the later messages of its group, which are deleted as done and overtake it; "+
			"AWS: stop processing messages after the first failure and return all failed and unprocessed messages",
			obs.KeyFunction, m.fn.id, obs.KeyQueue, m.q.id, obs.KeySource, m.source, obs.KeyGroup, g.group,
			obs.KeyFailedMessageID, g.failed, obs.KeyUnreportedMessageIds, strings.Join(g.later, ","))
	}
}

func (m *queueMapping) match(msg sqstypes.Message) bool {
	doc := map[string]any{"body": aws.ToString(msg.Body)}
	var body any
	if json.Unmarshal([]byte(aws.ToString(msg.Body)), &body) == nil {
		doc["body"] = body
	}
	for _, p := range m.filters {
		if p.MatchValue(doc) {
			return true
		}
	}
	return false
}

func (m *queueMapping) delete(ctx context.Context, msgs []sqstypes.Message) {
	entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(msgs))
	for i, msg := range msgs {
		entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: msg.ReceiptHandle}
	}
	for len(entries) > 0 {
		n := min(len(entries), 10)
		out, err := m.tw.sqs.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(m.q.url), Entries: entries[:n]})
		if err != nil {
			m.tw.log.Error("twin: delete messages", obs.KeySource, m.source, obs.KeyQueue, m.q.id, obs.Err(err))
		} else if len(out.Failed) > 0 {
			m.tw.log.Error("twin: delete messages: some failed", obs.KeySource, m.source, obs.KeyQueue, m.q.id, obs.KeyFailed, len(out.Failed), obs.KeyFirst, aws.ToString(out.Failed[0].Message))
		}
		entries = entries[n:]
	}
}

// event builds the SQS event Lambda sends: {"Records":[…]}.
func (m *queueMapping) event(msgs []sqstypes.Message) ([]byte, error) {
	type msgAttr struct {
		StringValue      *string  `json:"stringValue,omitempty"`
		BinaryValue      *string  `json:"binaryValue,omitempty"`
		StringListValues []string `json:"stringListValues"`
		BinaryListValues []string `json:"binaryListValues"`
		DataType         string   `json:"dataType"`
	}
	recs := make([]map[string]any, len(msgs))
	for i, msg := range msgs {
		attrs := map[string]string{}
		for k, v := range msg.Attributes {
			attrs[k] = v
		}
		mattrs := map[string]msgAttr{}
		for k, v := range msg.MessageAttributes {
			a := msgAttr{StringValue: v.StringValue, StringListValues: nonNil(v.StringListValues), BinaryListValues: []string{}, DataType: aws.ToString(v.DataType)}
			if v.BinaryValue != nil {
				s := base64.StdEncoding.EncodeToString(v.BinaryValue)
				a.BinaryValue = &s
			}
			for _, b := range v.BinaryListValues {
				a.BinaryListValues = append(a.BinaryListValues, base64.StdEncoding.EncodeToString(b))
			}
			mattrs[k] = a
		}
		r := map[string]any{
			"messageId":         aws.ToString(msg.MessageId),
			"receiptHandle":     aws.ToString(msg.ReceiptHandle),
			"body":              aws.ToString(msg.Body),
			"attributes":        attrs,
			"messageAttributes": mattrs,
			"md5OfBody":         aws.ToString(msg.MD5OfBody),
			"eventSource":       "aws:sqs",
			"eventSourceARN":    m.q.arn,
			"awsRegion":         localaws.Region,
		}
		if msg.MD5OfMessageAttributes != nil {
			r["md5OfMessageAttributes"] = aws.ToString(msg.MD5OfMessageAttributes)
		}
		recs[i] = r
	}
	return json.Marshal(map[string]any{"Records": recs})
}

// partialQueue reads an SQS partial batch response: the failed message ids,
// or whole=true when the response fails the whole batch (an empty, null or
// unknown itemIdentifier).
func partialQueue(payload []byte, msgs []sqstypes.Message) (failed map[string]bool, whole bool, reason string) {
	failed = map[string]bool{}
	p := bytes.TrimSpace(payload)
	if len(p) == 0 || bytes.Equal(p, []byte("null")) || p[0] != '{' {
		return failed, false, ""
	}
	var resp struct {
		BatchItemFailures []map[string]any `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(p, &resp); err != nil {
		return failed, true, "unreadable partial batch response: " + err.Error()
	}
	var ids []string
	for _, f := range resp.BatchItemFailures {
		id, _ := f["itemIdentifier"].(string)
		if id == "" {
			return failed, true, "batchItemFailures has an empty or null itemIdentifier: the whole batch failed"
		}
		if !slices.ContainsFunc(msgs, func(m sqstypes.Message) bool { return aws.ToString(m.MessageId) == id }) {
			return failed, true, "batchItemFailures names " + id + ", not a message of this batch: the whole batch failed"
		}
		failed[id] = true
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return failed, false, ""
	}
	return failed, false, "function reported failed items " + strings.Join(ids, ", ")
}

func messageIDs(msgs []sqstypes.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = aws.ToString(m.MessageId)
	}
	return out
}

// messageKeys describes messages for the journal: group, dedup id and how
// often each was received.
func messageKeys(msgs []sqstypes.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		var parts []string
		for _, k := range []string{"MessageGroupId", "MessageDeduplicationId", "ApproximateReceiveCount"} {
			if v, ok := m.Attributes[k]; ok {
				parts = append(parts, k+"="+v)
			}
		}
		out[i] = strings.Join(parts, " ")
	}
	return out
}
