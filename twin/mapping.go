package twin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/eventpattern"
)

const reportBatchItemFailures = "ReportBatchItemFailures"

// createMapping sets up a Lambda event source mapping: a DynamoDB stream or
// an SQS queue of this stack feeding a function of this stack.
func (tw *Twin) createMapping(ctx context.Context, res *cfn.Resource) (*resource, error) {
	var p cfn.MappingProps
	if err := tw.rv.Decode(res, &p); err != nil {
		return nil, err
	}
	fn := tw.functionByRef(p.FunctionName)
	if fn == nil {
		return nil, fmt.Errorf("FunctionName %q is no function of this stack", p.FunctionName)
	}
	id := uuid.NewString()
	r := &resource{id: res.LogicalID, typ: res.Type, ref: id, attrs: map[string]any{
		"Id": id, "EventSourceMappingArn": arnOf("lambda", "event-source-mapping:"+id),
	}}
	if p.Enabled != nil && !bool(*p.Enabled) {
		tw.log.Info("twin: mapping disabled in the template", obs.KeyLogicalID, res.LogicalID)
		return r, nil
	}
	// Lambda validates the mapping's parameters before it looks at the source.
	maxAge, err := maxRecordAge("MaximumRecordAgeInSeconds", p.MaximumRecordAgeInSeconds)
	if err != nil {
		return nil, err
	}
	filters, err := compileFilters(p.FilterCriteria)
	if err != nil {
		return nil, err
	}
	report := slices.Contains(p.FunctionResponseTypes, reportBatchItemFailures)
	if tb := tw.tableByStream(p.EventSourceArn); tb != nil {
		c, err := tw.streamMapping(res.LogicalID, p, fn, tb, filters, report, maxAge)
		if err != nil {
			return nil, err
		}
		r.poller = c
		return r, nil
	}
	if q := tw.queueByARN(p.EventSourceArn); q != nil {
		m, err := tw.sqsMapping(res.LogicalID, p, fn, q, filters, report)
		if err != nil {
			return nil, err
		}
		r.poller = m
		return r, nil
	}
	return nil, fmt.Errorf("EventSourceArn %s: the twin maps this stack's DynamoDB streams and SQS queues only", p.EventSourceArn)
}

// maxRecordAgeMax is the largest MaximumRecordAgeInSeconds, a week.
const maxRecordAgeMax = 604800

// maxRecordAge reads a stream source's MaximumRecordAgeInSeconds (name says
// which property, for the error): -1 or absent means no limit, else 60 to
// 604800 seconds. AWS refuses 0 to 59 although they lie within the
// parameter's type range: "The minimum valid value for maximum record age is
// 60s. Although values less than 60 and greater than -1 fall within the
// parameter's absolute range, they are not allowed." (Lambda API reference,
// https://docs.aws.amazon.com/lambda/latest/api/API_CreateEventSourceMapping.html;
// Lambda answers InvalidParameterValueException "MaximumRecordAgeInSeconds
// must be either -1 (forever) or between 60 and 604800 (inclusive)",
// hashicorp/terraform-provider-aws#16113). The Pipes reference
// (https://docs.aws.amazon.com/eventbridge/latest/pipes-reference/API_PipeSourceDynamoDBStreamParameters.html)
// states only -1 to 604800; the twin holds Pipes to Lambda's rule as well,
// which is unconfirmed for Pipes.
func maxRecordAge(name string, v *cfn.Int) (time.Duration, error) {
	n := cfn.IntOr(v, -1)
	switch {
	case n == -1:
		return 0, nil
	case n >= 60 && n <= maxRecordAgeMax:
		return time.Duration(n) * time.Second, nil
	}
	return 0, fmt.Errorf("%s %d: must be -1 (forever) or between 60 and %d (inclusive), as AWS requires", name, n, maxRecordAgeMax)
}

