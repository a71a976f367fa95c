package eventstore_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
)

// TestReaderWithoutCatalog: a store opened without a Catalog reads the log
// another store wrote (Head, Events, AllEvents, Tenants, Export) and its Emit
// fails with ErrNoCatalog, naming what is missing, and writes nothing: no
// event, no head, no idempotency row, no caller write.
func TestReaderWithoutCatalog(t *testing.T) {
	f := newFixture(t, nil)
	emitConcurrently(t, f.store, []string{"acme", "globex"}, 2, 3)
	ctx := context.Background()

	reader, err := eventstore.New(f.db, eventstore.Config{Table: f.table})
	if err != nil {
		t.Fatalf("New without a Catalog: %v", err)
	}
	head, err := reader.Head(ctx, "acme")
	if err != nil || head == nil || head.LastSeq != 6 {
		t.Fatalf("Head: got %+v, %v; want last_seq 6", head, err)
	}
	evs, err := reader.AllEvents(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	written, err := f.store.AllEvents(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(written, evs); diff != "" {
		t.Errorf("AllEvents differs from the writer's (-writer +reader):\n%s", diff)
	}
	if err := chain.Verify("acme", evs, head); err != nil {
		t.Error(err)
	}
	p, err := reader.Events(ctx, "acme", 4, 10)
	if err != nil || len(p.Events) != 2 || p.Events[0].Seq != 5 {
		t.Errorf("Events after seq 4: got %d events (first %+v), %v; want seq 5 and 6", len(p.Events), p.Events, err)
	}
	tenants, _, err := reader.Tenants(ctx, "", 0)
	slices.Sort(tenants)
	if err != nil || !slices.Equal(tenants, []string{"acme", "globex"}) {
		t.Errorf("Tenants: got %v, %v; want acme and globex", tenants, err)
	}
	var buf bytes.Buffer
	if res, err := reader.Export(ctx, "globex", &buf); err != nil || res.Events != 6 {
		t.Fatalf("Export: got %+v, %v; want 6 events", res, err)
	}
	if _, err := chain.VerifyExport(&buf, "globex"); err != nil {
		t.Errorf("the reader's export: %v", err)
	}

	before := count(t, f.db, f.table)
	put := types.TransactWriteItem{Put: &types.Put{TableName: aws.String(f.orders),
		Item: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "o-1"}}}}
	const want = "emit order.placed: this store was opened without a Catalog: it reads the log only; pass eventstore.Config.Catalog to emit"
	for name, emit := range map[string]func() error{
		"Emit": func() error {
			_, err := reader.Emit(ctxFor("acme"), "order.placed", map[string]any{"i": 1}, put)
			return err
		},
		"EmitWith an idempotency key": func() error {
			_, err := reader.EmitWith(ctxFor("acme"), eventstore.EmitInput{Type: "order.placed", Payload: map[string]any{"i": 1}, Extra: []types.TransactWriteItem{put}, IdempotencyKey: "k-1"})
			return err
		},
	} {
		err := emit()
		if !errors.Is(err, eventstore.ErrNoCatalog) || err.Error() != want {
			t.Errorf("%s: got %v, want %q", name, err, want)
		}
	}
	if after := count(t, f.db, f.table); after != before {
		t.Errorf("events table: %d items after the refused emits, want %d", after, before)
	}
	if n := count(t, f.db, f.orders); n != 0 {
		t.Errorf("orders table: %d items, want none (the caller's write must not happen)", n)
	}
	if st := reader.Stats(); st.Attempts != 0 {
		t.Errorf("reader stats: %+v, want no TransactWriteItems call", st)
	}
}

// count is the number of items in table, read consistently.
func count(t *testing.T, db *dynamodb.Client, table string) int32 {
	t.Helper()
	var n int32
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), Select: types.SelectCount, ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n += out.Count
	}
	return n
}
