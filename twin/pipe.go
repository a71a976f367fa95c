package twin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/eventpattern"
)

// sqsTargetMaxBatch is the most events an SQS target takes per batch.
const sqsTargetMaxBatch = 10

// targetParam is one SQS target parameter: a static value or a JSON path
// evaluated on each event.
type targetParam struct {
	name   string // MessageGroupId, MessageDeduplicationId
	static string
	path   *eventpattern.Path
}

func newTargetParam(name, v string) (*targetParam, error) {
	if v == "" {
		return nil, nil
	}
	if !eventpattern.IsDynamic(v) {
		return &targetParam{name: name, static: v}, nil
	}
	p, err := eventpattern.ParsePath(v)
	if err != nil {
		return nil, fmt.Errorf("TargetParameters.SqsQueueParameters.%s: %w", name, err)
	}
	return &targetParam{name: name, path: &p}, nil
}

// value returns the parameter for one event. A path that selects nothing
// (or more than one value, or an object) is an error.
func (tp *targetParam) value(doc any) (string, error) {
	if tp.path == nil {
		return tp.static, nil
	}
	v, ok := tp.path.Resolve(doc)
	if !ok {
		return "", fmt.Errorf("%s path %s does not resolve", tp.name, tp.path)
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return strconv.FormatBool(x), nil
	}
	return "", fmt.Errorf("%s path %s selects %T, not a string", tp.name, tp.path, v)
}

// createPipe sets up an EventBridge Pipe from a DynamoDB stream of this
// stack, through an optional Lambda enrichment, to an SQS queue.
func (tw *Twin) createPipe(ctx context.Context, res *cfn.Resource) (*resource, error) {
	var p cfn.PipeProps
	if err := tw.rv.Decode(res, &p, "Name", "DesiredState", "Source", "SourceParameters", "Enrichment", "EnrichmentParameters", "Target", "TargetParameters"); err != nil {
		return nil, err
	}
	name := tw.name(res.LogicalID, 64)
	if p.Name != "" {
		name = p.Name
	}
	arn := arnOf("pipes", "pipe/"+name)
	r := &resource{id: res.LogicalID, typ: res.Type, ref: name, attrs: map[string]any{"Arn": arn}}

	// Parameters first, as Pipes validates them before it reads the source.
	sp := p.SourceParameters
	if sp == nil || sp.DynamoDBStreamParameters == nil {
		return nil, errors.New("SourceParameters.DynamoDBStreamParameters is required for a DynamoDB stream source")
	}
	sq := sp.DynamoDBStreamParameters
	maxAge, err := maxRecordAge("SourceParameters.DynamoDBStreamParameters.MaximumRecordAgeInSeconds", sq.MaximumRecordAgeInSeconds)
	if err != nil {
		return nil, err
	}
	tb := tw.tableByStream(p.Source)
	if tb == nil {
		return nil, fmt.Errorf("Source %s: the twin runs Pipes from this stack's DynamoDB streams only", p.Source)
	}
	switch sq.StartingPosition {
	case "TRIM_HORIZON", "LATEST":
	default:
		return nil, fmt.Errorf("DynamoDBStreamParameters.StartingPosition %q: want TRIM_HORIZON or LATEST", sq.StartingPosition)
	}
	policy := batchPolicy{
		size:       cfn.IntOr(sq.BatchSize, 100),
		bisect:     sq.OnPartialBatchItemFailure == "AUTOMATIC_BISECT",
		maxRetries: cfn.IntOr(sq.MaximumRetryAttempts, -1),
		window:     time.Duration(cfn.IntOr(sq.MaximumBatchingWindowInSeconds, 0)) * time.Second,
		maxAge:     maxAge,
	}
	if sq.OnPartialBatchItemFailure != "" && !policy.bisect {
		return nil, fmt.Errorf("OnPartialBatchItemFailure %q: want AUTOMATIC_BISECT", sq.OnPartialBatchItemFailure)
	}
	if pf := cfn.IntOr(sq.ParallelizationFactor, 1); pf > 1 {
		tw.log.Warn("twin: ParallelizationFactor > 1 runs as 1 locally", obs.KeyLogicalID, res.LogicalID, obs.KeyParallelizationFactor, pf)
	}
	var dlq *queue
	if sq.DeadLetterConfig != nil && sq.DeadLetterConfig.Arn != "" {
		if dlq = tw.queueByARN(sq.DeadLetterConfig.Arn); dlq == nil {
			return nil, fmt.Errorf("DeadLetterConfig.Arn %s: the twin supports this stack's SQS queues only", sq.DeadLetterConfig.Arn)
		}
		tw.failureQueues = append(tw.failureQueues, dlq.id)
	}
	var filters []*eventpattern.Pattern
	if sp.FilterCriteria != nil {
		var err error
		if filters, err = compileFilters(sp.FilterCriteria, eventpattern.ForPipes()); err != nil {
			return nil, fmt.Errorf("SourceParameters.%w", err)
		}
	}

	var enrich *function
	if p.Enrichment != "" {
		if enrich = tw.functionByRef(p.Enrichment); enrich == nil {
			return nil, fmt.Errorf("Enrichment %s: the twin enriches with this stack's Lambda functions only", p.Enrichment)
		}
		if ep := p.EnrichmentParameters; ep != nil && (ep.InputTemplate != "" || ep.HttpParameters != nil) {
			return nil, errors.New("EnrichmentParameters (InputTemplate, HttpParameters) are not supported by the twin")
		}
	}
	target := tw.queueByARN(p.Target)
	if target == nil {
		return nil, fmt.Errorf("Target %s: the twin sends to this stack's SQS queues only", p.Target)
	}
	if policy.size > sqsTargetMaxBatch {
		return nil, fmt.Errorf("DynamoDBStreamParameters.BatchSize %d: a Pipe's batch cannot exceed its target's (SQS: %d)", policy.size, sqsTargetMaxBatch)
	}
	var group, dedup *targetParam
	if tp := p.TargetParameters; tp != nil {
		if tp.InputTemplate != "" {
			return nil, errors.New("TargetParameters.InputTemplate is not supported by the twin")
		}
		if q := tp.SqsQueueParameters; q != nil {
			var err error
			if group, err = newTargetParam("MessageGroupId", q.MessageGroupId); err != nil {
				return nil, err
			}
			if dedup, err = newTargetParam("MessageDeduplicationId", q.MessageDeduplicationId); err != nil {
				return nil, err
			}
		}
	}
	if target.fifo && group == nil {
		return nil, fmt.Errorf("Target %s is a FIFO queue: TargetParameters.SqsQueueParameters.MessageGroupId is required", target.id)
	}

	pp := &pipe{tw: tw, id: res.LogicalID, arn: arn, enrich: enrich, target: target, group: group, dedup: dedup}
	c := &streamConsumer{tw: tw, source: res.LogicalID, streamARN: tb.streamARN, latest: sq.StartingPosition == "LATEST", policy: policy, filters: filters}
	c.deliver = pp.deliver
	c.giveUp = func(ctx context.Context, f failure) {
		// The content of a Pipe's DLQ message is not documented; it carries
		// the same metadata as a Lambda on-failure record (never the records),
		// naming the Pipe instead of a function.
		doc := map[string]any{
			"requestContext": map[string]any{
				"requestId": requestIDOr(f.last.requestID), "pipeArn": arn,
				"condition": f.condition, "approximateInvokeCount": f.invokes,
			},
			"responseContext":    map[string]any{"errorMessage": f.last.reason},
			"version":            "1.0",
			"timestamp":          isoMillis(time.Now()),
			"DDBStreamBatchInfo": batchInfo(tb.streamARN, f),
		}
		tw.destination(ctx, res.LogicalID, dlq, f, doc, "dead-letter queue")
	}
	pp.consumer = c
	if p.DesiredState == "STOPPED" {
		tw.log.Info("twin: pipe stopped in the template", obs.KeyLogicalID, res.LogicalID)
		return r, nil
	}
	r.poller = c
	tw.log.Info("twin: pipe", obs.KeyLogicalID, res.LogicalID, obs.KeySource, tb.id, obs.KeyEnrichment, funcID(enrich), obs.KeyTarget, target.id,
		obs.KeyBatchSize, policy.size, obs.KeyBisect, policy.bisect, obs.KeyMaxRetries, policy.maxRetries, obs.KeyMaxAge, policy.maxAge,
		obs.KeyDLQ, destID(dlq), obs.KeyFilters, len(filters))
	return r, nil
}

