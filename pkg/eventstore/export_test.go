package eventstore_test

import (
	"bytes"
	"context"
	"errors"
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
	var queried []int32
	db := &appendAfterHeadRead{DynamoDB: &queryLimits{DynamoDB: f.db, limits: &queried}, append: func() {
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
	if len(queried) != 1 || queried[0] != 5 {
		t.Errorf("queries asked for %v items; want one query for the 5 the cut needs", queried)
	}
	f.verify(t, "acme", 12) // the appends did happen
}

// queryLimits records the Limit of every Query.
type queryLimits struct {
	eventstore.DynamoDB
	limits *[]int32
}

func (d *queryLimits) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	*d.limits = append(*d.limits, aws.ToInt32(in.Limit))
	return d.DynamoDB.Query(ctx, in, o...)
}
