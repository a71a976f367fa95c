package repair

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/fourlanes/fourlanes/pkg/changefeed"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// BatchInfo is the metadata a stream source's failure destination receives
// instead of the records (Lambda's DDBStreamBatchInfo; AWS-FACTS §2).
type BatchInfo struct {
	ShardID                         string          `json:"shardId"`
	StartSequenceNumber             string          `json:"startSequenceNumber"`
	EndSequenceNumber               string          `json:"endSequenceNumber"`
	ApproximateArrivalOfFirstRecord json.RawMessage `json:"approximateArrivalOfFirstRecord,omitempty"`
	ApproximateArrivalOfLastRecord  json.RawMessage `json:"approximateArrivalOfLastRecord,omitempty"`
	BatchSize                       int             `json:"batchSize,omitempty"`
	StreamARN                       string          `json:"streamArn"`
}

// ErrUnrecognisedBody: a metadata queue's message is not a batch-info record.
var ErrUnrecognisedBody = errors.New("unrecognised body: not a DDBStreamBatchInfo record")

// ParseBatchInfo reads a Lambda on-failure record ({"DDBStreamBatchInfo":
// {...}, "requestContext": ..., ...}) or a bare batch-info object, the shape
// assumed for the Pipe DLQ (unconfirmed). The stream ARN, shard and both
// sequence numbers are required.
func ParseBatchInfo(body []byte) (BatchInfo, error) {
	var wrapped struct {
		Info *BatchInfo `json:"DDBStreamBatchInfo"`
	}
	if err := json.Unmarshal(body, &wrapped); err != nil {
		return BatchInfo{}, fmt.Errorf("%w: %v", ErrUnrecognisedBody, err)
	}
	var bi BatchInfo
	if wrapped.Info != nil {
		bi = *wrapped.Info
	} else if err := json.Unmarshal(body, &bi); err != nil {
		return BatchInfo{}, fmt.Errorf("%w: %v", ErrUnrecognisedBody, err)
	}
	if bi.StreamARN == "" || bi.ShardID == "" || bi.StartSequenceNumber == "" || bi.EndSequenceNumber == "" {
		return bi, fmt.Errorf("%w: streamArn, shardId, startSequenceNumber and endSequenceNumber are required", ErrUnrecognisedBody)
	}
	if seqLess(bi.EndSequenceNumber, bi.StartSequenceNumber) {
		return bi, fmt.Errorf("%w: endSequenceNumber %s is before startSequenceNumber %s", ErrUnrecognisedBody, bi.EndSequenceNumber, bi.StartSequenceNumber)
	}
	return bi, nil
}

// Window returns the batch's arrival window (first, last record), if the
// record says: RFC 3339 strings, or epoch seconds.
func (b BatchInfo) Window() (from, to time.Time, ok bool) {
	from, ok1 := parseWhen(b.ApproximateArrivalOfFirstRecord)
	to, ok2 := parseWhen(b.ApproximateArrivalOfLastRecord)
	switch {
	case ok1 && ok2:
		return from, to, true
	case ok1:
		return from, from, true
	case ok2:
		return to, to, true
	}
	return time.Time{}, time.Time{}, false
}

func parseWhen(raw json.RawMessage) (time.Time, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		t, err := time.Parse(time.RFC3339Nano, s)
		return t, err == nil
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil && f > 0 {
		sec := int64(f)
		return time.Unix(sec, int64((f-float64(sec))*1e9)).UTC(), true
	}
	return time.Time{}, false
}

// seqLess compares two stream sequence numbers (decimal strings of any length).
func seqLess(a, b string) bool {
	x, ok1 := new(big.Int).SetString(a, 10)
	y, ok2 := new(big.Int).SetString(b, 10)
	if !ok1 || !ok2 {
		return a < b
	}
	return x.Cmp(y) < 0
}

// errStreamGone: the stream no longer has the range (trimmed after its 24 h
// retention, or the stream or shard is gone).
var errStreamGone = errors.New("the stream no longer has these records")

