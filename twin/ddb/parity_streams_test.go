package ddb_test

import (
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/fourlanes/fourlanes/twin/ddb"
)

// sitem converts a Streams AttributeValue map to the DynamoDB one (the SDK has two
// identical type families), so records compare with render like items do.
func sitem(m map[string]stypes.AttributeValue) item {
	if m == nil {
		return nil
	}
	out := item{}
	for k, v := range m {
		out[k] = sval(v)
	}
	return out
}

func sval(v stypes.AttributeValue) types.AttributeValue {
	switch x := v.(type) {
	case *stypes.AttributeValueMemberS:
		return s(x.Value)
	case *stypes.AttributeValueMemberN:
		return n(x.Value)
	case *stypes.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: x.Value}
	case *stypes.AttributeValueMemberBOOL:
		return boolv(x.Value)
	case *stypes.AttributeValueMemberNULL:
		return null()
	case *stypes.AttributeValueMemberSS:
		return ss(x.Value...)
	case *stypes.AttributeValueMemberNS:
		return ns(x.Value...)
	case *stypes.AttributeValueMemberBS:
		return bs(x.Value...)
	case *stypes.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(x.Value))
		for i, e := range x.Value {
			l[i] = sval(e)
		}
		return list(l...)
	case *stypes.AttributeValueMemberM:
		return mapv(sitem(x.Value))
	}
	return s(fmt.Sprintf("<unknown %T>", v))
}

// streamArn returns the table's latest stream ARN (ListStreams by table).
func (p *parity) streamArn(table string) string {
	p.t.Helper()
	out, err := p.s.ListStreams(p.ctx, &dynamodbstreams.ListStreamsInput{TableName: aws.String(table)})
	if err != nil {
		code, msg := apiErr(err)
		p.t.Fatalf("ListStreams %s: %s: %s (doc %s)", table, code, msg, docStreams)
	}
	if len(out.Streams) == 0 {
		p.t.Fatalf("ListStreams %s: got no stream, want one (doc %s)", table, docStreams)
	}
	return aws.ToString(out.Streams[len(out.Streams)-1].StreamArn)
}

// shards returns every shard of the stream (DescribeStream, paged).
func (p *parity) shards(arn string) []stypes.Shard {
	p.t.Helper()
	var out []stypes.Shard
	var start *string
	for {
		d, err := p.s.DescribeStream(p.ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn), ExclusiveStartShardId: start})
		if err != nil {
			code, msg := apiErr(err)
			p.t.Fatalf("DescribeStream: %s: %s (doc %s)", code, msg, docAPIDescStream)
		}
		out = append(out, d.StreamDescription.Shards...)
		if d.StreamDescription.LastEvaluatedShardId == nil {
			return out
		}
		start = d.StreamDescription.LastEvaluatedShardId
	}
}