func funcID(f *function) string {
	if f == nil {
		return ""
	}
	return f.id
}

type pipe struct {
	tw       *Twin
	id, arn  string
	enrich   *function
	target   *queue
	group    *targetParam
	dedup    *targetParam
	consumer *streamConsumer
}

// deliver runs one batch through the Pipe: enrichment (synchronous; any
// error fails the batch), then the target. Failures are whole-batch: an
// enrichment cannot fail part of a batch, and a target parameter that does
// not resolve for one event fails them all.
func (pp *pipe) deliver(ctx context.Context, recs []*record, attempt int) (attemptResult, error) {
	events := make([]json.RawMessage, len(recs))
	for i, r := range recs {
		events[i] = r.JSON
	}
	var requestID string
	if pp.enrich != nil {
		var b bytes.Buffer
		b.WriteByte('[')
		for i, r := range recs {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(r.JSON)
		}
		b.WriteByte(']')
		res, err := pp.tw.invoke(ctx, pp.enrich, pp.id, b.Bytes(), seqs(recs), keysOf(recs), attempt)
		if err != nil {
			return attemptResult{}, err
		}
		requestID = res.RequestID
		if res.Err != nil {
			return attemptResult{reason: "enrichment " + pp.enrich.id + " failed: " + res.Err.Error(), functionError: true, requestID: requestID}, nil
		}
		var skip bool
		events, skip = enrichmentEvents(res.Payload)
		if skip {
			return attemptResult{ok: len(recs), requestID: requestID, detail: "enrichment returned nothing: target not invoked"}, nil
		}
		if len(events) > sqsTargetMaxBatch {
			reason := fmt.Sprintf("enrichment returned %d events; the SQS target takes at most %d per batch, so it is not invoked", len(events), sqsTargetMaxBatch)
			pp.tw.journal.add(Entry{Kind: KindFailed, Source: pp.id, RequestID: requestID, Items: seqs(recs), Outcome: "target not invoked", Detail: reason})
			return attemptResult{reason: reason, requestID: requestID}, nil
		}
	}
	sent, reason := pp.send(ctx, events)
	if reason != "" {
		pp.tw.journal.add(Entry{Kind: KindFailed, Source: pp.id, RequestID: requestID, Items: seqs(recs), Keys: keysOf(recs), Outcome: "target " + pp.target.id + ": batch failed", Detail: reason})
		return attemptResult{reason: reason, requestID: requestID}, nil
	}
	return attemptResult{ok: len(recs), requestID: requestID, detail: fmt.Sprintf("%d message(s) to %s: %s", len(sent), pp.target.id, strings.Join(sent, "; "))}, nil
}

