package ddb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// streamEnv is a DB served over HTTP with SDK clients for both APIs.
type streamEnv struct {
	db    *DB
	clock *TestClock
	ddb   *dynamodb.Client
	sc    *dynamodbstreams.Client
}

func newStreamEnv(t *testing.T, opts Options) *streamEnv {
	t.Helper()
	clock := NewTestClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	if opts.Now == nil {
		opts.Now = clock.Now
	}
	if opts.TTLSweep == 0 {
		opts.TTLSweep = -1 // tests sweep by hand unless they ask for the background
	}
	db := New(opts)
	srv := startServer(t, db)
	return &streamEnv{db: db, clock: clock, ddb: newDDBClient(srv.URL), sc: newStreamsClient(srv.URL)}
}

// createTable makes a table with key pk (S) and, when viewType is set, a stream; it
// returns the stream ARN ("" without a stream).
func (e *streamEnv) createTable(t *testing.T, name, viewType string) string {
	t.Helper()
	in := pkTableInput(name)
	if viewType != "" {
		in.StreamSpecification = &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewType(viewType)}
	}
	out, err := e.ddb.CreateTable(context.Background(), in)
	if err != nil {
		t.Fatalf("CreateTable %s: %v", name, err)
	}
	return aws.ToString(out.TableDescription.LatestStreamArn)
}

// write stores item (nil: deletes key) through the table's one mutation path.
func (e *streamEnv) write(t *testing.T, table string, key, item attr.Item) {
	t.Helper()
	if err := e.tryWrite(table, key, item); err != nil {
		t.Fatal(err)
	}
}

func (e *streamEnv) tryWrite(table string, key, item attr.Item) error {
	tb, err := e.db.table(table)
	if err != nil {
		return err
	}
	unlock := lockTables([]*Table{tb})
	tb.writeLocked(key, item, nil, e.db.now(), nil)
	unlock()
	return nil
}

func item(pk string, kv ...string) attr.Item {
	it := attr.Item{"pk": attr.Str(pk)}
	for i := 0; i+1 < len(kv); i += 2 {
		it[kv[i]] = attr.Num(kv[i+1])
	}
	return it
}

func key(pk string) attr.Item { return attr.Item{"pk": attr.Str(pk)} }

// shards lists a stream's shards through DescribeStream, a page of `limit` at a time.
func (e *streamEnv) shards(t *testing.T, arn string, limit int32) []types.Shard {
	t.Helper()
	var out []types.Shard
	var start *string
	for {
		in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: start}
		if limit > 0 {
			in.Limit = aws.Int32(limit)
		}
		d, err := e.sc.DescribeStream(context.Background(), in)
		if err != nil {
			t.Fatalf("DescribeStream: %v", err)
		}
		out = append(out, d.StreamDescription.Shards...)
		if limit > 0 && len(d.StreamDescription.Shards) > int(limit) {
			t.Fatalf("DescribeStream returned %d shards, over its limit %d", len(d.StreamDescription.Shards), limit)
		}
		if d.StreamDescription.LastEvaluatedShardId == nil {
			return out
		}
		start = d.StreamDescription.LastEvaluatedShardId
	}
}

func (e *streamEnv) iter(t *testing.T, arn, shard string, typ types.ShardIteratorType, seq string) *string {
	t.Helper()
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String(shard), ShardIteratorType: typ}
	if seq != "" {
		in.SequenceNumber = aws.String(seq)
	}
	out, err := e.sc.GetShardIterator(context.Background(), in)
	if err != nil {
		t.Fatalf("GetShardIterator %s %s: %v", typ, seq, err)
	}
	return out.ShardIterator
}

// drain reads a shard from the iterator until a closed shard ends (NextShardIterator
// null) or an open shard has nothing more.
func (e *streamEnv) drain(t *testing.T, it *string, limit int32) (recs []types.Record, ended bool) {
	t.Helper()
	for it != nil {
		in := &dynamodbstreams.GetRecordsInput{ShardIterator: it}
		if limit > 0 {
			in.Limit = aws.Int32(limit)
		}
		out, err := e.sc.GetRecords(context.Background(), in)
		if err != nil {
			t.Fatalf("GetRecords: %v", err)
		}
		recs = append(recs, out.Records...)
		if out.NextShardIterator == nil {
			return recs, true
		}
		if len(out.Records) == 0 {
			return recs, false
		}
		it = out.NextShardIterator
	}
	return recs, true
}

// readAll reads every shard of the stream from its trim horizon, parents first.
func (e *streamEnv) readAll(t *testing.T, arn string) []types.Record {
	t.Helper()
	var out []types.Record
	for _, sh := range e.shards(t, arn, 0) {
		recs, _ := e.drain(t, e.iter(t, arn, aws.ToString(sh.ShardId), types.ShardIteratorTypeTrimHorizon, ""), 0)
		out = append(out, recs...)
	}
	return out
}

func wantAPIError[T error](t *testing.T, err error, what string) {
	t.Helper()
	var target T
	if !errors.As(err, &target) {
		t.Fatalf("%s: got error %v, want %T", what, err, target)
	}
}

func numOf(t *testing.T, v types.AttributeValue) string {
	t.Helper()
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("got %T, want N", v)
	}
	return n.Value
}