// readShard reads one shard from the iterator until a closed shard's end (no
// NextShardIterator) or an open shard's end (a read that returns no records).
func (p *parity) readShard(it *string) ([]stypes.Record, error) {
	var recs []stypes.Record
	for i := 0; it != nil && i < 1000; i++ {
		out, err := p.s.GetRecords(p.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
		if err != nil {
			return recs, err
		}
		recs = append(recs, out.Records...)
		if len(out.Records) == 0 {
			return recs, nil
		}
		it = out.NextShardIterator
	}
	return recs, nil
}

// readStream reads every shard from TRIM_HORIZON, parents before children.
func (p *parity) readStream(arn string) []stypes.Record {
	p.t.Helper()
	shards := p.shards(arn)
	done := map[string]bool{}
	var recs []stypes.Record
	for len(done) < len(shards) {
		progressed := false
		for _, sh := range shards {
			id := aws.ToString(sh.ShardId)
			parent := aws.ToString(sh.ParentShardId)
			if done[id] || (parent != "" && !done[parent] && hasShard(shards, parent)) {
				continue
			}
			it, err := p.s.GetShardIterator(p.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn),
				ShardId: sh.ShardId, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
			if err != nil {
				code, msg := apiErr(err)
				p.t.Fatalf("GetShardIterator %s: %s: %s (doc %s)", id, code, msg, docAPIGetShardIt)
			}
			r, err := p.readShard(it.ShardIterator)
			if err != nil {
				code, msg := apiErr(err)
				p.t.Fatalf("GetRecords %s: %s: %s (doc %s)", id, code, msg, docAPIGetRecords)
			}
			recs = append(recs, r...)
			done[id] = true
			progressed = true
		}
		if !progressed {
			p.t.Fatalf("shard lineage has a cycle or a missing parent (doc %s)", docStreams)
		}
	}
	return recs
}

func hasShard(shards []stypes.Shard, id string) bool {
	for _, sh := range shards {
		if aws.ToString(sh.ShardId) == id {
			return true
		}
	}
	return false
}

func seqNum(r stypes.Record) *big.Int {
	v, ok := new(big.Int).SetString(aws.ToString(r.Dynamodb.SequenceNumber), 10)
	if !ok {
		return big.NewInt(-1)
	}
	return v
}

// TestParityStreamRecords: one record per change with the images its view type asks
// for; none for a write that changes nothing, a failed condition or a cancelled
// transaction.
func TestParityStreamRecords(t *testing.T) {
	p := newParity(t, ddb.Options{})
	for _, view := range []types.StreamViewType{types.StreamViewTypeKeysOnly, types.StreamViewTypeNewImage, types.StreamViewTypeOldImage, types.StreamViewTypeNewAndOldImages} {
		t.Run(string(view), func(t *testing.T) {
			tbl := p.table(tableSpec{hash: "pk", hashType: "S", rng: "sk", rngType: "N", streamView: view})
			key := item{"pk": s("a"), "sk": n("1")}
			v1 := item{"pk": s("a"), "sk": n("1"), "v": n("1")}
			v2 := item{"pk": s("a"), "sk": n("1"), "v": n("2")}
			v3 := item{"pk": s("a"), "sk": n("1"), "v": n("3")}
			p.put(tbl, v1)                                                                                  // INSERT
			p.put(tbl, v1)                                                                                  // no change: no record
			_, err := p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: key, // no change: no record
				UpdateExpression: aws.String("SET v = :one"), ExpressionAttributeValues: item{":one": n("1")}})
			wantOK(t, "no-op update", err, docAPIUpdate)
			p.put(tbl, v2) // MODIFY
			_, err = p.c.PutItem(p.ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: v3, ConditionExpression: aws.String("v = :nine"),
				ExpressionAttributeValues: item{":nine": n("9")}}) // failed condition: no record
			wantErr(t, "failed condition", err, "ConditionalCheckFailedException", docAPIPut)
			_, err = p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String(tbl), Item: v3}},
				{ConditionCheck: &types.ConditionCheck{TableName: aws.String(tbl), Key: item{"pk": s("zz"), "sk": n("0")}, ConditionExpression: aws.String("attribute_exists(pk)")}},
			}}) // cancelled: no record
			wantErr(t, "cancelled transaction", err, "TransactionCanceledException", docAPITxWrite)
			_, err = p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: key, // MODIFY
				UpdateExpression: aws.String("SET v = :three"), ExpressionAttributeValues: item{":three": n("3")}})
			wantOK(t, "update", err, docAPIUpdate)
			_, err = p.c.DeleteItem(p.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(tbl), Key: key}) // REMOVE
			wantOK(t, "delete", err, docAPIDelete)
			_, err = p.c.DeleteItem(p.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(tbl), Key: key}) // nothing to delete: no record
			wantOK(t, "delete of a missing item", err, docAPIDelete)

			recs := p.readStream(p.streamArn(tbl))
			type want struct {
				name     stypes.OperationType
				old, new item
			}
			wants := []want{{"INSERT", nil, v1}, {"MODIFY", v1, v2}, {"MODIFY", v2, v3}, {"REMOVE", v3, nil}}
			var names []string
			for _, r := range recs {
				names = append(names, string(r.EventName))
			}
			if got, w := strings.Join(names, " "), "INSERT MODIFY MODIFY REMOVE"; got != w {
				t.Fatalf("%s: got events %q, want %q (no record for a write that changes nothing) (doc %s)", view, got, w, docStreams)
			}
			var prev *big.Int
			for i, r := range recs {
				w := wants[i]
				what := fmt.Sprintf("%s record %d (%s)", view, i, w.name)
				sr := r.Dynamodb
				if sr == nil {
					t.Errorf("%s: got no dynamodb member (doc %s)", what, docAPIRecord)
					continue
				}
				wantItem(t, what+" Keys", sitem(sr.Keys), key, docAPIRecord)
				wantNew, wantOld := item(nil), item(nil)
				if view == types.StreamViewTypeNewImage || view == types.StreamViewTypeNewAndOldImages {
					wantNew = w.new
				}
				if view == types.StreamViewTypeOldImage || view == types.StreamViewTypeNewAndOldImages {
					wantOld = w.old
				}
				wantItem(t, what+" NewImage", sitem(sr.NewImage), wantNew, docStreams)
				wantItem(t, what+" OldImage", sitem(sr.OldImage), wantOld, docStreams)
				if got := string(sr.StreamViewType); got != string(view) {
					t.Errorf("%s StreamViewType: got %q, want %q (doc %s)", what, got, view, docAPIRecord)
				}
				if got := aws.ToString(r.EventSource); got != "aws:dynamodb" {
					t.Errorf("%s eventSource: got %q, want aws:dynamodb (doc %s)", what, got, docAPIRecord)
				}
				if got := aws.ToString(r.AwsRegion); got != "us-east-1" {
					t.Errorf("%s awsRegion: got %q, want us-east-1 (doc %s)", what, got, docAPIRecord)
				}
				if aws.ToString(r.EventID) == "" || aws.ToString(r.EventVersion) == "" {
					t.Errorf("%s: got eventID %q eventVersion %q, want both set (doc %s)", what, aws.ToString(r.EventID), aws.ToString(r.EventVersion), docAPIRecord)
				}
				if r.UserIdentity != nil {
					t.Errorf("%s: got userIdentity %+v on a user's write, want none (doc %s)", what, *r.UserIdentity, docAPIRecord)
				}
				if sr.SizeBytes == nil || *sr.SizeBytes <= 0 {
					t.Errorf("%s: got SizeBytes %v, want positive (doc %s)", what, sr.SizeBytes, docAPIRecord)
				}
				if sr.ApproximateCreationDateTime == nil || sr.ApproximateCreationDateTime.Sub(p.clock.Now()).Abs() > time.Minute {
					t.Errorf("%s: got ApproximateCreationDateTime %v, want about %v (the DB's clock) (doc %s)", what, sr.ApproximateCreationDateTime, p.clock.Now(), docAPIRecord)
				}
				seq := seqNum(r)
				if prev != nil && seq.Cmp(prev) <= 0 {
					t.Errorf("%s: SequenceNumber %s not after %s (doc %s)", what, seq, prev, docStreams)
				}
				prev = seq
			}
		})
	}
}

