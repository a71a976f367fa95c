package eventstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestExportVerifies exports a tenant written by concurrent emitters from
// the local DynamoDB (more events than one page), verifies the export in place,
// then tampers with one stored row and shows the export names it.
func TestExportVerifies(t *testing.T) {
	f := newFixture(t, nil)
	emitConcurrently(t, f.store, []string{"acme", "globex"}, 4, 150) // 600 per tenant: two pages
	ctx := context.Background()

	var buf bytes.Buffer
	res, err := f.store.Export(ctx, "acme", &buf)
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != 600 || res.Head == nil || res.Head.LastSeq != 600 {
		t.Fatalf("export: %+v, want 600 events and the head at 600", res)
	}
	sum, err := chain.VerifyExport(bytes.NewReader(buf.Bytes()), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if sum.Events != 600 || sum.InPlace != 600 {
		t.Fatalf("verify: %+v, want all 600 events hashed in place", sum)
	}

	// A tenant without events exports nothing and verifies as empty.
	buf.Reset()
	if res, err := f.store.Export(ctx, "nobody", &buf); err != nil || res.Events != 0 || res.Head != nil || buf.Len() != 0 {
		t.Fatalf("empty tenant: %+v, %v, %q", res, err, buf.String())
	}

	// Someone with more rights than the writer edits seq 7's payload.
	key := map[string]types.AttributeValue{
		keys.AttrTenant: &types.AttributeValueMemberS{Value: "acme"},
		keys.AttrSeq:    &types.AttributeValueMemberN{Value: "7"},
	}
	got, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	p := got.Item[keys.AttrPayload].(*types.AttributeValueMemberM)
	p.Value["i"] = &types.AttributeValueMemberN{Value: "99"}
	if _, err := f.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: got.Item}); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if _, err := f.store.Export(ctx, "acme", &buf); err != nil {
		t.Fatal(err)
	}
	_, err = chain.VerifyExport(bytes.NewReader(buf.Bytes()), "acme")
	var be *chain.BreakError
	if !errors.As(err, &be) || be.Seq != 7 || be.Reason != chain.ReasonHashMismatch {
		t.Fatalf("tampered row: got %v, want a hash mismatch at seq 7", err)
	}

	// A row that no longer decodes stops the export, named, instead of
	// leaving a gap.
	got.Item[keys.AttrOccurredAt] = &types.AttributeValueMemberN{Value: "1"}
	if _, err := f.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: got.Item}); err != nil {
		t.Fatal(err)
	}
	_, err = f.store.Export(ctx, "acme", &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "after seq "+strconv.Itoa(6)+" does not decode") {
		t.Fatalf("undecodable row: got %v", err)
	}
}

// appendAfterHeadRead is the events table as Export sees it while a writer
// appends: right after Export reads the head, more events are committed.
type appendAfterHeadRead struct {
	eventstore.DynamoDB
	once   sync.Once
	append func()
}

func (d *appendAfterHeadRead) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := d.DynamoDB.GetItem(ctx, in, o...)
	d.once.Do(d.append)
	return out, err
}

// TestExportIsOneCut: events appended after Export read the head are
// neither written nor read; the export ends at the head it wrote and
// verifies.
func TestExportIsOneCut(t *testing.T) {
	f := newFixture(t, nil)
	emitConcurrently(t, f.store, []string{"acme"}, 1, 5)
	var queried []string
	db := &appendAfterHeadRead{DynamoDB: &queryLimits{DynamoDB: f.db, asked: &queried}, append: func() {
		emitConcurrently(t, f.store, []string{"acme"}, 1, 7)
	}}
	reader, err := eventstore.New(db, eventstore.Config{Table: f.table}) // reads only: no Catalog
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	res, err := reader.Export(context.Background(), "acme", &buf)
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != 5 || res.Head.LastSeq != 5 {
		t.Fatalf("export: %+v, want the 5 events the head it read covers", res)
	}
	if _, err := chain.VerifyExport(&buf, "acme"); err != nil {
		t.Fatal(err)
	}
	if len(queried) != 1 || queried[0] != "limit 0, seq to 5" {
		t.Errorf("queries asked %q; want one query, no Limit (1-MB pages), for the seqs the cut needs", queried)
	}
	f.verify(t, "acme", 12) // the appends did happen
}

// queryLimits records the Limit and the upper seq of every Query.
type queryLimits struct {
	eventstore.DynamoDB
	asked *[]string
}

func (d *queryLimits) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	hi, _ := in.ExpressionAttributeValues[":hi"].(*types.AttributeValueMemberN)
	to := "?"
	if hi != nil {
		to = hi.Value
	}
	*d.asked = append(*d.asked, fmt.Sprintf("limit %d, seq to %s", aws.ToInt32(in.Limit), to))
	return d.DynamoDB.Query(ctx, in, o...)
}