var seqRE = regexp.MustCompile(`^[0-9]{21,40}$`)
var eventIDRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestStreamRecordsByViewType(t *testing.T) {
	for _, vt := range []string{"KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"} {
		t.Run(vt, func(t *testing.T) {
			e := newStreamEnv(t, Options{})
			arn := e.createTable(t, "views", vt)
			e.write(t, "views", key("a"), item("a", "v", "1"))
			e.clock.Advance(1500 * time.Millisecond)
			e.write(t, "views", key("a"), item("a", "v", "2"))
			e.write(t, "views", key("a"), item("a", "v", "2")) // changes nothing: no record
			e.write(t, "views", key("a"), nil)
			e.write(t, "views", key("zz"), nil) // deletes nothing: no record

			recs := e.readAll(t, arn)
			if len(recs) != 3 {
				t.Fatalf("got %d records, want 3 (INSERT, MODIFY, REMOVE)", len(recs))
			}
			wantNames := []types.OperationType{types.OperationTypeInsert, types.OperationTypeModify, types.OperationTypeRemove}
			// old/new value of v per record, "" when that image is absent from the change.
			changes := [][2]string{{"", "1"}, {"1", "2"}, {"2", ""}}
			wantOld := vt == "OLD_IMAGE" || vt == "NEW_AND_OLD_IMAGES"
			wantNew := vt == "NEW_IMAGE" || vt == "NEW_AND_OLD_IMAGES"
			ids := map[string]bool{}
			prevSeq := ""
			for i, r := range recs {
				d := r.Dynamodb
				if r.EventName != wantNames[i] {
					t.Errorf("record %d: eventName %s, want %s", i, r.EventName, wantNames[i])
				}
				if aws.ToString(r.EventVersion) != "1.1" || aws.ToString(r.EventSource) != "aws:dynamodb" || aws.ToString(r.AwsRegion) != "us-east-1" {
					t.Errorf("record %d: version/source/region %q %q %q", i, aws.ToString(r.EventVersion), aws.ToString(r.EventSource), aws.ToString(r.AwsRegion))
				}
				if r.UserIdentity != nil {
					t.Errorf("record %d: userIdentity %+v on a user's change", i, r.UserIdentity)
				}
				id := aws.ToString(r.EventID)
				if !eventIDRE.MatchString(id) || ids[id] {
					t.Errorf("record %d: eventID %q malformed or repeated", i, id)
				}
				ids[id] = true
				seq := aws.ToString(d.SequenceNumber)
				if !seqRE.MatchString(seq) || seq <= prevSeq {
					t.Errorf("record %d: SequenceNumber %q, want 21+ digits after %q", i, seq, prevSeq)
				}
				prevSeq = seq
				if string(d.StreamViewType) != vt {
					t.Errorf("record %d: StreamViewType %s", i, d.StreamViewType)
				}
				if got := d.Keys["pk"].(*types.AttributeValueMemberS).Value; got != "a" || len(d.Keys) != 1 {
					t.Errorf("record %d: Keys %v", i, d.Keys)
				}
				wantAt := e.clock.Now().Truncate(time.Second)
				if i == 0 {
					wantAt = wantAt.Add(-time.Second) // the INSERT came 1.5 s earlier
				}
				if d.ApproximateCreationDateTime == nil || !d.ApproximateCreationDateTime.Equal(wantAt) {
					t.Errorf("record %d: ApproximateCreationDateTime %v, want %v", i, d.ApproximateCreationDateTime, wantAt)
				}
				old, nw := changes[i][0], changes[i][1]
				if got := d.OldImage != nil; got != (wantOld && old != "") {
					t.Errorf("record %d: OldImage present %v", i, got)
				} else if got && numOf(t, d.OldImage["v"]) != old {
					t.Errorf("record %d: OldImage.v %s, want %s", i, numOf(t, d.OldImage["v"]), old)
				}
				if got := d.NewImage != nil; got != (wantNew && nw != "") {
					t.Errorf("record %d: NewImage present %v", i, got)
				} else if got && numOf(t, d.NewImage["v"]) != nw {
					t.Errorf("record %d: NewImage.v %s, want %s", i, numOf(t, d.NewImage["v"]), nw)
				}
				// SizeBytes: the key (2+1) plus each image present (2+1 + 1+2 each).
				want := int64(3)
				if d.OldImage != nil {
					want += 6
				}
				if d.NewImage != nil {
					want += 6
				}
				if aws.ToInt64(d.SizeBytes) != want {
					t.Errorf("record %d: SizeBytes %d, want %d", i, aws.ToInt64(d.SizeBytes), want)
				}
			}
		})
	}
}