// TestParityStreamOrder: "For each item that is modified in a DynamoDB table, the
// stream records appear in the same sequence as the actual modifications to the item."
// Shards roll over to children (ShardRecords small): each child names its parent, the
// parent is closed with an ending sequence number, and reading parents first gives
// every change once, in order.
func TestParityStreamOrder(t *testing.T) {
	p := newParity(t, ddb.Options{ShardRecords: 4})
	tbl := p.table(tableSpec{streamView: types.StreamViewTypeNewImage})
	const items, rounds = 3, 6
	for r := 1; r <= rounds; r++ {
		for i := 0; i < items; i++ {
			p.put(tbl, item{"pk": s("k" + strconv.Itoa(i)), "v": n(strconv.Itoa(r))})
		}
	}
	arn := p.streamArn(tbl)
	shards := p.shards(arn)
	if len(shards) < items*rounds/4 {
		t.Errorf("shards: got %d for %d records at 4 per shard, want at least %d (doc %s)", len(shards), items*rounds, items*rounds/4, docStreams)
	}
	open := 0
	for i, sh := range shards {
		rng := sh.SequenceNumberRange
		if rng == nil || rng.StartingSequenceNumber == nil {
			t.Errorf("shard %d: got no StartingSequenceNumber (doc %s)", i, docAPIDescStream)
			continue
		}
		if rng.EndingSequenceNumber == nil {
			open++
		}
		if i > 0 && aws.ToString(sh.ParentShardId) == "" {
			t.Errorf("shard %d (%s): got no ParentShardId, want its predecessor (doc %s)", i, aws.ToString(sh.ShardId), docStreams)
		}
		if i > 0 && aws.ToString(sh.ParentShardId) != "" && !hasShard(shards, aws.ToString(sh.ParentShardId)) {
			t.Errorf("shard %d: parent %s not in DescribeStream (doc %s)", i, aws.ToString(sh.ParentShardId), docStreams)
		}
	}
	if open != 1 {
		t.Errorf("open shards (no EndingSequenceNumber): got %d, want 1 (doc %s)", open, docAPIDescStream)
	}
	recs := p.readStream(arn)
	if len(recs) != items*rounds {
		t.Errorf("records: got %d, want %d (each change exactly once) (doc %s)", len(recs), items*rounds, docStreams)
	}
	last := map[string]int{}
	for _, r := range recs {
		k := render(sitem(r.Dynamodb.Keys))
		v, _ := strconv.Atoi(numOf(sitem(r.Dynamodb.NewImage)["v"]))
		if v != last[k]+1 {
			t.Errorf("item %s: got version %d after %d, want %d (per-item order) (doc %s)", k, v, last[k], last[k]+1, docStreams)
		}
		last[k] = v
	}
	seen := map[string]bool{}
	for i, r := range recs {
		k := render(sitem(r.Dynamodb.Keys))
		want := "MODIFY"
		if !seen[k] {
			want = "INSERT"
		}
		seen[k] = true
		if string(r.EventName) != want {
			t.Errorf("record %d (%s): got %s, want %s (doc %s)", i, k, r.EventName, want, docAPIRecord)
		}
	}
}