// smallPages cuts every Query's pages to limit items, so that ranges end
// mid-page and pages end mid-range, and fails the Query of the range that
// starts at failFrom (when set), on its first page or its second.
type smallPages struct {
	eventstore.DynamoDB
	limit      int32
	failFrom   string
	failSecond bool
}

func (d *smallPages) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if lo, _ := in.ExpressionAttributeValues[":lo"].(*types.AttributeValueMemberN); lo != nil && lo.Value == d.failFrom && d.failFrom != "" {
		if !d.failSecond || in.ExclusiveStartKey != nil {
			return nil, errors.New("injected: the range's read failed")
		}
	}
	c := *in
	c.Limit = aws.Int32(d.limit)
	return d.DynamoDB.Query(ctx, &c, o...)
}

// TestExportParallelIsSequential exports one tenant with 1 to 8 readers and
// several range and page sizes against the local DynamoDB: the bytes are
// the one-reader export's every time; a range whose read fails is an error,
// never a shorter export; and a missing event is still a gap the export's
// verification names.
func TestExportParallelIsSequential(t *testing.T) {
	f := newFixture(t, nil)
	emitConcurrently(t, f.store, []string{"acme"}, 4, 100) // 400 events
	ctx := context.Background()
	var want bytes.Buffer
	if _, err := f.store.Export(ctx, "acme", &want); err != nil {
		t.Fatal(err)
	}
	if sum, err := chain.VerifyExport(bytes.NewReader(want.Bytes()), "acme"); err != nil || sum.Events != 400 {
		t.Fatalf("one reader: %+v, %v", sum, err)
	}
	for _, rs := range []int64{0, 1, 37, 400, 1000} {
		for _, limit := range []int32{0, 7} {
			db := eventstore.DynamoDB(f.db)
			if limit > 0 {
				db = &smallPages{DynamoDB: f.db, limit: limit}
			}
			reader, err := eventstore.New(db, eventstore.Config{Table: f.table})
			if err != nil {
				t.Fatal(err)
			}
			for n := 1; n <= 8; n++ {
				var got bytes.Buffer
				res, err := reader.ExportWith(ctx, "acme", &got, eventstore.ExportOptions{Parallel: n, RangeSeqs: rs})
				if err != nil {
					t.Fatalf("range %d, pages %d, %d readers: %v", rs, limit, n, err)
				}
				if res.Events != 400 || res.Reads != 400 || !bytes.Equal(got.Bytes(), want.Bytes()) {
					t.Fatalf("range %d, pages %d, %d readers: %+v; the export differs from one reader's", rs, limit, n, res)
				}
			}
		}
	}

	// A range that cannot be read, on its first page or a later one.
	for _, second := range []bool{false, true} {
		reader, err := eventstore.New(&smallPages{DynamoDB: f.db, limit: 7, failFrom: "75", failSecond: second}, eventstore.Config{Table: f.table})
		if err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= 8; n++ {
			var got bytes.Buffer
			res, err := reader.ExportWith(ctx, "acme", &got, eventstore.ExportOptions{Parallel: n, RangeSeqs: 37})
			if err == nil || !strings.Contains(err.Error(), "read seq 75 to 111") || !strings.Contains(err.Error(), "injected") {
				t.Fatalf("%d readers, failing on page 2 %v: got %+v, %v; want the range's error", n, second, res, err)
			}
			if res.Head != nil || res.Events > 74 {
				t.Fatalf("%d readers: %+v: wrote past the failed range or a head line", n, res)
			}
		}
	}

	// A gap: seq 250 is gone from the table.
	if _, err := f.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table), Key: map[string]types.AttributeValue{
		keys.AttrTenant: &types.AttributeValueMemberS{Value: "acme"},
		keys.AttrSeq:    &types.AttributeValueMemberN{Value: "250"},
	}}); err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 8; n++ {
		var got bytes.Buffer
		res, err := f.store.ExportWith(ctx, "acme", &got, eventstore.ExportOptions{Parallel: n, RangeSeqs: 37})
		if err != nil || res.Events != 399 {
			t.Fatalf("%d readers, gap: %+v, %v", n, res, err)
		}
		_, err = chain.VerifyExport(&got, "acme")
		var be *chain.BreakError
		if !errors.As(err, &be) || be.Seq != 250 || be.Reason != chain.ReasonMissingSeq {
			t.Fatalf("%d readers: verify: %v; want seq 250 missing", n, err)
		}
	}
}