func TestShardRolloverLineage(t *testing.T) {
	e := newStreamEnv(t, Options{ShardRecords: 3, ShardAge: time.Hour})
	arn := e.createTable(t, "roll", "KEYS_ONLY")
	for i := range 10 {
		e.write(t, "roll", key("k"), item("k", "v", strconv.Itoa(i)))
	}
	shards := e.shards(t, arn, 1) // one shard a page: paging by ExclusiveStartShardId
	if len(shards) != 4 {
		t.Fatalf("got %d shards, want 4 (3+3+3+1 records)", len(shards))
	}
	if shards[0].ParentShardId != nil {
		t.Errorf("first shard has parent %s", aws.ToString(shards[0].ParentShardId))
	}
	for i, sh := range shards {
		r := sh.SequenceNumberRange
		if i > 0 && aws.ToString(sh.ParentShardId) != aws.ToString(shards[i-1].ShardId) {
			t.Errorf("shard %d: parent %s, want %s", i, aws.ToString(sh.ParentShardId), aws.ToString(shards[i-1].ShardId))
		}
		if closed := r.EndingSequenceNumber != nil; closed != (i < 3) {
			t.Errorf("shard %d: closed %v", i, closed)
		}
		if i > 0 && aws.ToString(r.StartingSequenceNumber) <= aws.ToString(shards[i-1].SequenceNumberRange.EndingSequenceNumber) {
			t.Errorf("shard %d starts at %s, not after its parent's end", i, aws.ToString(r.StartingSequenceNumber))
		}
	}
	// Each closed shard reads to its end: its last page has no next iterator; the
	// records, parents first, are the ten writes in order.
	var versions []string
	for i, sh := range shards {
		recs, ended := e.drain(t, e.iter(t, arn, aws.ToString(sh.ShardId), types.ShardIteratorTypeTrimHorizon, ""), 2)
		if ended != (i < 3) {
			t.Errorf("shard %d: read to its end %v", i, ended)
		}
		if i < 3 && (len(recs) != 3 || aws.ToString(recs[2].Dynamodb.SequenceNumber) != aws.ToString(sh.SequenceNumberRange.EndingSequenceNumber)) {
			t.Errorf("shard %d: %d records, last is not EndingSequenceNumber", i, len(recs))
		}
		for _, r := range recs {
			versions = append(versions, aws.ToString(r.Dynamodb.SequenceNumber))
		}
	}
	if len(versions) != 10 {
		t.Fatalf("read %d records across shards, want 10", len(versions))
	}
	for i := 1; i < len(versions); i++ {
		if versions[i] <= versions[i-1] {
			t.Fatalf("sequence numbers not increasing across shards: %v", versions)
		}
	}

	// Age: an open shard older than ShardAge rolls over even with no write.
	e.clock.Advance(time.Hour)
	after := e.shards(t, arn, 0)
	if len(after) != 5 || aws.ToString(after[4].ParentShardId) != aws.ToString(shards[3].ShardId) || after[3].SequenceNumberRange.EndingSequenceNumber == nil {
		t.Fatalf("after ShardAge: %d shards, want the open one closed with a child", len(after))
	}
	d, err := e.sc.DescribeStream(context.Background(), &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	sd := d.StreamDescription
	if sd.StreamStatus != types.StreamStatusEnabled || aws.ToString(sd.TableName) != "roll" || sd.StreamViewType != types.StreamViewTypeKeysOnly ||
		len(sd.KeySchema) != 1 || aws.ToString(sd.KeySchema[0].AttributeName) != "pk" || sd.CreationRequestDateTime == nil || aws.ToString(sd.StreamLabel) == "" {
		t.Errorf("StreamDescription: %+v", sd)
	}
}

func TestIteratorTypes(t *testing.T) {
	e := newStreamEnv(t, Options{})
	arn := e.createTable(t, "iters", "NEW_IMAGE")
	for i := range 5 {
		e.write(t, "iters", key(fmt.Sprint("k", i)), item(fmt.Sprint("k", i), "v", strconv.Itoa(i)))
	}
	shard := aws.ToString(e.shards(t, arn, 0)[0].ShardId)
	all, _ := e.drain(t, e.iter(t, arn, shard, types.ShardIteratorTypeTrimHorizon, ""), 2)
	if len(all) != 5 {
		t.Fatalf("TRIM_HORIZON read %d records, want 5", len(all))
	}
	seq := func(i int) string { return aws.ToString(all[i].Dynamodb.SequenceNumber) }

	at, _ := e.drain(t, e.iter(t, arn, shard, types.ShardIteratorTypeAtSequenceNumber, seq(2)), 0)
	if len(at) != 3 || aws.ToString(at[0].Dynamodb.SequenceNumber) != seq(2) {
		t.Errorf("AT_SEQUENCE_NUMBER %s: %d records from %s", seq(2), len(at), aws.ToString(at[0].Dynamodb.SequenceNumber))
	}
	after, _ := e.drain(t, e.iter(t, arn, shard, types.ShardIteratorTypeAfterSequenceNumber, seq(2)), 0)
	if len(after) != 2 || aws.ToString(after[0].Dynamodb.SequenceNumber) != seq(3) {
		t.Errorf("AFTER_SEQUENCE_NUMBER %s: %d records", seq(2), len(after))
	}
	latest := e.iter(t, arn, shard, types.ShardIteratorTypeLatest, "")
	out, err := e.sc.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: latest})
	if err != nil || len(out.Records) != 0 || out.NextShardIterator == nil {
		t.Fatalf("LATEST before a write: %v, %d records", err, len(out.Records))
	}
	e.write(t, "iters", key("new"), item("new", "v", "9"))
	out, err = e.sc.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: out.NextShardIterator})
	if err != nil || len(out.Records) != 1 || out.Records[0].Dynamodb.NewImage["pk"].(*types.AttributeValueMemberS).Value != "new" {
		t.Fatalf("LATEST after a write: %v, %d records", err, len(out.Records))
	}

	// Sequence numbers that are not this shard's records.
	last, _ := parseSeq(seq(4))
	for _, bad := range []string{"123", "1" + seq(0)[1:20] + "x", formatSeq(last + 1000), "100000000000000000000"} {
		_, err := e.sc.GetShardIterator(context.Background(), &dynamodbstreams.GetShardIteratorInput{
			StreamArn: aws.String(arn), ShardId: aws.String(shard), ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, SequenceNumber: aws.String(bad)})
		if err == nil || !regexp.MustCompile(`ValidationException`).MatchString(err.Error()) {
			t.Errorf("AT_SEQUENCE_NUMBER %q: got %v, want ValidationException", bad, err)
		}
	}
	_, err = e.sc.GetShardIterator(context.Background(), &dynamodbstreams.GetShardIteratorInput{
		StreamArn: aws.String(arn), ShardId: aws.String("shardId-00000000000000000000-00000000"), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	wantAPIError[*types.ResourceNotFoundException](t, err, "unknown shard")
	_, err = e.sc.GetShardIterator(context.Background(), &dynamodbstreams.GetShardIteratorInput{
		StreamArn: aws.String(arn + "x"), ShardId: aws.String(shard), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	wantAPIError[*types.ResourceNotFoundException](t, err, "unknown stream")
	_, err = e.sc.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: latest, Limit: aws.Int32(1001)})
	if err == nil || !regexp.MustCompile(`ValidationException.*less than or equal to 1000`).MatchString(err.Error()) {
		t.Errorf("Limit 1001: got %v", err)
	}
	for _, lim := range []int32{0, -1} {
		_, err = e.sc.DescribeStream(context.Background(), &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), Limit: aws.Int32(lim)})
		if err == nil || !regexp.MustCompile(`ValidationException`).MatchString(err.Error()) {
			t.Errorf("DescribeStream Limit %d: got %v, want ValidationException", lim, err)
		}
	}
	if d, err := e.sc.DescribeStream(context.Background(), &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), Limit: aws.Int32(1000)}); err != nil || len(d.StreamDescription.Shards) != 1 {
		t.Errorf("DescribeStream Limit 1000 (served as 100): %v", err)
	}
	_, err = e.sc.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String("not-an-iterator")})
	if err == nil || !regexp.MustCompile(`ValidationException`).MatchString(err.Error()) {
		t.Errorf("a forged iterator: got %v", err)
	}
}