// TestParityShardIterators: TRIM_HORIZON, LATEST, AT_SEQUENCE_NUMBER,
// AFTER_SEQUENCE_NUMBER; 15-minute expiry.
func TestParityShardIterators(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{streamView: types.StreamViewTypeKeysOnly})
	for i := 0; i < 4; i++ {
		p.put(tbl, item{"pk": s("k" + strconv.Itoa(i))})
	}
	arn := p.streamArn(tbl)
	shards := p.shards(arn)
	if len(shards) != 1 {
		t.Fatalf("shards: got %d, want 1 (doc %s)", len(shards), docStreams)
	}
	shard := shards[0].ShardId
	iter := func(typ stypes.ShardIteratorType, seq *string) (*string, error) {
		out, err := p.s.GetShardIterator(p.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: shard,
			ShardIteratorType: typ, SequenceNumber: seq})
		if err != nil {
			return nil, err
		}
		return out.ShardIterator, nil
	}
	keysOf := func(recs []stypes.Record) string {
		var ks []string
		for _, r := range recs {
			ks = append(ks, strings.TrimPrefix(render(sitem(r.Dynamodb.Keys)["pk"]), "S"))
		}
		return strings.Join(ks, " ")
	}
	it, err := iter(stypes.ShardIteratorTypeTrimHorizon, nil)
	if !wantOK(t, "TRIM_HORIZON", err, docAPIGetShardIt) {
		return
	}
	all, err := p.readShard(it)
	if !wantOK(t, "GetRecords", err, docAPIGetRecords) || len(all) != 4 {
		t.Fatalf("TRIM_HORIZON: got %d records, want 4 (doc %s)", len(all), docAPIGetShardIt)
	}
	if got := keysOf(all); got != `"k0" "k1" "k2" "k3"` {
		t.Errorf("TRIM_HORIZON: got %s, want k0..k3 (doc %s)", got, docAPIGetShardIt)
	}
	at, err := iter(stypes.ShardIteratorTypeAtSequenceNumber, all[2].Dynamodb.SequenceNumber)
	if wantOK(t, "AT_SEQUENCE_NUMBER", err, docAPIGetShardIt) {
		recs, err := p.readShard(at)
		if wantOK(t, "GetRecords", err, docAPIGetRecords) && keysOf(recs) != `"k2" "k3"` {
			t.Errorf("AT_SEQUENCE_NUMBER of k2: got %s, want k2 k3 (doc %s)", keysOf(recs), docAPIGetShardIt)
		}
	}
	after, err := iter(stypes.ShardIteratorTypeAfterSequenceNumber, all[2].Dynamodb.SequenceNumber)
	if wantOK(t, "AFTER_SEQUENCE_NUMBER", err, docAPIGetShardIt) {
		recs, err := p.readShard(after)
		if wantOK(t, "GetRecords", err, docAPIGetRecords) && keysOf(recs) != `"k3"` {
			t.Errorf("AFTER_SEQUENCE_NUMBER of k2: got %s, want k3 (doc %s)", keysOf(recs), docAPIGetShardIt)
		}
	}
	latest, err := iter(stypes.ShardIteratorTypeLatest, nil)
	if wantOK(t, "LATEST", err, docAPIGetShardIt) {
		p.put(tbl, item{"pk": s("k4")})
		recs, err := p.readShard(latest)
		if wantOK(t, "GetRecords", err, docAPIGetRecords) && keysOf(recs) != `"k4"` {
			t.Errorf("LATEST then a write: got %s, want k4 only (doc %s)", keysOf(recs), docAPIGetShardIt)
		}
	}
	_, err = iter(stypes.ShardIteratorTypeAtSequenceNumber, nil)
	wantErr(t, "AT_SEQUENCE_NUMBER without a sequence number", err, "ValidationException", docAPIGetShardIt)
	_, err = p.s.GetShardIterator(p.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String("shardId-nope"),
		ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
	wantErr(t, "unknown shard", err, "ResourceNotFoundException", docAPIGetShardIt)

	t.Run("iterators expire after 15 minutes", func(t *testing.T) {
		it, err := iter(stypes.ShardIteratorTypeTrimHorizon, nil)
		if !wantOK(t, "TRIM_HORIZON", err, docAPIGetShardIt) {
			return
		}
		p.clock.Advance(14 * time.Minute)
		out, err := p.s.GetRecords(p.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
		if !wantOK(t, "GetRecords after 14 minutes", err, docAPIGetShardIt) {
			return
		}
		next := out.NextShardIterator
		p.clock.Advance(2 * time.Minute) // 16 minutes after the first, 2 after the next
		_, err = p.s.GetRecords(p.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
		wantErr(t, "GetRecords with a 16-minute-old iterator", err, "ExpiredIteratorException", docAPIGetShardIt)
		if next != nil {
			_, err = p.s.GetRecords(p.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: next})
			wantOK(t, "GetRecords with the NextShardIterator it returned", err, docAPIGetRecords)
		}
	})
}

// TestParityStreamTrimming: records older than the retention period are trimmed;
// asking for them, or using an iterator that points at them, is
// TrimmedDataAccessException.
func TestParityStreamTrimming(t *testing.T) {
	p := newParity(t, ddb.Options{StreamRetention: 10 * time.Minute})
	tbl := p.table(tableSpec{streamView: types.StreamViewTypeKeysOnly})
	p.put(tbl, item{"pk": s("old")})
	arn := p.streamArn(tbl)
	shard := p.shards(arn)[0].ShardId
	it, err := p.s.GetShardIterator(p.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: shard,
		ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
	if !wantOK(t, "TRIM_HORIZON", err, docAPIGetShardIt) {
		return
	}
	first, err := p.s.GetRecords(p.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
	if !wantOK(t, "GetRecords", err, docAPIGetRecords) || len(first.Records) != 1 {
		t.Fatalf("GetRecords: want 1 record (doc %s)", docAPIGetRecords)
	}
	oldSeq := first.Records[0].Dynamodb.SequenceNumber
	it2, err := p.s.GetShardIterator(p.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: shard,
		ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
	if !wantOK(t, "TRIM_HORIZON", err, docAPIGetShardIt) {
		return
	}

	p.clock.Advance(11 * time.Minute) // past retention, inside the iterator's 15 minutes
	p.put(tbl, item{"pk": s("new")})

	_, err = p.s.GetRecords(p.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it2.ShardIterator})
	wantErr(t, "GetRecords with an iterator at a trimmed record", err, "TrimmedDataAccessException", docAPIGetRecords)
	_, err = p.s.GetShardIterator(p.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: shard,
		ShardIteratorType: stypes.ShardIteratorTypeAtSequenceNumber, SequenceNumber: oldSeq})
	wantErr(t, "GetShardIterator at a trimmed sequence number", err, "TrimmedDataAccessException", docAPIGetShardIt)

	recs := p.readStream(arn)
	var keys []string
	for _, r := range recs {
		keys = append(keys, render(sitem(r.Dynamodb.Keys)))
	}
	if got, want := strings.Join(keys, " "), render(item{"pk": s("new")}); got != want {
		t.Errorf("TRIM_HORIZON after trimming: got %s, want %s (doc %s)", got, want, docStreams)
	}
}

// TestParityTTL: expired items are deleted by the service (SweepTTL here); the REMOVE
// record carries userIdentity Service / dynamodb.amazonaws.com; expired items not yet
// deleted still read; non-number TTL attributes never expire.
func TestParityTTL(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{streamView: types.StreamViewTypeNewAndOldImages, ttlAttr: "exp"})
	now := p.clock.Now().Unix()
	expired := item{"pk": s("expired"), "exp": n(strconv.FormatInt(now-3600, 10))}
	later := item{"pk": s("later"), "exp": n(strconv.FormatInt(now+3600, 10))}
	notNum := item{"pk": s("string-exp"), "exp": s(strconv.FormatInt(now-3600, 10))}
	none := item{"pk": s("no-exp")}
	byUser := item{"pk": s("by-user")}
	// "If the epoch time value stored in the attribute is less than the current time,
	// the item is marked as expired": equal is not expired yet.
	atNow := item{"pk": s("at-now"), "exp": n(strconv.FormatInt(now, 10))}
	for _, it := range []item{expired, later, notNum, none, byUser, atNow} {
		p.put(tbl, it)
	}
	// "Items that have expired, but haven't yet been deleted by TTL, still appear in
	// reads, queries, and scans."
	wantItem(t, "expired item before the sweep", p.get(tbl, item{"pk": s("expired")}), expired, docTTL)

	_, err := p.c.DeleteItem(p.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(tbl), Key: item{"pk": s("by-user")}})
	wantOK(t, "user delete", err, docAPIDelete)
	swept := p.db.SweepTTL()
	if swept != 1 {
		t.Errorf("SweepTTL: got %d deleted, want 1 (doc %s)", swept, docAPIUpdateTTL)
	}
	wantItem(t, "expired item after the sweep", p.get(tbl, item{"pk": s("expired")}), nil, docTTL)
	wantItem(t, "future item after the sweep", p.get(tbl, item{"pk": s("later")}), later, docTTL)
	wantItem(t, "string TTL attribute", p.get(tbl, item{"pk": s("string-exp")}), notNum, docTTL)
	wantItem(t, "no TTL attribute", p.get(tbl, item{"pk": s("no-exp")}), none, docTTL)
	wantItem(t, "TTL equal to now (not yet expired: \"less than the current time\")", p.get(tbl, item{"pk": s("at-now")}), atNow, docAPIUpdateTTL)

	p.clock.Advance(2 * time.Hour)
	if swept := p.db.SweepTTL(); swept != 2 {
		t.Errorf("SweepTTL two hours later: got %d deleted, want 2 (doc %s)", swept, docTTL)
	}
	wantItem(t, "future item two hours later", p.get(tbl, item{"pk": s("later")}), nil, docTTL)

	recs := p.readStream(p.streamArn(tbl))
	var removes []stypes.Record
	for _, r := range recs {
		if r.EventName == stypes.OperationTypeRemove {
			removes = append(removes, r)
		}
	}
	if len(removes) != 4 {
		t.Fatalf("REMOVE records: got %d, want 4 (user delete, three TTL deletes) (doc %s)", len(removes), docTTLStreams)
	}
	for _, r := range removes {
		k := render(sitem(r.Dynamodb.Keys))
		user := k == render(item{"pk": s("by-user")})
		switch {
		case user && r.UserIdentity != nil:
			t.Errorf("REMOVE %s (user delete): got userIdentity %+v, want none (doc %s)", k, *r.UserIdentity, docTTLStreams)
		case !user && r.UserIdentity == nil:
			t.Errorf("REMOVE %s (TTL): got no userIdentity, want Service/dynamodb.amazonaws.com (doc %s)", k, docTTLStreams)
		case !user:
			if got := aws.ToString(r.UserIdentity.Type) + "/" + aws.ToString(r.UserIdentity.PrincipalId); got != "Service/dynamodb.amazonaws.com" {
				t.Errorf("REMOVE %s (TTL) userIdentity: got %s, want Service/dynamodb.amazonaws.com (doc %s)", k, got, docTTLStreams)
			}
			if r.Dynamodb.OldImage == nil {
				t.Errorf("REMOVE %s (TTL): got no OldImage on a NEW_AND_OLD_IMAGES stream (doc %s)", k, docTTLStreams)
			}
		}
	}
}

