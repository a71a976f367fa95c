package eventstore_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestExportVerifies exports a tenant written by concurrent emitters from
// DynamoDB Local (more events than one page), verifies the export in place,
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
