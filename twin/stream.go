package twin

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/twin/eventpattern"
)

// Stream failure conditions, as Lambda names them in an on-failure record.
const (
	CondRetriesExhausted = "RetryAttemptsExhausted"
	CondRecordAge        = "RecordAgeExceeded"
)

// batchPolicy is how a stream consumer batches and retries: the settings
// shared by a Pipe's DynamoDBStreamParameters and a Lambda event source
// mapping.
type batchPolicy struct {
	size int
	// bisect: split a failing batch in two (BisectBatchOnFunctionError,
	// OnPartialBatchItemFailure=AUTOMATIC_BISECT). Splitting does not
	// consume retries.
	bisect bool
	// maxRetries after the first failure of a batch; -1 is infinite.
	maxRetries int
	// maxAge skips older records to the destination; 0 is infinite.
	maxAge time.Duration
	window time.Duration // MaximumBatchingWindowInSeconds
}

// attemptResult is what one delivery of a batch came to.
type attemptResult struct {
	// ok counts the leading records that succeeded; len(batch) when all did.
	ok int
	// reason says why the rest failed.
	reason string
	// functionError: the function itself failed (not a bad response, not
	// the target).
	functionError bool
	requestID     string
	// detail says what a successful delivery did (messages sent…).
	detail string
}

// failure is a run of records given up on.
type failure struct {
	shard     string
	recs      []*record
	condition string
	invokes   int
	last      attemptResult
}

// PollerStats are a poller's counters since it started.
type PollerStats struct {
	// Read counts records or messages taken from the source.
	Read int64
	// Filtered counts records a filter dropped.
	Filtered int64
	// Delivered counts records or messages handled successfully.
	Delivered int64
	// Failed counts records given up on (sent to the destination or DLQ).
	Failed int64
	// Invocations counts function invocations.
	Invocations int64
	// IteratorAge is, for stream sources, how far behind the source is now:
	// the age of the oldest record read and not yet done (0 when caught up).
	IteratorAge time.Duration
	// LastBatchAge is the age of the last record of the last batch when it
	// was done: what AWS publishes as the IteratorAge metric.
	LastBatchAge time.Duration
}

type counters struct {
	read, filtered, delivered, failed, invocations atomic.Int64
	iteratorAgeMS                                  atomic.Int64

	mu      sync.Mutex
	pending map[string]time.Time // shard → when its oldest undone record was written
}

func (c *counters) snapshot() PollerStats {
	st := PollerStats{
		Read: c.read.Load(), Filtered: c.filtered.Load(), Delivered: c.delivered.Load(), Failed: c.failed.Load(),
		Invocations: c.invocations.Load(), LastBatchAge: time.Duration(c.iteratorAgeMS.Load()) * time.Millisecond,
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.pending {
		st.IteratorAge = max(st.IteratorAge, time.Since(t))
	}
	return st
}

// behind records the oldest undone record of a shard (nil: none).
func (c *counters) behind(shard string, oldest *record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if oldest == nil {
		delete(c.pending, shard)
		return
	}
	if c.pending == nil {
		c.pending = map[string]time.Time{}
	}
	c.pending[shard] = oldest.Seen
}

// streamConsumer reads one table's stream for one Pipe or mapping: each
// shard in sequence order, a child shard only after its parent is done,
// one batch in flight per shard, with the batch policy's bisect, retries,
// record age and destination.
type streamConsumer struct {
	tw        *Twin
	source    string // the Pipe or mapping's logical ID
	streamARN string
	latest    bool // StartingPosition LATEST
	policy    batchPolicy
	filters   []*eventpattern.Pattern // any must match; none: all pass
	deliver   func(ctx context.Context, recs []*record, attempt int) (attemptResult, error)
	giveUp    func(ctx context.Context, f failure)
	// disabled holds every batch (UpdateEventSourceMapping Enabled=false):
	// the position is kept, and reading resumes there when enabled again.
	disabled atomic.Bool
	counters
}

func (c *streamConsumer) stats() PollerStats { return c.snapshot() }

func (c *streamConsumer) start(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.run(ctx)
	}()
}

type shardInfo struct {
	id, parent string
	closed     bool
}