// TestParityStreamTransactionsAndDescribe: a committed transaction leaves one record per
// item it changed (a ConditionCheck none); its idempotent replay leaves none;
// GetRecords honours Limit; DescribeStream names the table, view type and key schema;
// a disabled stream stays readable.
func TestParityStreamTransactionsAndDescribe(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{streamView: types.StreamViewTypeNewAndOldImages})
	p.put(tbl, item{"pk": s("checked")})
	tx := &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String("stream-token"), TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(tbl), Item: item{"pk": s("t1")}}},
		{Put: &types.Put{TableName: aws.String(tbl), Item: item{"pk": s("t2")}}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String(tbl), Key: item{"pk": s("checked")}, ConditionExpression: aws.String("attribute_exists(pk)")}},
	}}
	_, err := p.c.TransactWriteItems(p.ctx, tx)
	wantOK(t, "transaction", err, docAPITxWrite)
	_, err = p.c.TransactWriteItems(p.ctx, tx)
	wantOK(t, "idempotent replay", err, docAPITxWrite)

	arn := p.streamArn(tbl)
	recs := p.readStream(arn)
	var keys []string
	for _, r := range recs {
		keys = append(keys, string(r.EventName)+":"+strings.TrimPrefix(render(sitem(r.Dynamodb.Keys)["pk"]), "S"))
	}
	sort.Strings(keys) // order across items is not promised
	if got, want := strings.Join(keys, " "), `INSERT:"checked" INSERT:"t1" INSERT:"t2"`; got != want {
		t.Errorf("records after a transaction and its replay: got %s, want %s (docs %s, %s)", got, want, docStreams, docAPITxWrite)
	}

	shard := p.shards(arn)[0].ShardId
	it, err := p.s.GetShardIterator(p.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: shard,
		ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
	if wantOK(t, "TRIM_HORIZON", err, docAPIGetShardIt) {
		out, err := p.s.GetRecords(p.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(2)})
		if wantOK(t, "GetRecords Limit 2", err, docAPIGetRecords) {
			if len(out.Records) != 2 || out.NextShardIterator == nil {
				t.Errorf("GetRecords Limit 2: got %d records (next iterator %v), want 2 and a next iterator (doc %s)", len(out.Records), out.NextShardIterator != nil, docAPIGetRecords)
			} else {
				rest, err := p.readShard(out.NextShardIterator)
				if wantOK(t, "GetRecords rest", err, docAPIGetRecords) && len(rest) != 1 {
					t.Errorf("GetRecords after Limit 2: got %d records, want 1 (doc %s)", len(rest), docAPIGetRecords)
				}
			}
		}
	}

	it2, err := p.s.GetShardIterator(p.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: shard,
		ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
	if wantOK(t, "TRIM_HORIZON", err, docAPIGetShardIt) {
		// "Limit: Valid Range: Minimum value of 1. Maximum value of 1000."
		_, err = p.s.GetRecords(p.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it2.ShardIterator, Limit: aws.Int32(1001)})
		wantErr(t, "GetRecords Limit 1001", err, "ValidationException", docAPIGetRecords)
	}

	d, err := p.s.DescribeStream(p.ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if wantOK(t, "DescribeStream", err, docAPIDescStream) {
		sd := d.StreamDescription
		if aws.ToString(sd.TableName) != tbl || sd.StreamStatus != stypes.StreamStatusEnabled || sd.StreamViewType != stypes.StreamViewTypeNewAndOldImages {
			t.Errorf("DescribeStream: got table %q status %s view %s, want %q ENABLED NEW_AND_OLD_IMAGES (doc %s)",
				aws.ToString(sd.TableName), sd.StreamStatus, sd.StreamViewType, tbl, docAPIDescStream)
		}
		if len(sd.KeySchema) != 1 || aws.ToString(sd.KeySchema[0].AttributeName) != "pk" || sd.KeySchema[0].KeyType != stypes.KeyTypeHash {
			t.Errorf("DescribeStream KeySchema: got %+v, want pk HASH (doc %s)", sd.KeySchema, docAPIDescStream)
		}
	}
	dt, err := p.c.DescribeTable(p.ctx, &dynamodb.DescribeTableInput{TableName: aws.String(tbl)})
	if wantOK(t, "DescribeTable", err, docStreams) && aws.ToString(dt.Table.LatestStreamArn) != arn {
		t.Errorf("DescribeTable LatestStreamArn: got %q, want %q (doc %s)", aws.ToString(dt.Table.LatestStreamArn), arn, docStreams)
	}

	_, err = p.c.UpdateTable(p.ctx, &dynamodb.UpdateTableInput{TableName: aws.String(tbl), StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(false)}})
	if wantOK(t, "disable the stream", err, docStreams) {
		p.put(tbl, item{"pk": s("after-disable")})
		d, err := p.s.DescribeStream(p.ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
		if wantOK(t, "DescribeStream of a disabled stream", err, docAPIDescStream) {
			if st := d.StreamDescription.StreamStatus; st != stypes.StreamStatusDisabled && st != stypes.StreamStatusDisabling {
				t.Errorf("disabled stream: got StreamStatus %s, want DISABLED (doc %s)", st, docAPIDescStream)
			}
			for _, sh := range d.StreamDescription.Shards {
				if sh.SequenceNumberRange == nil || sh.SequenceNumberRange.EndingSequenceNumber == nil {
					t.Errorf("disabled stream: shard %s still open, want closed (doc %s)", aws.ToString(sh.ShardId), docStreams)
				}
			}
		}
		if got := len(p.readStream(arn)); got != 3 {
			t.Errorf("disabled stream: got %d records, want the 3 written while enabled (\"the data in the stream continues to be readable for 24 hours\") (doc %s)", got, docStreams)
		}
	}
}