func gone(err error) bool {
	var trimmed *streamtypes.TrimmedDataAccessException
	var missing *streamtypes.ResourceNotFoundException
	return errors.As(err, &trimmed) || errors.As(err, &missing)
}

// fetch reads the records startSequenceNumber..endSequenceNumber of the
// batch's shard. complete is false when the shard ended (or kept answering
// empty pages) before the end sequence number.
func (r *Repairer) fetch(ctx context.Context, bi BatchInfo) (recs []streamtypes.Record, complete bool, err error) {
	it, err := r.cfg.Streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: aws.String(bi.StreamARN), ShardId: aws.String(bi.ShardID),
		ShardIteratorType: streamtypes.ShardIteratorTypeAtSequenceNumber, SequenceNumber: aws.String(bi.StartSequenceNumber),
	})
	if err != nil {
		if gone(err) {
			return nil, false, fmt.Errorf("%w: %v", errStreamGone, err)
		}
		return nil, false, fmt.Errorf("shard iterator at %s: %w", bi.StartSequenceNumber, err)
	}
	iter := it.ShardIterator
	for empty := 0; iter != nil && empty < 3; {
		if err := ctx.Err(); err != nil {
			return recs, false, err
		}
		page, err := r.cfg.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
		if err != nil {
			if gone(err) {
				return recs, false, fmt.Errorf("%w: %v", errStreamGone, err)
			}
			return recs, false, fmt.Errorf("read records of %s: %w", bi.ShardID, err)
		}
		for _, rec := range page.Records {
			seq := ""
			if rec.Dynamodb != nil {
				seq = aws.ToString(rec.Dynamodb.SequenceNumber)
			}
			if seqLess(bi.EndSequenceNumber, seq) {
				return recs, true, nil
			}
			recs = append(recs, rec)
			if !seqLess(seq, bi.EndSequenceNumber) {
				return recs, true, nil
			}
		}
		if len(page.Records) == 0 {
			empty++
		} else {
			empty = 0
		}
		iter = page.NextShardIterator
	}
	return recs, false, nil
}

// drainMetadata drains a queue of batch-info messages (pipe_dlq or
// changefeed_dlq). Messages that stay open are left in the queue, invisible
// until the run ends.
func (r *Repairer) drainMetadata(ctx context.Context, sr *SourceReport, src, url string, end time.Time) (bool, error) {
	return r.drain(ctx, url, end, func(m sqstypes.Message) bool {
		return r.metadataMessage(ctx, sr, src, url, m)
	})
}