func (c *streamConsumer) run(ctx context.Context) {
	done := map[string]bool{}
	running := map[string]bool{}
	startAt := map[string]streamtypes.ShardIteratorType{}
	finished := make(chan string)
	var workers sync.WaitGroup
	defer workers.Wait()
	first := true
	for {
		shards, err := c.describe(ctx)
		if err != nil && ctx.Err() == nil {
			c.tw.log.Error("twin: describe stream", obs.KeySource, c.source, obs.KeyStream, c.streamARN, obs.Err(err))
		}
		if err == nil && first {
			first = false
			if c.latest {
				// LATEST: begin at the tip of the open shards; closed ones hold
				// nothing newer than the mapping.
				for _, s := range shards {
					if s.closed {
						done[s.id] = true
					} else {
						startAt[s.id] = streamtypes.ShardIteratorTypeLatest
					}
				}
			}
		}
		for _, s := range readyShards(shards, done, running) {
			running[s.id] = true
			it := startAt[s.id]
			if it == "" {
				it = streamtypes.ShardIteratorTypeTrimHorizon
			}
			workers.Add(1)
			go func(id string, it streamtypes.ShardIteratorType) {
				defer workers.Done()
				c.readShard(ctx, id, it)
				select {
				case finished <- id:
				case <-ctx.Done():
				}
			}(s.id, it)
		}
		select {
		case id := <-finished:
			done[id] = true
			delete(running, id)
		case <-time.After(time.Second):
		case <-ctx.Done():
			return
		}
	}
}

// readyShards returns the shards to start reading now, in listed order:
// those neither done nor running whose parent is done, or is no longer in
// the stream (aged out), or that have none. A child never starts before its
// parent is read to the end, so records of one item stay in order across a
// split.
func readyShards(shards []shardInfo, done, running map[string]bool) []shardInfo {
	known := map[string]bool{}
	for _, s := range shards {
		known[s.id] = true
	}
	var out []shardInfo
	for _, s := range shards {
		if done[s.id] || running[s.id] {
			continue
		}
		if s.parent != "" && known[s.parent] && !done[s.parent] {
			continue
		}
		out = append(out, s)
	}
	return out
}

func (c *streamConsumer) describe(ctx context.Context) ([]shardInfo, error) {
	var out []shardInfo
	var start *string
	for {
		d, err := c.tw.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(c.streamARN), ExclusiveStartShardId: start})
		if err != nil {
			return nil, err
		}
		for _, s := range d.StreamDescription.Shards {
			closed := s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil
			out = append(out, shardInfo{id: aws.ToString(s.ShardId), parent: aws.ToString(s.ParentShardId), closed: closed})
		}
		if d.StreamDescription.LastEvaluatedShardId == nil {
			return out, nil
		}
		start = d.StreamDescription.LastEvaluatedShardId
	}
}

// readShard reads one shard to its end (or until ctx ends), handing batches
// to process one at a time. A fetcher reads ahead of the batches, so the
// twin notices each record within a poll interval of its write even while
// a batch is being retried (ApproximateCreationDateTime is rounded down to
// the second, too coarse for record ages).
func (c *streamConsumer) readShard(ctx context.Context, shard string, it streamtypes.ShardIteratorType) {
	fetched := make(chan []*record, 64)
	fetchDone := make(chan struct{})
	go func() {
		defer close(fetchDone)
		c.fetch(ctx, shard, it, fetched)
	}()
	defer func() { <-fetchDone }()

	var buf []*record
	closed := false
	take := func(b []*record, ok bool) {
		if !ok {
			closed = true
			return
		}
		buf = append(buf, b...)
		c.behind(shard, buf[0])
	}
	defer c.behind(shard, nil)
	for ctx.Err() == nil {
		if len(buf) == 0 {
			if closed {
				return // the shard is closed and read to its end
			}
			select {
			case b, ok := <-fetched:
				take(b, ok)
			case <-ctx.Done():
				return
			}
			continue
		}
	drain:
		for len(buf) < c.policy.size && !closed {
			select {
			case b, ok := <-fetched:
				take(b, ok)
			default:
				break drain
			}
		}
		// A batching window waits for a full batch, up to the window.
		if wait := c.policy.window - time.Since(buf[0].Seen); len(buf) < c.policy.size && !closed && wait > 0 {
			select {
			case b, ok := <-fetched:
				take(b, ok)
			case <-time.After(wait):
			case <-ctx.Done():
				return
			}
			if len(buf) < c.policy.size && time.Since(buf[0].Seen) < c.policy.window {
				continue
			}
		}
		for c.disabled.Load() {
			select {
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
				return
			}
		}
		n := min(c.policy.size, len(buf))
		if !c.process(ctx, shard, buf[:n]) {
			return
		}
		buf = buf[n:]
		if len(buf) > 0 {
			c.behind(shard, buf[0])
		} else {
			c.behind(shard, nil)
		}
	}
}