// TestParityStreamEventNames: the event name follows the item, not the operation: an
// UpdateItem that creates the item is an INSERT, a BatchWriteItem put over an item is a
// MODIFY, a transaction's Delete is a REMOVE ("INSERT - a new item was added to the
// table. MODIFY - one or more of an existing item's attributes were modified. REMOVE -
// the item was deleted from the table").
func TestParityStreamEventNames(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{streamView: types.StreamViewTypeNewAndOldImages})
	_, err := p.c.UpdateItem(p.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: item{"pk": s("a")},
		UpdateExpression: aws.String("SET v = :one"), ExpressionAttributeValues: item{":one": n("1")}})
	wantOK(t, "UpdateItem creating the item", err, docAPIUpdate)
	_, err = p.c.BatchWriteItem(p.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{tbl: {
		{PutRequest: &types.PutRequest{Item: item{"pk": s("a"), "v": n("2")}}},
		{PutRequest: &types.PutRequest{Item: item{"pk": s("b")}}},
	}}})
	wantOK(t, "BatchWriteItem", err, "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html")
	_, err = p.c.TransactWriteItems(p.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Delete: &types.Delete{TableName: aws.String(tbl), Key: item{"pk": s("a")}}},
	}})
	wantOK(t, "transactional Delete", err, docAPITxWrite)
	_, err = p.c.BatchWriteItem(p.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{tbl: {
		{DeleteRequest: &types.DeleteRequest{Key: item{"pk": s("b")}}},
		{DeleteRequest: &types.DeleteRequest{Key: item{"pk": s("never")}}},
	}}})
	wantOK(t, "BatchWriteItem deletes", err, "https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html")

	// Streams order records per item only, so compare each item's sequence.
	perItem := map[string][]string{}
	for _, r := range p.readStream(p.streamArn(tbl)) {
		k := strings.TrimPrefix(render(sitem(r.Dynamodb.Keys)["pk"]), "S")
		perItem[k] = append(perItem[k], string(r.EventName))
	}
	for k, want := range map[string]string{`"a"`: "INSERT MODIFY REMOVE", `"b"`: "INSERT REMOVE"} {
		if got := strings.Join(perItem[k], " "); got != want {
			t.Errorf("item %s events: got %q, want %q (doc %s)", k, got, want, docAPIRecord)
		}
	}
	if len(perItem) != 2 {
		t.Errorf("items in the stream: got %d (%v), want 2 (no record for deleting a missing item) (doc %s)", len(perItem), perItem, docStreams)
	}
}