func TestIteratorExpiresAfter15Minutes(t *testing.T) {
	e := newStreamEnv(t, Options{})
	arn := e.createTable(t, "expiry", "KEYS_ONLY")
	e.write(t, "expiry", key("a"), item("a"))
	shard := aws.ToString(e.shards(t, arn, 0)[0].ShardId)
	it := e.iter(t, arn, shard, types.ShardIteratorTypeTrimHorizon, "")
	e.clock.Advance(15 * time.Minute)
	out, err := e.sc.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: it})
	if err != nil || len(out.Records) != 1 {
		t.Fatalf("at 15 minutes: %v, %d records", err, len(out.Records))
	}
	e.clock.Advance(time.Second)
	_, err = e.sc.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: it})
	wantAPIError[*types.ExpiredIteratorException](t, err, "an iterator 15m1s old")
	// The iterator GetRecords returned is new: it has its own 15 minutes.
	e.clock.Advance(14 * time.Minute)
	if _, err := e.sc.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: out.NextShardIterator}); err != nil {
		t.Fatalf("the next iterator, 14m1s old: %v", err)
	}
}

func TestRetentionTrimsRecordsAndShards(t *testing.T) {
	e := newStreamEnv(t, Options{StreamRetention: 10 * time.Minute, ShardRecords: 4, ShardAge: 100 * time.Hour})
	arn := e.createTable(t, "trim", "NEW_IMAGE")
	for i := range 6 { // shard 0: 4 records (closed), shard 1: the other 2
		e.write(t, "trim", key(fmt.Sprint("a", i)), item(fmt.Sprint("a", i)))
	}
	first := e.shards(t, arn, 0)
	oldRecs := e.readAll(t, arn)
	if len(first) != 2 || len(oldRecs) != 6 {
		t.Fatalf("%d shards, %d records; want 2 and 6", len(first), len(oldRecs))
	}
	e.clock.Advance(6 * time.Minute)
	staleIter := e.iter(t, arn, aws.ToString(first[1].ShardId), types.ShardIteratorTypeTrimHorizon, "")
	for i := range 2 {
		e.write(t, "trim", key(fmt.Sprint("b", i)), item(fmt.Sprint("b", i)))
	}
	e.clock.Advance(5 * time.Minute) // the a records are 11 minutes old, the b records 5

	shards := e.shards(t, arn, 0)
	if len(shards) != 1 || aws.ToString(shards[0].ShardId) != aws.ToString(first[1].ShardId) {
		t.Fatalf("after retention: shards %v, want only the second (the first's records are all gone)", shards)
	}
	recs := e.readAll(t, arn)
	if len(recs) != 2 || recs[0].Dynamodb.NewImage["pk"].(*types.AttributeValueMemberS).Value != "b0" {
		t.Fatalf("after retention: %d records, want b0 and b1", len(recs))
	}
	_, err := e.sc.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: staleIter})
	wantAPIError[*types.TrimmedDataAccessException](t, err, "an iterator below the trim horizon")
	_, err = e.sc.GetShardIterator(context.Background(), &dynamodbstreams.GetShardIteratorInput{
		StreamArn: aws.String(arn), ShardId: first[1].ShardId, ShardIteratorType: types.ShardIteratorTypeAtSequenceNumber, SequenceNumber: oldRecs[4].Dynamodb.SequenceNumber})
	wantAPIError[*types.TrimmedDataAccessException](t, err, "AT_SEQUENCE_NUMBER of a trimmed record")

	// Amortized trimming: the shard's slice was compacted or reset, not grown.
	st := e.db.streams.lookup(arn)
	st.mu.Lock()
	sh := st.shards[0]
	if sh.off > len(sh.recs) || len(sh.live()) != 2 {
		t.Errorf("shard keeps off=%d of %d records, want 2 live", sh.off, len(sh.recs))
	}
	st.mu.Unlock()
}