// fetch reads the shard from it onwards, sending each GetRecords' records
// that pass the filters to out, and closes out at the shard's end.
func (c *streamConsumer) fetch(ctx context.Context, shard string, it streamtypes.ShardIteratorType, out chan<- []*record) {
	iter, err := c.iterator(ctx, shard, it, "")
	if err != nil {
		return
	}
	var lastSeq string
	poll := c.tw.cfg.PollInterval
	for iter != nil {
		res, err := c.tw.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var expired *streamtypes.ExpiredIteratorException
			if errors.As(err, &expired) {
				if iter, err = c.iterator(ctx, shard, streamtypes.ShardIteratorTypeAfterSequenceNumber, lastSeq); err != nil {
					return
				}
				continue
			}
			var trimmed *streamtypes.TrimmedDataAccessException
			if errors.As(err, &trimmed) {
				// Records aged out of the stream before they were read; read
				// on from the oldest one left.
				if lastSeq != "" {
					c.tw.log.Error("twin: stream records trimmed before they were read", obs.KeySource, c.source, obs.KeyShard, shard, obs.KeyAfter, lastSeq)
				}
				if iter, err = c.iterator(ctx, shard, streamtypes.ShardIteratorTypeAfterSequenceNumber, lastSeq); err != nil {
					return
				}
				sleep(ctx, poll)
				continue
			}
			c.tw.log.Error("twin: get records", obs.KeySource, c.source, obs.KeyShard, shard, obs.KeyAfter, lastSeq, obs.Err(err))
			sleep(ctx, poll*10)
			continue
		}
		iter = res.NextShardIterator
		now := time.Now()
		var pass, filtered []*record
		for _, r := range res.Records {
			rec, err := newRecord(r, c.streamARN, shard, now)
			if err != nil {
				c.tw.log.Error("twin: unreadable stream record", obs.KeySource, c.source, obs.KeyShard, shard, obs.Err(err))
				continue
			}
			lastSeq = rec.Seq
			c.read.Add(1)
			if c.matches(rec) {
				pass = append(pass, rec)
			} else {
				filtered = append(filtered, rec)
			}
		}
		if len(filtered) > 0 {
			c.filtered.Add(int64(len(filtered)))
			c.tw.journal.add(Entry{Kind: KindFiltered, Source: c.source, Shard: shard, Items: seqs(filtered), Keys: keysOf(filtered), Outcome: "ok", Detail: "no filter pattern matched"})
		}
		if len(pass) > 0 {
			select {
			case out <- pass:
			case <-ctx.Done():
				return
			}
		}
		if len(res.Records) == 0 && iter != nil {
			sleep(ctx, poll)
			if ctx.Err() != nil {
				return
			}
		}
	}
	close(out)
}

func (c *streamConsumer) iterator(ctx context.Context, shard string, it streamtypes.ShardIteratorType, after string) (*string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(c.streamARN), ShardId: aws.String(shard), ShardIteratorType: it}
	if it == streamtypes.ShardIteratorTypeAfterSequenceNumber {
		if after == "" {
			in.ShardIteratorType = streamtypes.ShardIteratorTypeTrimHorizon
		} else {
			in.SequenceNumber = aws.String(after)
		}
	}
	for {
		out, err := c.tw.streams.GetShardIterator(ctx, in)
		if err == nil {
			return out.ShardIterator, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		c.tw.log.Error("twin: shard iterator", obs.KeySource, c.source, obs.KeyShard, shard, obs.Err(err))
		sleep(ctx, time.Second)
	}
}

func (c *streamConsumer) matches(r *record) bool {
	if len(c.filters) == 0 {
		return true
	}
	for _, p := range c.filters {
		if ok, err := p.Match(r.JSON); err == nil && ok {
			return true
		}
	}
	return false
}

type segment struct {
	recs    []*record
	invokes int
	retries int
	last    attemptResult
}