// enrichmentEvents splits an enrichment response into target events. An
// empty response ("", {}, [], null) means the target is skipped.
func enrichmentEvents(payload []byte) ([]json.RawMessage, bool) {
	p := bytes.TrimSpace(payload)
	switch string(p) {
	case "", `""`, "{}", "[]", "null":
		return nil, true
	}
	if p[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(p, &arr) == nil {
			return arr, false
		}
	}
	return []json.RawMessage{p}, false
}

// send sends the events to the SQS target in one SendMessageBatch. It
// returns a description of each message sent, or why the batch failed.
// SQS accepts a duplicate (a deduplication id already used within five
// minutes, per group when DeduplicationScope=messageGroup) and drops it,
// answering with the first message's id: each such drop is journaled.
func (pp *pipe) send(ctx context.Context, events []json.RawMessage) ([]string, string) {
	type planned struct{ group, dedup, wire string }
	plans := make([]planned, len(events))
	entries := make([]sqstypes.SendMessageBatchRequestEntry, len(events))
	for i, ev := range events {
		body := string(ev)
		var s string
		if json.Unmarshal(ev, &s) == nil {
			body = s // a JSON string event is sent as its text
		}
		doc, err := decodeJSON(ev)
		if err != nil {
			return nil, fmt.Sprintf("event %d of %d is not JSON: %v", i+1, len(events), err)
		}
		e := sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(body)}
		var pl planned
		if pp.group != nil {
			if pl.group, err = pp.group.value(doc); err != nil {
				return nil, fmt.Sprintf("event %d of %d: %v (event: %s)", i+1, len(events), err, clip(ev, 300))
			}
			e.MessageGroupId = aws.String(pl.group)
		}
		if pp.dedup != nil {
			if pl.dedup, err = pp.dedup.value(doc); err != nil {
				return nil, fmt.Sprintf("event %d of %d: %v (event: %s)", i+1, len(events), err, clip(ev, 300))
			}
		} else if pp.target.contentBased {
			pl.dedup = contentDedup(body)
		}
		if pl.dedup != "" {
			pl.wire = pp.target.wireDedup(pl.group, pl.dedup)
			e.MessageDeduplicationId = aws.String(pl.wire)
		}
		plans[i], entries[i] = pl, e
	}
	out, err := pp.tw.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(pp.target.url), Entries: entries})
	if err != nil {
		return nil, "SendMessageBatch: " + err.Error()
	}
	if len(out.Failed) > 0 {
		var parts []string
		for _, f := range out.Failed {
			parts = append(parts, fmt.Sprintf("entry %s: %s %s", aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message)))
		}
		return nil, "SendMessageBatch refused " + strings.Join(parts, "; ")
	}
	// In entry order, so a duplicate within the batch follows its first.
	ids := make([]string, len(events))
	for _, s := range out.Successful {
		if i, err := strconv.Atoi(aws.ToString(s.Id)); err == nil && i >= 0 && i < len(ids) {
			ids[i] = aws.ToString(s.MessageId)
		}
	}
	now := time.Now()
	var sent []string
	for i, pl := range plans {
		desc := fmt.Sprintf("group=%s dedup=%s id=%s", pl.group, pl.dedup, ids[i])
		if dup := pp.target.observe(pl.wire, ids[i], now); dup != nil {
			pp.tw.journal.add(Entry{Kind: KindDuplicate, Source: pp.id, Items: []string{ids[i]},
				Keys:    []string{"MessageGroupId=" + pl.group + " MessageDeduplicationId=" + pl.dedup},
				Outcome: "dropped by SQS: deduplication id already used within 5 minutes",
				Detail:  fmt.Sprintf("first sent as message %s at %s; SQS answered with that message's id", dup.messageID, dup.at.Format(time.RFC3339Nano))})
			desc += " DROPPED as duplicate"
		}
		sent = append(sent, desc)
	}
	return sent, ""
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func clip(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}