func TestTrimCompactsAmortized(t *testing.T) {
	e := newStreamEnv(t, Options{StreamRetention: time.Hour, ShardRecords: 1 << 30, ShardAge: 1000 * time.Hour})
	arn := e.createTable(t, "compact", "KEYS_ONLY")
	const n = 1000
	for i := range n {
		e.write(t, "compact", key(strconv.Itoa(i)), item(strconv.Itoa(i)))
		e.clock.Advance(time.Second)
	}
	st := e.db.streams.lookup(arn)
	// Move the clock a second at a time: each step trims one record; the slice is
	// reallocated only when the dead prefix reaches half, so O(log n) times, not n.
	e.clock.Advance(time.Hour - n*time.Second)
	reallocs := 0
	st.mu.Lock()
	prev := &st.shards[0].recs[0]
	st.mu.Unlock()
	for range n - 1 {
		e.clock.Advance(time.Second)
		st.mu.Lock()
		st.maintainLocked(e.clock.Now())
		sh := st.shards[0]
		if len(sh.recs) > 0 && &sh.recs[0] != prev {
			reallocs++
			prev = &sh.recs[0]
		}
		st.mu.Unlock()
	}
	st.mu.Lock()
	live := len(st.shards[0].live())
	st.mu.Unlock()
	if live != 1 {
		t.Fatalf("%d live records, want 1", live)
	}
	if reallocs > 12 {
		t.Errorf("trimming %d records one at a time reallocated %d times, want O(log n)", n, reallocs)
	}
}

func TestDisabledStreamStaysReadable(t *testing.T) {
	e := newStreamEnv(t, Options{StreamRetention: time.Hour})
	ctx := context.Background()
	arn1 := e.createTable(t, "gone", "KEYS_ONLY")
	e.write(t, "gone", key("a"), item("a"))

	// Turned off and on again: a second stream, the first disabled.
	if _, err := e.ddb.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String("gone"), StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(false)}}); err != nil {
		t.Fatal(err)
	}
	out, err := e.ddb.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String("gone"), StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeNewImage}})
	if err != nil {
		t.Fatal(err)
	}
	arn2 := aws.ToString(out.TableDescription.LatestStreamArn)
	if arn2 == arn1 {
		t.Fatalf("re-enabled stream kept the ARN %s", arn1)
	}
	e.write(t, "gone", key("b"), item("b"))
	e.createTable(t, "other", "KEYS_ONLY")
	e.createTable(t, "nostream", "")

	ls, err := e.sc.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{TableName: aws.String("gone")})
	if err != nil || len(ls.Streams) != 2 {
		t.Fatalf("ListStreams gone: %v, %d streams", err, len(ls.Streams))
	}
	var all []string
	var start *string
	for {
		page, err := e.sc.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{Limit: aws.Int32(1), ExclusiveStartStreamArn: start})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Streams {
			all = append(all, aws.ToString(s.StreamArn))
		}
		if start = page.LastEvaluatedStreamArn; start == nil {
			break
		}
	}
	if len(all) != 3 {
		t.Fatalf("ListStreams paged by 1: %v, want 3 streams", all)
	}

	if _, err := e.ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String("gone")}); err != nil {
		t.Fatal(err)
	}
	if st := e.db.streams.lookup(arn2); st == nil {
		t.Fatal("the deleted table's stream is not served")
	} else {
		st.mu.Lock()
		owner := st.owner
		st.mu.Unlock()
		if owner != nil {
			t.Error("a disabled stream still holds its deleted table (and all its items)")
		}
	}
	for _, arn := range []string{arn1, arn2} {
		d, err := e.sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
		if err != nil {
			t.Fatal(err)
		}
		if d.StreamDescription.StreamStatus != types.StreamStatusDisabled {
			t.Errorf("%s: status %s, want DISABLED", arn, d.StreamDescription.StreamStatus)
		}
		for _, sh := range d.StreamDescription.Shards {
			if sh.SequenceNumberRange.EndingSequenceNumber == nil {
				t.Errorf("%s: shard %s still open", arn, aws.ToString(sh.ShardId))
			}
		}
		if recs := e.readAll(t, arn); len(recs) != 1 {
			t.Errorf("%s after DeleteTable: %d records, want 1", arn, len(recs))
		}
	}
	// A table of the same name gets a new stream; the old ones remain listed.
	e.createTable(t, "gone", "KEYS_ONLY")
	if ls, _ := e.sc.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{TableName: aws.String("gone")}); len(ls.Streams) != 3 {
		t.Errorf("after re-creating the table: %d streams, want 3", len(ls.Streams))
	}

	// After retention the disabled streams' records are gone, then the streams.
	e.clock.Advance(time.Hour + time.Second)
	e.db.streams.maintain(e.clock.Now())
	e.clock.Advance(time.Hour + time.Second)
	e.db.streams.maintain(e.clock.Now())
	for _, arn := range []string{arn1, arn2} {
		_, err := e.sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
		wantAPIError[*types.ResourceNotFoundException](t, err, "a disabled stream after retention")
	}
	if ls, _ := e.sc.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{TableName: aws.String("gone")}); len(ls.Streams) != 1 {
		t.Errorf("after retention: %d streams for gone, want the new table's one", len(ls.Streams))
	}
}