// process delivers one batch until every record in it has succeeded or been
// given up on, following AWS's rules: a failing batch is split in two when
// bisect is on (which does not count as a retry), a batch that cannot be
// split (one record, or bisect off) is retried until maxRetries, then its
// metadata goes to the destination; records past maxAge skip straight
// there. It returns false when ctx ended first.
func (c *streamConsumer) process(ctx context.Context, shard string, batch []*record) bool {
	queue := []*segment{{recs: batch}}
	for len(queue) > 0 {
		if ctx.Err() != nil {
			return false
		}
		seg := queue[0]
		if c.policy.maxAge > 0 {
			now := c.tw.cfg.Now()
			i := 0
			for i < len(seg.recs) && now.Sub(seg.recs[i].Seen) > c.policy.maxAge {
				i++
			}
			if i > 0 {
				c.fail(ctx, failure{shard: shard, recs: seg.recs[:i], condition: CondRecordAge, invokes: seg.invokes, last: seg.last})
				seg.recs = seg.recs[i:]
				if len(seg.recs) == 0 {
					queue = queue[1:]
					continue
				}
			}
		}
		seg.invokes++
		c.invocations.Add(1)
		a, err := c.deliver(ctx, seg.recs, seg.invokes)
		if err != nil {
			return false // ctx ended mid-delivery: nothing is recorded
		}
		seg.last = a
		if a.ok >= len(seg.recs) {
			c.markDelivered(shard, seg.recs, a)
			queue = queue[1:]
			continue
		}
		if a.ok > 0 {
			c.markDelivered(shard, seg.recs[:a.ok], a)
			seg.recs = seg.recs[a.ok:]
			if c.policy.bisect {
				// With bisect, a partial response splits the batch at the first
				// failed record; the rest is retried without using a retry.
				c.tw.journal.add(Entry{Kind: KindBisect, Source: c.source, Shard: shard, Items: seqs(seg.recs), RequestID: a.requestID,
					Outcome: "retry from the first failed record", Detail: a.reason})
				*seg = segment{recs: seg.recs}
				continue
			}
		} else if c.policy.bisect && len(seg.recs) > 1 {
			h := len(seg.recs) / 2
			left, right := &segment{recs: seg.recs[:h]}, &segment{recs: seg.recs[h:]}
			c.tw.journal.add(Entry{Kind: KindBisect, Source: c.source, Shard: shard, Items: seqs(seg.recs), RequestID: a.requestID,
				Outcome: fmt.Sprintf("split %d into %d + %d", len(seg.recs), len(left.recs), len(right.recs)), Detail: a.reason})
			queue = append([]*segment{left, right}, queue[1:]...)
			continue
		}
		seg.retries++
		if c.policy.maxRetries >= 0 && seg.retries > c.policy.maxRetries {
			c.fail(ctx, failure{shard: shard, recs: seg.recs, condition: CondRetriesExhausted, invokes: seg.invokes, last: a})
			queue = queue[1:]
			continue
		}
		c.tw.journal.add(Entry{Kind: KindRetry, Source: c.source, Shard: shard, Items: seqs(seg.recs), RequestID: a.requestID,
			Attempt: seg.invokes, Outcome: fmt.Sprintf("retry %d of %s", seg.retries, retriesText(c.policy.maxRetries)), Detail: a.reason})
		sleep(ctx, c.tw.cfg.RetryDelay(seg.retries))
	}
	return true
}

func retriesText(n int) string {
	if n < 0 {
		return "unlimited"
	}
	return itoa(n)
}

func (c *streamConsumer) markDelivered(shard string, recs []*record, a attemptResult) {
	c.counters.delivered.Add(int64(len(recs)))
	last := recs[len(recs)-1]
	c.iteratorAgeMS.Store(max(0, c.tw.cfg.Now().Sub(last.Seen).Milliseconds()))
	c.tw.journal.add(Entry{Kind: KindDelivered, Source: c.source, Shard: shard, RequestID: a.requestID, Items: seqs(recs), Keys: keysOf(recs), Outcome: "ok", Detail: a.detail})
}

func (c *streamConsumer) fail(ctx context.Context, f failure) {
	c.failed.Add(int64(len(f.recs)))
	c.giveUp(ctx, f)
}

func keysOf(recs []*record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.EventName + " " + r.Keys
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// batchInfo is the DDBStreamBatchInfo of an on-failure record: metadata
// about the records, never the records.
func batchInfo(streamARN string, f failure) map[string]any {
	first, last := f.recs[0], f.recs[len(f.recs)-1]
	return map[string]any{
		"shardId":                         f.shard,
		"startSequenceNumber":             first.Seq,
		"endSequenceNumber":               last.Seq,
		"approximateArrivalOfFirstRecord": isoMillis(first.Arrival),
		"approximateArrivalOfLastRecord":  isoMillis(last.Arrival),
		"batchSize":                       len(f.recs),
		"streamArn":                       streamARN,
	}
}

func isoMillis(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