// metadataMessage repairs one message and reports whether it was deleted.
func (r *Repairer) metadataMessage(ctx context.Context, sr *SourceReport, src, url string, m sqstypes.Message) bool {
	it := Item{Source: src, MessageID: aws.ToString(m.MessageId)}
	open := func(reason string, err error) {
		it.Outcome, it.Reason = Open, reason+"; the message stays in the queue"
		if err != nil {
			it.Error = err.Error()
		}
		r.record(ctx, sr, it)
	}
	bi, err := ParseBatchInfo([]byte(aws.ToString(m.Body)))
	if err != nil {
		open("unrecognised body", err)
		return false
	}
	it.Stream = &StreamRange{ARN: bi.StreamARN, Shard: bi.ShardID, Start: bi.StartSequenceNumber, End: bi.EndSequenceNumber}
	table := changefeed.TableOfStream(bi.StreamARN)
	switch src {
	case SourcePipeDLQ:
		if table != r.cfg.EventsTable {
			open(fmt.Sprintf("the stream is of table %q, not the events table %q", table, r.cfg.EventsTable), nil)
			return false
		}
	case SourceChangeFeedDLQ:
		if _, ok := r.cfg.Feed.Entity(table); !ok {
			open(fmt.Sprintf("the stream is of table %q, which the change feed does not track", table), nil)
			return false
		}
	}
	recs, complete, err := r.fetch(ctx, bi)
	var fixErr error
	switch {
	case errors.Is(err, errStreamGone):
		it.Via = ViaTable
		var why string
		if src == SourcePipeDLQ {
			it.Records, why, fixErr = r.sweepAll(ctx)
		} else {
			it.Records, why, fixErr = r.itemsFromTable(ctx, table, it.MessageID)
		}
		if fixErr != nil || why != "" {
			open("stream records expired; "+why, fixErr)
			return false
		}
		it.Reason = "the stream no longer had the records; re-read from the table"
		if src == SourcePipeDLQ {
			it.Reason = "the stream no longer had the records; every tenant's events above its delivery watermarks were redelivered from the log, and every DURABLE subscription is settled through the head"
		}
		if src == SourceChangeFeedDLQ {
			it.Reason += " (deletes in that window cannot be recovered from a table)"
		}
	case err != nil:
		open("cannot read the stream", err)
		return false
	case len(recs) == 0:
		open("the stream returned no records for the range", nil)
		return false
	default:
		it.Via, it.Records = ViaStream, len(recs)
		if src == SourcePipeDLQ {
			fixErr = r.redeliverRecords(ctx, &it, recs)
		} else {
			fixErr = r.refeedRecords(ctx, bi.StreamARN, recs)
		}
		if fixErr != nil {
			open("re-running the records failed", fixErr)
			return false
		}
		if !complete {
			open(fmt.Sprintf("the stream ended before the end sequence number (read %d records)", len(recs)), nil)
			return false
		}
		it.Reason = "re-ran the records read from the stream"
	}
	if err := r.delete(ctx, url, m); err != nil {
		open("repaired, but the message could not be deleted", err)
		return false
	}
	it.Outcome = Fixed
	r.record(ctx, sr, it)
	return true
}

// redeliverRecords redelivers the event rows among recs, each re-read from
// the log and checked against the stream's image. Head rows and anything but
// an INSERT are not events to deliver and are skipped.
func (r *Repairer) redeliverRecords(ctx context.Context, it *Item, recs []streamtypes.Record) error {
	var errs []error
	it.Subscriptions = map[string]string{}
	settled := map[string][]int64{} // tenant → seqs settled here
	defer func() {
		for tenant, seqs := range settled {
			if _, err := r.cfg.Deliverer.Settled(ctx, tenant, seqs); err != nil {
				r.cfg.Logger.WarnContext(ctx, "redelivered from the stream, but the delivery watermarks could not be moved; the unsettled source moves them", obs.Err(err))
			}
		}
	}()
	for _, rec := range recs {
		if rec.EventName != streamtypes.OperationTypeInsert || rec.Dynamodb == nil {
			continue
		}
		img, err := envelope.ItemFromStreamsSDK(rec.Dynamodb.NewImage)
		if err != nil {
			errs = append(errs, fmt.Errorf("record %s: %w", aws.ToString(rec.EventID), err))
			continue
		}
		if k, _ := img[keys.AttrKind].(*types.AttributeValueMemberS); k == nil || k.Value != keys.KindEvent {
			continue
		}
		streamed, err := envelope.FromItem(img)
		if err != nil {
			errs = append(errs, fmt.Errorf("record %s: %w", aws.ToString(rec.EventID), err))
			continue
		}
		logged, err := r.readEvent(ctx, streamed.TenantID, streamed.Seq)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if logged.ID != streamed.ID || logged.Hash != streamed.Hash {
			errs = append(errs, fmt.Errorf("tenant %s seq %d: the stream's image (%s, %s) differs from the log's (%s, %s): run reconcile on the tenant",
				logged.TenantID, logged.Seq, streamed.ID, streamed.Hash, logged.ID, logged.Hash))
			continue
		}
		subs, why, err := r.deliver(ctx, logged)
		for k, v := range subs {
			it.Subscriptions[logged.ID+" "+k] = v
		}
		if why != "" {
			errs = append(errs, fmt.Errorf("tenant %s seq %d: %s: %v", logged.TenantID, logged.Seq, why, err))
			continue
		}
		settled[logged.TenantID] = append(settled[logged.TenantID], logged.Seq)
	}
	return errors.Join(errs...)
}