func TestFailedCreateTableLeavesNoStream(t *testing.T) {
	e := newStreamEnv(t, Options{})
	e.createTable(t, "dup", "KEYS_ONLY")
	_, err := e.ddb.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String("dup"),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		StreamSpecification:  &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewTypeKeysOnly},
	})
	wantAPIError[*ddbtypes.ResourceInUseException](t, err, "a second CreateTable")
	ls, err := e.sc.ListStreams(context.Background(), &dynamodbstreams.ListStreamsInput{})
	if err != nil || len(ls.Streams) != 1 {
		t.Fatalf("ListStreams: %v, %d streams, want 1", err, len(ls.Streams))
	}
}

// TestConcurrentWritersAndReader runs writers on several items while a reader follows
// the stream across rollovers; per item, versions must arrive in commit order, each
// once. Run with -race.
func TestConcurrentWritersAndReader(t *testing.T) {
	// The background sweeper and stream maintenance run all along (TTL is on; the
	// items have no TTL attribute, so it deletes nothing).
	e := newStreamEnv(t, Options{ShardRecords: 50, Now: time.Now, TTLSweep: time.Millisecond})
	arn := e.createTable(t, "race", "NEW_IMAGE")
	e.enableTTL(t, "race", "exp", true)
	const writers, perWriter = 4, 150
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := fmt.Sprint("w", w)
			for v := 1; v <= perWriter; v++ {
				if err := e.tryWrite("race", key(k), item(k, "v", strconv.Itoa(v))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	seen := map[string]int{}
	total := 0
	readShard := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	finished := false
	for !finished || total < writers*perWriter {
		select {
		case <-done:
			finished = true
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("read %d of %d records before the deadline", total, writers*perWriter)
		}
		for _, sh := range e.shards(t, arn, 0) {
			id := aws.ToString(sh.ShardId)
			if readShard[id] {
				continue
			}
			// DescribeStream lists shards parents first, so a parent is always read
			// before its child.
			if p := aws.ToString(sh.ParentShardId); p != "" && !readShard[p] {
				t.Fatalf("shard %s comes before its parent %s", id, p)
			}
			recs, ended := e.drain(t, e.iter(t, arn, id, types.ShardIteratorTypeTrimHorizon, ""), 7)
			if !ended {
				break // the open shard: come back once it closes
			}
			readShard[id] = true
			for _, r := range recs {
				k := r.Dynamodb.NewImage["pk"].(*types.AttributeValueMemberS).Value
				v, _ := strconv.Atoi(numOf(t, r.Dynamodb.NewImage["v"]))
				if v != seen[k]+1 {
					t.Fatalf("item %s: version %d after %d", k, v, seen[k])
				}
				seen[k] = v
				total++
			}
		}
		if finished && total < writers*perWriter {
			// Close the open shard so that the rest is read to an end.
			st := e.db.streams.lookup(arn)
			st.mu.Lock()
			st.roll(time.Now())
			st.mu.Unlock()
		}
	}
	if total != writers*perWriter {
		t.Fatalf("read %d records, want %d", total, writers*perWriter)
	}
}

func TestStreamsSnapshotRestore(t *testing.T) {
	e := newStreamEnv(t, Options{ShardRecords: 2})
	arn := e.createTable(t, "persist", "NEW_AND_OLD_IMAGES")
	for i := range 5 {
		e.write(t, "persist", key("a"), item("a", "v", strconv.Itoa(i)))
	}
	before := e.readAll(t, arn)
	raw, err := json.Marshal(e.db.streams.snapshot())
	if err != nil {
		t.Fatal(err)
	}

	// A fresh DB restores the streams; the table's stream pointer is relinked as
	// persist.go will do.
	e2 := newStreamEnv(t, Options{ShardRecords: 2, Now: e.clock.Now})
	e2.clock = e.clock
	e2.createTable(t, "persist", "")
	if err := e2.db.streams.restore(raw); err != nil {
		t.Fatal(err)
	}
	tb, _ := e2.db.table("persist")
	tb.mu.Lock()
	tb.stream = e2.db.streams.lookupAny(arn)
	tb.streams = append(tb.streams, tb.stream)
	tb.mu.Unlock()
	after := e2.readAll(t, arn)
	if len(after) != len(before) {
		t.Fatalf("restored %d records, want %d", len(after), len(before))
	}
	for i := range before {
		b, a := before[i], after[i]
		if aws.ToString(a.EventID) != aws.ToString(b.EventID) || aws.ToString(a.Dynamodb.SequenceNumber) != aws.ToString(b.Dynamodb.SequenceNumber) ||
			a.EventName != b.EventName || (b.Dynamodb.OldImage != nil && numOf(t, a.Dynamodb.OldImage["v"]) != numOf(t, b.Dynamodb.OldImage["v"])) {
			t.Errorf("record %d differs after restore", i)
		}
	}
	// Writing continues the sequence where it stopped.
	e2.write(t, "persist", key("a"), item("a", "v", "9"))
	all := e2.readAll(t, arn)
	if len(all) != 6 || aws.ToString(all[5].Dynamodb.SequenceNumber) <= aws.ToString(before[4].Dynamodb.SequenceNumber) {
		t.Fatalf("after restore and a write: %d records", len(all))
	}
}

func TestFormatSeq(t *testing.T) {
	for _, n := range []uint64{0, 7, 1764504000000000, 1<<64 - 1} {
		s := formatSeq(n)
		if want := fmt.Sprintf("1%020d", n); s != want {
			t.Errorf("formatSeq(%d) = %s, want %s", n, s, want)
		}
		if got, ok := parseSeq(s); !ok || got != n {
			t.Errorf("parseSeq(%s) = %d, %v", s, got, ok)
		}
	}
}

// benchStream is a stream with one shard of n records, built through writeLocked.
func benchStream(b *testing.B, n int) (*DB, *Stream, *TestClock) {
	b.Helper()
	clock := NewTestClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	db := New(Options{Now: clock.Now, TTLSweep: -1, ShardRecords: 1 << 30, ShardAge: 1000 * time.Hour})
	b.Cleanup(func() { db.Close() })
	tb := &Table{Name: "bench", ARN: db.arn("table/bench"), Hash: KeyDef{Name: "pk", Type: attr.KindS}, items: newTree()}
	st := newStream(db, tb, "NEW_IMAGE", clock.Now())
	tb.stream = st
	db.mu.Lock()
	db.tables["bench"] = tb
	db.mu.Unlock()
	for i := range n {
		k := strconv.Itoa(i)
		tb.writeLocked(key(k), item(k, "v", k), nil, clock.Now(), nil)
	}
	return db, st, clock
}

// BenchmarkStreamRead is the position search and page cut alone (no encoding): it
// should not grow with the shard.
func BenchmarkStreamRead(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprint("records=", n), func(b *testing.B) {
			_, st, clock := benchStream(b, n)
			sh := st.shards[0]
			for i := 0; b.Loop(); i++ {
				pos := sh.recs[(i*7919)%(n-100)].seq
				recs, _, err := st.read(iterator{Stream: st.ARN, Shard: sh.id, Pos: pos}, 100, clock.Now())
				if err != nil || len(recs) != 100 || recs[0].seq != pos {
					b.Fatalf("read at %d: %d records, %v", pos, len(recs), err)
				}
			}
		})
	}
}