// TestParityStreamLifecycle: turning a stream off and on again makes a new stream (a new
// ARN and label) while the old one stays listed and readable; deleting the table leaves
// its stream readable ("the stream ... remains available for 24 hours").
func TestParityStreamLifecycle(t *testing.T) {
	p := newParity(t, ddb.Options{})
	tbl := p.table(tableSpec{streamView: types.StreamViewTypeKeysOnly})
	p.put(tbl, item{"pk": s("one")})
	first := p.streamArn(tbl)
	setStream := func(on bool) error {
		spec := &types.StreamSpecification{StreamEnabled: aws.Bool(on)}
		if on {
			spec.StreamViewType = types.StreamViewTypeKeysOnly
		}
		_, err := p.c.UpdateTable(p.ctx, &dynamodb.UpdateTableInput{TableName: aws.String(tbl), StreamSpecification: spec})
		return err
	}
	wantOK(t, "disable", setStream(false), docStreams)
	p.clock.Advance(time.Second) // a new label is the creation time
	wantOK(t, "enable again", setStream(true), docStreams)
	p.put(tbl, item{"pk": s("two")})
	second := p.streamArn(tbl)
	if second == first {
		t.Errorf("re-enabled stream: got the same ARN %s, want a new one (doc %s)", second, docStreams)
	}
	out, err := p.s.ListStreams(p.ctx, &dynamodbstreams.ListStreamsInput{TableName: aws.String(tbl)})
	if wantOK(t, "ListStreams", err, docStreams) && len(out.Streams) != 2 {
		t.Errorf("ListStreams after off and on: got %d streams, want 2 (doc %s)", len(out.Streams), docStreams)
	}
	if got := len(p.readStream(first)); got != 1 {
		t.Errorf("old stream: got %d records, want 1 (doc %s)", got, docStreams)
	}
	if got := len(p.readStream(second)); got != 1 {
		t.Errorf("new stream: got %d records, want 1 (doc %s)", got, docStreams)
	}
	_, err = p.c.DeleteTable(p.ctx, &dynamodb.DeleteTableInput{TableName: aws.String(tbl)})
	wantOK(t, "DeleteTable", err, docStreams)
	if got := len(p.readStream(second)); got != 1 {
		t.Errorf("stream of a deleted table: got %d records, want 1 (doc %s)", got, docStreams)
	}
}
