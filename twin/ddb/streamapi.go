package ddb

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/fourlanes/fourlanes/twin/ddb/attr"
)

// The DynamoDB Streams API: ListStreams, DescribeStream, GetShardIterator, GetRecords.
// https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_Operations_Amazon_DynamoDB_Streams.html

func init() {
	register(targetStreams+"ListStreams", opListStreams)
	register(targetStreams+"DescribeStream", opDescribeStream)
	register(targetStreams+"GetShardIterator", opGetShardIterator)
	register(targetStreams+"GetRecords", opGetRecords)
}

const (
	// iteratorTTL: "A shard iterator expires 15 minutes after it is returned to the requester."
	iteratorTTL = 15 * time.Minute
	// maxGetRecords and maxGetRecordsBytes: "GetRecords can retrieve a maximum of 1 MB of
	// data or 1000 stream records, whichever comes first."
	maxGetRecords      = 1000
	maxGetRecordsBytes = 1 << 20
	// recordOverhead approximates what a record adds to a response beyond its
	// SizeBytes (eventID, names, region, sequence number), for the 1 MB page.
	recordOverhead = 256
	maxListLimit   = 100
)

func limitError(v, max int) error {
	if v < 1 {
		return validationf("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1", v)
	}
	return validationf("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value less than or equal to %d", v, max)
}

// listLimit is ListStreams' and DescribeStream's Limit: their reference gives a
// valid range of "Minimum value of 1" and "The upper limit is 100". ListStreams
// refuses more (observed: Limit 101 is a ValidationException); DescribeStream
// serves more as 100, as no one has reported AWS refusing it there.
func listLimit(v *int, refuseOver bool) (int, error) {
	switch {
	case v == nil:
		return maxListLimit, nil
	case *v < 1, refuseOver && *v > maxListLimit:
		return 0, limitError(*v, maxListLimit)
	}
	return min(*v, maxListLimit), nil
}

func streamNotFound(arn string) error {
	return notFoundf("Requested resource not found: Stream: %s not found", arn)
}

// streamARNRE is the shape of a stream's ARN: a table's ARN, "/stream/" and a label.
var streamARNRE = regexp.MustCompile(`^arn:[a-z0-9-]+:dynamodb:[a-z0-9-]*:[0-9]*:table/[a-zA-Z0-9_.-]{3,255}/stream/[^/]+$`)

// checkStreamARN refuses a StreamArn that is no stream ARN at all with a
// ValidationException, as AWS does; a well-formed ARN of no stream is
// ResourceNotFoundException. The length bounds (37 to 1,024) are the reference's;
// the wording past them is ours.
func checkStreamARN(arn, param string) error {
	switch {
	case len(arn) < 37:
		return validationf("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must have length greater than or equal to 37", arn, param)
	case len(arn) > 1024:
		return validationf("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must have length less than or equal to 1024", arn, param)
	case !streamARNRE.MatchString(arn):
		return validationf("Invalid StreamArn: %s", arn)
	}
	return nil
}

type streamSummaryJSON struct {
	StreamArn   string
	StreamLabel string
	TableName   string
}