// BenchmarkGetRecords reads pages of 100 at random positions of one shard of 100,000
// records (and of 1,000, to show the position search does not grow with the shard),
// through the GetRecords operation including its JSON encoding.
func BenchmarkGetRecords(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprint("records=", n), func(b *testing.B) {
			db, st, clock := benchStream(b, n)
			sh := st.shards[0]
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				pos := sh.recs[(i*7919)%(n-100)].seq
				it := iterator{Stream: st.ARN, Shard: sh.id, Pos: pos, Issued: clock.Now().UnixMilli()}
				out, err := opGetRecords(ctx, db, []byte(`{"Limit":100,"ShardIterator":"`+it.String()+`"}`))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestEmptyClosedShardReadsToItsEnd(t *testing.T) {
	e := newStreamEnv(t, Options{ShardAge: 10 * time.Minute})
	arn := e.createTable(t, "empty", "KEYS_ONLY")
	first := aws.ToString(e.shards(t, arn, 0)[0].ShardId)
	latest := e.iter(t, arn, first, types.ShardIteratorTypeLatest, "")
	e.clock.Advance(10 * time.Minute) // the shard rolls over with no record in it
	shards := e.shards(t, arn, 0)
	if len(shards) != 2 || shards[0].SequenceNumberRange.EndingSequenceNumber == nil {
		t.Fatalf("after ShardAge: %d shards, first closed %v", len(shards), shards[0].SequenceNumberRange.EndingSequenceNumber != nil)
	}
	for name, it := range map[string]*string{
		"LATEST taken while open": latest,
		"TRIM_HORIZON":            e.iter(t, arn, first, types.ShardIteratorTypeTrimHorizon, ""),
	} {
		out, err := e.sc.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: it})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(out.Records) != 0 || out.NextShardIterator != nil {
			t.Errorf("%s on an empty closed shard: %d records, next %v; want none and no next iterator", name, len(out.Records), out.NextShardIterator)
		}
	}
}