func compileFilters(fc *cfn.FilterCriteria, opts ...eventpattern.Option) ([]*eventpattern.Pattern, error) {
	if fc == nil {
		return nil, nil
	}
	var out []*eventpattern.Pattern
	for i, f := range fc.Filters {
		p, err := eventpattern.Compile([]byte(f.Pattern), opts...)
		if err != nil {
			return nil, fmt.Errorf("FilterCriteria.Filters[%d].Pattern: %w", i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// streamMapping is a Lambda event source mapping on a DynamoDB stream.
func (tw *Twin) streamMapping(id string, p cfn.MappingProps, fn *function, tb *table, filters []*eventpattern.Pattern, report bool, maxAge time.Duration) (*streamConsumer, error) {
	switch p.StartingPosition {
	case "TRIM_HORIZON", "LATEST":
	default:
		return nil, fmt.Errorf("StartingPosition %q: a DynamoDB stream mapping takes TRIM_HORIZON or LATEST", p.StartingPosition)
	}
	if p.TumblingWindowInSeconds != nil && *p.TumblingWindowInSeconds > 0 {
		return nil, errors.New("TumblingWindowInSeconds: tumbling windows are not supported by the twin")
	}
	if pf := cfn.IntOr(p.ParallelizationFactor, 1); pf > 1 {
		tw.log.Warn("twin: ParallelizationFactor > 1 runs as 1 locally: one batch per shard at a time (per-key order holds either way)", obs.KeyLogicalID, id, obs.KeyParallelizationFactor, pf)
	}
	policy := batchPolicy{
		size:       cfn.IntOr(p.BatchSize, 100),
		bisect:     bool(p.BisectBatchOnFunctionError),
		maxRetries: cfn.IntOr(p.MaximumRetryAttempts, -1),
		window:     time.Duration(cfn.IntOr(p.MaximumBatchingWindowInSeconds, 0)) * time.Second,
		maxAge:     maxAge,
	}
	if policy.size < 1 || policy.size > 10000 {
		return nil, fmt.Errorf("BatchSize %d: want 1 to 10000", policy.size)
	}
	var dest *queue
	if p.DestinationConfig != nil && p.DestinationConfig.OnFailure != nil && p.DestinationConfig.OnFailure.Destination != "" {
		d := p.DestinationConfig.OnFailure.Destination
		if dest = tw.queueByARN(d); dest == nil {
			return nil, fmt.Errorf("DestinationConfig.OnFailure.Destination %s: the twin supports this stack's SQS queues only", d)
		}
		if dest.fifo {
			return nil, fmt.Errorf("DestinationConfig.OnFailure.Destination %s is a FIFO queue: stream mappings need a standard queue", dest.id)
		}
		tw.failureQueues = append(tw.failureQueues, dest.id)
	}
	c := &streamConsumer{tw: tw, source: id, streamARN: tb.streamARN, latest: p.StartingPosition == "LATEST", policy: policy, filters: filters}
	c.deliver = func(ctx context.Context, recs []*record, attempt int) (attemptResult, error) {
		payload := recordsPayload(recs)
		res, err := tw.invoke(ctx, fn, id, payload, seqs(recs), keysOf(recs), attempt)
		if err != nil {
			return attemptResult{}, err
		}
		if res.Err != nil {
			return attemptResult{reason: "function error: " + res.Err.Error(), functionError: true, requestID: res.RequestID}, nil
		}
		if !report {
			return attemptResult{ok: len(recs), requestID: res.RequestID}, nil
		}
		ok, reason := partialStream(res.Payload, recs)
		if reason != "" {
			tw.journal.add(Entry{Kind: KindFailed, Source: id, Function: fn.id, RequestID: res.RequestID, Items: seqs(recs[ok:]), Outcome: "batch item failures", Detail: reason})
		}
		return attemptResult{ok: ok, reason: reason, requestID: res.RequestID}, nil
	}
	c.giveUp = func(ctx context.Context, f failure) {
		doc := map[string]any{
			"requestContext": map[string]any{
				"requestId": requestIDOr(f.last.requestID), "functionArn": fn.arn,
				"condition": f.condition, "approximateInvokeCount": f.invokes,
			},
			"version":            "1.0",
			"timestamp":          isoMillis(time.Now()),
			"DDBStreamBatchInfo": batchInfo(tb.streamARN, f),
		}
		if f.invokes > 0 {
			rc := map[string]any{"statusCode": 200, "executedVersion": "$LATEST"}
			if f.last.functionError {
				rc["functionError"] = "Unhandled"
			}
			doc["responseContext"] = rc
		}
		tw.destination(ctx, id, dest, f, doc, "on-failure destination")
	}
	tw.log.Info("twin: stream mapping", obs.KeyLogicalID, id, obs.KeyFunction, fn.id, obs.KeyTable, tb.id, obs.KeyBatchSize, policy.size,
		obs.KeyBisect, policy.bisect, obs.KeyMaxRetries, policy.maxRetries, obs.KeyMaxAge, policy.maxAge, obs.KeyReportBatchItemFailures, report,
		obs.KeyDestination, destID(dest), obs.KeyFilters, len(filters))
	return c, nil
}

func destID(q *queue) string {
	if q == nil {
		return ""
	}
	return q.id
}

func requestIDOr(id string) string {
	if id != "" {
		return id
	}
	return uuid.NewString()
}

// destination sends a failure record for f to q and journals it; without
// a destination the records are dropped, loudly.
func (tw *Twin) destination(ctx context.Context, source string, q *queue, f failure, doc map[string]any, what string) {
	e := Entry{Kind: KindDestination, Source: source, Shard: f.shard, RequestID: f.last.requestID, Items: seqs(f.recs), Keys: keysOf(f.recs), Attempt: f.invokes}
	if q == nil {
		e.Outcome = f.condition + ": no " + what + ": records dropped"
		e.Detail = f.last.reason
		tw.journal.add(e)
		return
	}
	body, err := json.Marshal(doc)
	if err != nil {
		tw.log.Error("twin: failure record", obs.KeySource, source, obs.Err(err))
		return
	}
	msgID, err := tw.sendToQueue(ctx, q, body, source)
	if err != nil {
		e.Outcome = f.condition + ": " + what + " " + q.id + " not reached: " + err.Error()
	} else {
		e.Outcome = f.condition + ": metadata to " + q.id
		e.Detail = "message " + msgID + "; last failure: " + f.last.reason
	}
	tw.journal.add(e)
}

// recordsPayload is a DynamoDB event: {"Records":[…]}.
func recordsPayload(recs []*record) []byte {
	var b bytes.Buffer
	b.WriteString(`{"Records":[`)
	for i, r := range recs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(r.JSON)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// partialStream reads a DynamoDB partial batch response. It returns how
// many leading records succeeded (the checkpoint is the lowest failed
// sequence number) and, when any failed, why. Per AWS: an empty or null list
// is success; an empty, null or unknown itemIdentifier fails the whole
// batch.
func partialStream(payload []byte, recs []*record) (int, string) {
	var resp struct {
		BatchItemFailures []map[string]any `json:"batchItemFailures"`
	}
	if p := bytes.TrimSpace(payload); len(p) == 0 || bytes.Equal(p, []byte("null")) || p[0] != '{' {
		return len(recs), ""
	}
	if err := json.Unmarshal(payload, &resp); err != nil {
		return 0, "unreadable partial batch response: " + err.Error()
	}
	if len(resp.BatchItemFailures) == 0 {
		return len(recs), ""
	}
	lowest := len(recs)
	var failed []string
	for _, f := range resp.BatchItemFailures {
		id, _ := f["itemIdentifier"].(string)
		if id == "" {
			return 0, "batchItemFailures has an empty or null itemIdentifier: the whole batch failed"
		}
		i := slices.IndexFunc(recs, func(r *record) bool { return r.Seq == id })
		if i < 0 {
			return 0, "batchItemFailures names " + id + ", not a sequence number of this batch: the whole batch failed"
		}
		lowest = min(lowest, i)
		failed = append(failed, id)
	}
	return lowest, "function reported failed items " + strings.Join(failed, ", ") + "; checkpoint before " + recs[lowest].Seq
}