func opListStreams(ctx context.Context, db *DB, body []byte) (any, error) {
	var in struct {
		TableName               string
		Limit                   *int
		ExclusiveStartStreamArn string
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	limit, err := listLimit(in.Limit, true)
	if err != nil {
		return nil, err
	}
	if in.ExclusiveStartStreamArn != "" {
		if err := checkStreamARN(in.ExclusiveStartStreamArn, "exclusiveStartStreamArn"); err != nil {
			return nil, err
		}
	}
	// Forgetting expired streams here too keeps a DB without the background loop
	// (TTLSweep < 0) from listing them forever.
	db.streams.maintain(db.now())
	out := map[string]any{}
	list := []streamSummaryJSON{}
	for _, st := range db.streams.all() {
		if in.ExclusiveStartStreamArn != "" && st.ARN <= in.ExclusiveStartStreamArn {
			continue
		}
		if in.TableName != "" && st.tableName != in.TableName {
			continue
		}
		if !st.visible() {
			continue
		}
		if len(list) == limit {
			out["LastEvaluatedStreamArn"] = list[len(list)-1].StreamArn
			break
		}
		list = append(list, streamSummaryJSON{StreamArn: st.ARN, StreamLabel: st.Label, TableName: st.tableName})
	}
	out["Streams"] = list
	return out, nil
}

type seqRangeJSON struct {
	StartingSequenceNumber string `json:",omitempty"`
	EndingSequenceNumber   string `json:",omitempty"`
}

type shardJSON struct {
	ShardId             string
	ParentShardId       string `json:",omitempty"`
	SequenceNumberRange seqRangeJSON
}

func opDescribeStream(ctx context.Context, db *DB, body []byte) (any, error) {
	var in struct {
		StreamArn             string
		Limit                 *int
		ExclusiveStartShardId string
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.StreamArn == "" {
		return nil, validationf("1 validation error detected: Value null at 'streamArn' failed to satisfy constraint: Member must not be null")
	}
	limit, err := listLimit(in.Limit, false)
	if err != nil {
		return nil, err
	}
	if err := checkStreamARN(in.StreamArn, "streamArn"); err != nil {
		return nil, err
	}
	st := db.streams.lookup(in.StreamArn)
	if st == nil {
		return nil, streamNotFound(in.StreamArn)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.maintainLocked(db.now())
	start := 0
	if in.ExclusiveStartShardId != "" {
		// A start shard that has since been trimmed away still places the page:
		// shard IDs sort by creation time within a stream.
		_, listed := st.byID[in.ExclusiveStartShardId]
		start = len(st.shards)
		for i, sh := range st.shards {
			if listed && sh.id == in.ExclusiveStartShardId {
				start = i + 1
				break
			}
			if !listed && sh.id > in.ExclusiveStartShardId {
				start = i
				break
			}
		}
	}
	shards := []shardJSON{}
	d := map[string]any{
		"StreamArn":               st.ARN,
		"StreamLabel":             st.Label,
		"StreamStatus":            st.status(),
		"StreamViewType":          st.ViewType,
		"TableName":               st.tableName,
		"KeySchema":               st.keySchema,
		"CreationRequestDateTime": float64(st.created.UnixMilli()) / 1000,
	}
	for _, sh := range st.shards[start:] {
		if len(shards) == limit {
			d["LastEvaluatedShardId"] = shards[len(shards)-1].ShardId
			break
		}
		j := shardJSON{ShardId: sh.id, ParentShardId: sh.parent, SequenceNumberRange: seqRangeJSON{StartingSequenceNumber: formatSeq(sh.start)}}
		if sh.closed {
			j.SequenceNumberRange.EndingSequenceNumber = formatSeq(sh.end)
		}
		shards = append(shards, j)
	}
	d["Shards"] = shards
	return map[string]any{"StreamDescription": d}, nil
}

// iterator is what a shard iterator string carries: the stream, the shard, the
// position (the lowest sequence number the next read returns) and when it was
// issued. It is opaque to callers: base64 of JSON.
type iterator struct {
	Stream string `json:"a"`
	Shard  string `json:"s"`
	Pos    uint64 `json:"p"`
	Issued int64  `json:"t"` // unix milliseconds
}

const iteratorPrefix = "fl1:"

func (it iterator) String() string {
	b, _ := json.Marshal(it)
	return iteratorPrefix + base64.RawURLEncoding.EncodeToString(b)
}

func parseIterator(s string) (iterator, bool) {
	var it iterator
	rest, ok := strings.CutPrefix(s, iteratorPrefix)
	if !ok {
		return it, false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || json.Unmarshal(b, &it) != nil || it.Stream == "" || it.Shard == "" {
		return it, false
	}
	return it, true
}

func trimmedError() error {
	// The wording of AWS's TrimmedDataAccessException description.
	return newError(http.StatusBadRequest, CodeTrimmedDataAccess, "The operation attempted to read past the oldest stream record in a shard.")
}

func shardNotFound(id string) error {
	return notFoundf("Requested resource not found: Shard does not exist: %s", id)
}

func opGetShardIterator(ctx context.Context, db *DB, body []byte) (any, error) {
	var in struct {
		StreamArn         string
		ShardId           string
		ShardIteratorType string
		SequenceNumber    string
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	switch {
	case in.StreamArn == "":
		return nil, validationf("1 validation error detected: Value null at 'streamArn' failed to satisfy constraint: Member must not be null")
	case in.ShardId == "":
		return nil, validationf("1 validation error detected: Value null at 'shardId' failed to satisfy constraint: Member must not be null")
	}
	bySeq := in.ShardIteratorType == "AT_SEQUENCE_NUMBER" || in.ShardIteratorType == "AFTER_SEQUENCE_NUMBER"
	switch {
	case in.ShardIteratorType != "TRIM_HORIZON" && in.ShardIteratorType != "LATEST" && !bySeq:
		return nil, validationf("1 validation error detected: Value '%s' at 'shardIteratorType' failed to satisfy constraint: Member must satisfy enum value set: [AFTER_SEQUENCE_NUMBER, LATEST, AT_SEQUENCE_NUMBER, TRIM_HORIZON]", in.ShardIteratorType)
	case bySeq && in.SequenceNumber == "":
		return nil, validationf("Must specify a sequence number when using ShardIteratorType %s", in.ShardIteratorType)
	case !bySeq && in.SequenceNumber != "":
		return nil, validationf("Sequence number must not be specified when using ShardIteratorType %s", in.ShardIteratorType)
	}
	if err := checkStreamARN(in.StreamArn, "streamArn"); err != nil {
		return nil, err
	}
	st := db.streams.lookup(in.StreamArn)
	if st == nil {
		return nil, streamNotFound(in.StreamArn)
	}
	now := db.now()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.maintainLocked(now)
	sh := st.byID[in.ShardId]
	if sh == nil {
		return nil, shardNotFound(in.ShardId)
	}
	it := iterator{Stream: st.ARN, Shard: sh.id, Issued: now.UnixMilli()}
	switch in.ShardIteratorType {
	case "TRIM_HORIZON":
		it.Pos = sh.floor
	case "LATEST":
		it.Pos = st.latest(sh)
	default:
		// A sequence number must be one of this shard's records; one below the trim
		// horizon is trimmed data. The ValidationException's wording is unconfirmed
		// against AWS.
		// The shard's own StartingSequenceNumber is always a valid position, even
		// before the shard has a record (AWS accepts it; readers start a new
		// shard there).
		n, ok := parseSeq(in.SequenceNumber)
		if !ok || n < sh.start || (n >= st.latest(sh) && n != sh.start) {
			return nil, validationf("Invalid SequenceNumber for ShardIteratorType %s: %s is not in shard %s", in.ShardIteratorType, in.SequenceNumber, sh.id)
		}
		if n < sh.floor {
			return nil, trimmedError()
		}
		live := sh.live()
		if i := sh.search(n); n != sh.start && (i == len(live) || live[i].seq != n) {
			return nil, validationf("Invalid SequenceNumber for ShardIteratorType %s: %s is not in shard %s", in.ShardIteratorType, in.SequenceNumber, sh.id)
		}
		it.Pos = n
		if in.ShardIteratorType == "AFTER_SEQUENCE_NUMBER" {
			it.Pos = n + 1
		}
	}
	return map[string]any{"ShardIterator": it.String()}, nil
}

type streamRecordJSON struct {
	ApproximateCreationDateTime int64
	Keys                        attr.Item
	NewImage                    attr.Item `json:",omitempty"`
	OldImage                    attr.Item `json:",omitempty"`
	SequenceNumber              string
	SizeBytes                   int
	StreamViewType              string
}

type recordJSON struct {
	AwsRegion    string           `json:"awsRegion"`
	Dynamodb     streamRecordJSON `json:"dynamodb"`
	EventID      string           `json:"eventID"`
	EventName    string           `json:"eventName"`
	EventSource  string           `json:"eventSource"`
	EventVersion string           `json:"eventVersion"`
	UserIdentity *UserIdentity    `json:"userIdentity,omitempty"`
}

type getRecordsOutput struct {
	Records           []recordJSON
	NextShardIterator *string `json:",omitempty"`
}

func opGetRecords(ctx context.Context, db *DB, body []byte) (any, error) {
	var in struct {
		ShardIterator string
		Limit         *int
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.ShardIterator == "" {
		return nil, validationf("1 validation error detected: Value null at 'shardIterator' failed to satisfy constraint: Member must not be null")
	}
	limit := maxGetRecords
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > maxGetRecords {
			return nil, limitError(*in.Limit, maxGetRecords)
		}
		limit = *in.Limit
	}
	it, ok := parseIterator(in.ShardIterator)
	if !ok {
		return nil, validationf("Invalid ShardIterator")
	}
	now := db.now()
	if now.Sub(time.UnixMilli(it.Issued)) > iteratorTTL {
		return nil, newError(http.StatusBadRequest, CodeExpiredIterator, "Shard iterator has expired")
	}
	st := db.streams.lookup(it.Stream)
	if st == nil {
		return nil, streamNotFound(it.Stream)
	}
	recs, next, err := st.read(it, limit, now)
	if err != nil {
		return nil, err
	}
	// Rendering happens outside the stream's lock: records are immutable.
	out := getRecordsOutput{Records: make([]recordJSON, 0, len(recs))}
	for _, r := range recs {
		out.Records = append(out.Records, recordJSON{
			AwsRegion: db.opts.Region,
			Dynamodb: streamRecordJSON{
				ApproximateCreationDateTime: r.at.Unix(), Keys: r.keys, NewImage: r.new, OldImage: r.old,
				SequenceNumber: formatSeq(r.seq), SizeBytes: r.size, StreamViewType: st.ViewType,
			},
			EventID: st.eventID(r.seq), EventName: r.name, EventSource: "aws:dynamodb", EventVersion: "1.1",
			UserIdentity: r.ident,
		})
	}
	if next != nil {
		s := next.String()
		out.NextShardIterator = &s
	}
	return out, nil
}

// read returns up to limit records (and about 1 MB) from the iterator's position, and
// the iterator after them (nil once a closed shard is read to its end). Finding the
// position is a binary search: O(log n + k).
func (st *Stream) read(it iterator, limit int, now time.Time) ([]*streamRecord, *iterator, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.maintainLocked(now)
	sh := st.byID[it.Shard]
	if sh == nil {
		// The shard is gone: its records were all trimmed.
		return nil, nil, trimmedError()
	}
	if it.Pos < sh.floor {
		return nil, nil, trimmedError()
	}
	live := sh.live()
	i := sh.search(it.Pos)
	end := min(i+limit, len(live))
	bytes := 0
	j := i
	for ; j < end; j++ {
		bytes += live[j].size + recordOverhead
		if bytes > maxGetRecordsBytes && j > i {
			break
		}
	}
	recs := live[i:j:j]
	next := it
	next.Issued = now.UnixMilli()
	if len(recs) > 0 {
		next.Pos = recs[len(recs)-1].seq + 1
	}
	if sh.closed && j == len(live) {
		// A closed shard gets no more records: read to its end, it has no next iterator
		// (also when it closed empty, or its last records were trimmed).
		return recs, nil, nil
	}
	return recs, &next, nil
}