// TestStreamThroughDataPlane drives the stream with the data plane's own operations
// over the SDK: what a failed condition or an identical put does not change makes no
// record; a transaction's writes each make one.
func TestStreamThroughDataPlane(t *testing.T) {
	e := newStreamEnv(t, Options{})
	ctx := context.Background()
	arn := e.createTable(t, "dataplane", "NEW_AND_OLD_IMAGES")
	av := func(pk string, v string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "v": &ddbtypes.AttributeValueMemberN{Value: v}}
	}
	k := func(pk string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}}
	}
	steps := []func() error{
		func() error {
			_, err := e.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("dataplane"), Item: av("a", "1")})
			return err
		},
		func() error {
			_, err := e.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("dataplane"), Item: av("a", "1")})
			return err
		}, // identical: no record
		func() error {
			_, err := e.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("dataplane"), Key: k("a"), UpdateExpression: aws.String("SET v = v + :one"),
				ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}}})
			return err
		},
		func() error {
			_, err := e.ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
				{Put: &ddbtypes.Put{TableName: aws.String("dataplane"), Item: av("b", "1")}},
				{Delete: &ddbtypes.Delete{TableName: aws.String("dataplane"), Key: k("a")}},
			}})
			return err
		},
		func() error {
			_, err := e.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("dataplane"), Key: k("zz")})
			return err
		}, // absent: no record
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	_, err := e.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("dataplane"), Item: av("b", "9"), ConditionExpression: aws.String("attribute_not_exists(pk)")})
	wantAPIError[*ddbtypes.ConditionalCheckFailedException](t, err, "a put whose condition fails")

	recs := e.readAll(t, arn)
	var got []string
	for _, r := range recs {
		got = append(got, string(r.EventName)+" "+r.Dynamodb.Keys["pk"].(*types.AttributeValueMemberS).Value)
	}
	want := []string{"INSERT a", "MODIFY a", "INSERT b", "REMOVE a"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	if numOf(t, recs[1].Dynamodb.OldImage["v"]) != "1" || numOf(t, recs[1].Dynamodb.NewImage["v"]) != "2" {
		t.Errorf("MODIFY images: old %v new %v", recs[1].Dynamodb.OldImage, recs[1].Dynamodb.NewImage)
	}
}

// TestStreamsSurviveRestart keeps a DataDir: after Close and New the stream's shards,
// records, sequence numbers and event IDs are the same, and writing goes on after them.
func TestStreamsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	clock := NewTestClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	e := newStreamEnv(t, Options{DataDir: dir, Now: clock.Now, ShardRecords: 2})
	e.clock = clock
	arn := e.createTable(t, "kept", "NEW_IMAGE")
	for i := range 5 {
		_, err := e.ddb.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("kept"), Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: "a"}, "v": &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(i)}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	before := e.readAll(t, arn)
	beforeShards := e.shards(t, arn, 0)
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}

	e2 := newStreamEnv(t, Options{DataDir: dir, Now: clock.Now, ShardRecords: 2})
	e2.clock = clock
	d, err := e2.ddb.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String("kept")})
	if err != nil || aws.ToString(d.Table.LatestStreamArn) != arn {
		t.Fatalf("after restart: %v, stream %s, want %s", err, aws.ToString(d.Table.LatestStreamArn), arn)
	}
	if got := e2.shards(t, arn, 0); len(got) != len(beforeShards) {
		t.Fatalf("after restart: %d shards, want %d", len(got), len(beforeShards))
	}
	after := e2.readAll(t, arn)
	if len(after) != len(before) {
		t.Fatalf("after restart: %d records, want %d", len(after), len(before))
	}
	for i := range before {
		if aws.ToString(after[i].EventID) != aws.ToString(before[i].EventID) || aws.ToString(after[i].Dynamodb.SequenceNumber) != aws.ToString(before[i].Dynamodb.SequenceNumber) {
			t.Errorf("record %d differs after restart", i)
		}
	}
	_, err = e2.ddb.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("kept"), Item: map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: "a"}, "v": &ddbtypes.AttributeValueMemberN{Value: "99"}}})
	if err != nil {
		t.Fatal(err)
	}
	all := e2.readAll(t, arn)
	if len(all) != len(before)+1 || aws.ToString(all[len(all)-1].Dynamodb.SequenceNumber) <= aws.ToString(before[len(before)-1].Dynamodb.SequenceNumber) {
		t.Fatalf("a write after restart: %d records, last %s", len(all), aws.ToString(all[len(all)-1].Dynamodb.SequenceNumber))
	}
}

func TestGetRecordsPageIsAtMostOneMegabyte(t *testing.T) {
	e := newStreamEnv(t, Options{})
	arn := e.createTable(t, "bigpage", "NEW_IMAGE")
	big := attr.Str(strings.Repeat("x", 100_000))
	for i := range 15 {
		k := strconv.Itoa(i)
		e.write(t, "bigpage", key(k), attr.Item{"pk": attr.Str(k), "blob": big})
	}
	shard := aws.ToString(e.shards(t, arn, 0)[0].ShardId)
	out, err := e.sc.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: e.iter(t, arn, shard, types.ShardIteratorTypeTrimHorizon, "")})
	if err != nil {
		t.Fatal(err)
	}
	// Ten records of about 100 KB fit in 1 MB; an eleventh does not.
	if len(out.Records) != 10 {
		t.Fatalf("first page: %d records of 100 KB, want 10 (1 MB)", len(out.Records))
	}
	rest, _ := e.drain(t, out.NextShardIterator, 0)
	if len(rest) != 5 {
		t.Fatalf("the rest: %d records, want 5", len(rest))
	}
}