// refeedRecords runs the records through the change feed again, in stream
// order (projections apply by version, so repeats are harmless). A record
// the feed rejects was rejected the first time too: it is not an error here.
func (r *Repairer) refeedRecords(ctx context.Context, arn string, recs []streamtypes.Record) error {
	var errs []error
	for _, rec := range recs {
		cr, err := changefeed.FromStreams(rec, arn)
		if err == nil {
			_, err = r.cfg.Feed.Apply(ctx, cr)
		}
		if err != nil && !errors.Is(err, changefeed.ErrRejected) {
			errs = append(errs, fmt.Errorf("record %s (seq %s): %w", cr.EventID, cr.SequenceNumber, err))
		}
	}
	return errors.Join(errs...)
}

// itemsFromTable re-reads every item of a tracked table: each Reapplier
// applies it at its current version (closing gaps of lost versions), then it
// is recorded and dispatched as a change event of that version. The scan
// saves its position after each page (Config.Cursors), under the table and
// the message it repairs, so that a run that ends first is resumed by the
// next, which receives the message again, instead of starting over.
func (r *Repairer) itemsFromTable(ctx context.Context, table, messageID string) (int, string, error) {
	ent, _ := r.cfg.Feed.Entity(table)
	n := 0
	var errs []error
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	if r.cfg.ScanPage > 0 {
		in.Limit = aws.Int32(r.cfg.ScanPage)
	}
	name := "scan#" + table + "#" + messageID
	if r.cfg.Cursors != nil {
		from, err := r.cfg.Cursors.Cursor(ctx, name)
		if err != nil {
			return 0, "", err
		}
		if from != nil {
			r.cfg.Logger.InfoContext(ctx, "resuming a table re-read where an earlier run stopped", slog.String(obs.KeyTable, table), slog.String(obs.KeyMessageID, messageID))
		}
		in.ExclusiveStartKey = from
		r.onPage = func(next map[string]types.AttributeValue) error {
			return r.cfg.Cursors.SaveCursor(context.WithoutCancel(ctx), name, next, r.cfg.Now())
		}
		defer func() { r.onPage = nil }()
	}
	done, err := r.scan(ctx, in, func(item map[string]types.AttributeValue) {
		c, err := changefeed.FromItem(ent, table, item, r.cfg.Now())
		if err != nil {
			if !errors.Is(err, changefeed.ErrRejected) {
				errs = append(errs, err)
				return
			}
			r.cfg.Logger.WarnContext(ctx, "item re-read from its table is not a change event; skipped", slog.String(obs.KeyTable, table), obs.Err(err))
			return
		}
		n++
		for _, p := range r.cfg.Projections {
			if err := p.Repair(ctx, c.Envelope.TenantID, ent.Name, c.Payload.ID, c.Payload.Version, c.Payload.Item); err != nil {
				errs = append(errs, fmt.Errorf("%s %s v%d: %w", ent.Name, c.Payload.ID, c.Payload.Version, err))
			}
		}
		if err := r.cfg.Feed.Record(ctx, c); err != nil {
			errs = append(errs, err)
		}
	})
	if err != nil {
		return n, "", err
	}
	if !done {
		return n, "the " + table + " scan did not finish in this run", nil
	}
	return n, "", errors.Join(errs...)
}

// scan pages through a Scan until it ends (done) or ctx does.
func (r *Repairer) scan(ctx context.Context, in *dynamodb.ScanInput, each func(map[string]types.AttributeValue)) (bool, error) {
	for {
		if ctx.Err() != nil {
			return false, nil
		}
		out, err := r.cfg.DB.Scan(ctx, in)
		if err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			return false, fmt.Errorf("scan %s: %w", aws.ToString(in.TableName), err)
		}
		for _, it := range out.Items {
			each(it)
		}
		if r.onPage != nil {
			// The page is done: save where the next one starts (nil: done).
			if err := r.onPage(out.LastEvaluatedKey); err != nil {
				return false, err
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return true, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}
