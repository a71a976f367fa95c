package eventstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestIdempotencyKey: a retried emit with the same key, from another store
// (another process) and after DynamoDB's 10-minute token window, returns the
// first emit's event and appends nothing; concurrent emits with one key in
// one group commit append one event; another key appends; the key's row is
// invisible to every read of the log.
func TestIdempotencyKey(t *testing.T) {
	td := newTwinDB(t)
	ctx := ctxFor("t1")
	a := td.store(t, td.client, nil)
	first, err := a.EmitWith(ctx, eventstore.EmitInput{Type: "order.placed", Payload: map[string]any{"n": 1}, IdempotencyKey: "order-1/placed"})
	if err != nil || first.Seq != 1 {
		t.Fatalf("first: seq %d, %v", first.Seq, err)
	}
	// Another process retries after the token window.
	td.advance(t, 11*time.Minute)
	b := td.store(t, td.client, nil)
	again, err := b.EmitWith(ctx, eventstore.EmitInput{Type: "order.placed", Payload: map[string]any{"n": 1}, IdempotencyKey: "order-1/placed"})
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || again.Seq != 1 || again.Hash != first.Hash || again.Type != "order.placed" {
		t.Errorf("retry: got %s seq %d type %s, want the first event %s seq 1", again.ID, again.Seq, again.Type, first.ID)
	}
	td.checkLog(t, "t1", 1)

	// The same key under another tenant is another key.
	other, err := b.EmitWith(ctxFor("t2"), eventstore.EmitInput{Type: "order.placed", Payload: map[string]any{}, IdempotencyKey: "order-1/placed"})
	if err != nil || other.Seq != 1 || other.ID == first.ID {
		t.Fatalf("t2: seq %d id %s, %v; want its own event at seq 1", other.Seq, other.ID, err)
	}

	// Eight concurrent callers (group commit), one key; one with another key.
	var wg sync.WaitGroup
	got := make([]envelope.Envelope, 8)
	errs := make([]error, 8)
	for i := range got {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			key := "order-2/paid"
			if i == 7 {
				key = "order-3/paid"
			}
			got[i], errs[i] = a.EmitWith(ctx, eventstore.EmitInput{Type: "order.paid", Payload: map[string]any{"order": key}, IdempotencyKey: key})
		}(i)
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if i < 7 && got[i].ID != got[0].ID {
			t.Errorf("caller %d got event %s, caller 0 %s: one key, two events", i, got[i].ID, got[0].ID)
		}
	}
	if got[7].ID == got[0].ID {
		t.Error("two keys share one event")
	}
	evs := td.checkLog(t, "t1", 3)

	// The key rows are there (negative seqs), and no read of the log sees them.
	out, err := td.client.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(td.table)})
	if err != nil {
		t.Fatal(err)
	}
	idem := 0
	for _, it := range out.Items {
		if k, _ := it[keys.AttrKind].(*types.AttributeValueMemberS); k != nil && k.Value == "idempotency" {
			idem++
			if n := it[keys.AttrSeq].(*types.AttributeValueMemberN).Value; !strings.HasPrefix(n, "-") {
				t.Errorf("idempotency row at seq %s, want a negative seq", n)
			}
		}
	}
	if idem != 4 {
		t.Errorf("got %d idempotency rows, want 4 (three keys of t1, one of t2)", idem)
	}
	if ts, _, err := a.Tenants(context.Background(), "", 0); err != nil || len(ts) != 2 {
		t.Errorf("tenants: got %v, %v; want t1 and t2", ts, err)
	}
	if len(evs) != 3 {
		t.Errorf("events: got %d, want 3", len(evs))
	}

	// A key past the limit is refused before sending.
	_, err = a.EmitWith(ctx, eventstore.EmitInput{Type: "order.paid", Payload: map[string]any{}, IdempotencyKey: strings.Repeat("k", 513)})
	if !errors.Is(err, eventstore.ErrBadIdempotencyKey) {
		t.Errorf("long key: got %v, want ErrBadIdempotencyKey", err)
	}
}

// TestIdempotencyKeyWithAmbiguousCommit: an emit with a key whose answer is
// lost and whose resend is not answered from the token (window past) is
// refused by its own key row: the store recognises its own event, success.
func TestIdempotencyKeyWithAmbiguousCommit(t *testing.T) {
	td := newTwinDB(t)
	w := &wire{DynamoDB: td.bare}
	w.on = func(n int, in *dynamodb.TransactWriteItemsInput, forward func() (*dynamodb.TransactWriteItemsOutput, error)) (*dynamodb.TransactWriteItemsOutput, error) {
		if n == 1 {
			_, _ = forward()
			return nil, lostAnswer
		}
		// Past the token window: a resend is a new request.
		cp := *in
		cp.ClientRequestToken = aws.String("forgotten")
		return td.bare.TransactWriteItems(context.Background(), &cp)
	}
	s := td.store(t, w, nil)
	e, err := s.EmitWith(ctxFor("t1"), eventstore.EmitInput{Type: "order.placed", Payload: map[string]any{}, IdempotencyKey: "k"})
	if err != nil || e.Seq != 1 {
		t.Fatalf("got seq %d, %v; want success at seq 1", e.Seq, err)
	}
	if evs := td.checkLog(t, "t1", 1); evs[0].ID != e.ID {
		t.Errorf("log holds %s, Emit returned %s", evs[0].ID, e.ID)
	}
}

// TestIdempotencyKeyCost measures the WCU an emit consumes with and without
// a key (ReturnConsumedCapacity on our own DynamoDB, which bills
// transactional writes like AWS: 2 WCU per KB per item). The numbers are in
// idempotency.go.
func TestIdempotencyKeyCost(t *testing.T) {
	const n = 20
	payload := map[string]any{"order_id": "o-123456", "amount": 4250, "currency": "EUR"}
	perEmit := map[bool]float64{}
	for _, withKey := range []bool{false, true} {
		td := newTwinDB(t)
		s := td.store(t, td.client, func(c *eventstore.Config) { c.Batching = eventstore.BatchNone })
		for i := 0; i < n; i++ {
			in := eventstore.EmitInput{Type: "order.placed", Payload: payload}
			if withKey {
				in.IdempotencyKey = "order-" + strings.Repeat("x", 20) + string(rune('a'+i))
			}
			if _, err := s.EmitWith(ctxFor("t1"), in); err != nil {
				t.Fatal(err)
			}
		}
		perEmit[withKey] = s.Stats().WCU / n
		t.Logf("idempotency key %v: %.1f WCU per emit (%d lone emits)", withKey, perEmit[withKey], n)
	}
	if perEmit[true] != perEmit[false]+2 {
		t.Errorf("with a key: %.1f WCU per emit, without: %.1f; want exactly 2 more (one more item under 1 KB)", perEmit[true], perEmit[false])
	}
	// Under group commit the head is shared by the batch; the key row is not.
	for _, withKey := range []bool{false, true} {
		td := newTwinDB(t)
		s := td.store(t, td.client, nil)
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < 10; i++ {
					in := eventstore.EmitInput{Type: "order.placed", Payload: payload}
					if withKey {
						in.IdempotencyKey = "order-" + string(rune('a'+w)) + string(rune('a'+i))
					}
					if _, err := s.EmitWith(ctxFor("t1"), in); err != nil {
						t.Error(err)
						return
					}
				}
			}(w)
		}
		wg.Wait()
		st := s.Stats()
		t.Logf("group commit, idempotency key %v: %.2f WCU per event (%d events in %d transactions)", withKey, st.WCU/float64(st.Events), st.Events, st.Commits)
	}
}

// TestIdempotencyKeyMismatch: a key reused with another type, schema
// version, payload or extra writes is an *IdempotencyKeyMismatchError that
// names the key and what differs (the field of the payload, not its value),
// and nothing is written: no event, not the caller's write. The same content
// still answers with the first event. A key recorded before the row kept a
// digest of the writes is compared on type and payload only.
func TestIdempotencyKeyMismatch(t *testing.T) {
	f := newFixture(t, nil)
	ctx := ctxFor("acme")
	put := func(id, status string) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(f.orders), Item: map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: id}, "status": &types.AttributeValueMemberS{Value: status}}}}
	}
	in := eventstore.EmitInput{Type: "order.placed", Payload: map[string]any{"order_id": "o-1", "total_cents": 1250},
		Extra: []types.TransactWriteItem{put("o-1", "placed")}, IdempotencyKey: "place/o-1"}
	first, err := f.store.EmitWith(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*eventstore.EmitInput)
		want string
	}{
		{"type", func(in *eventstore.EmitInput) { in.Type = "order.paid" }, "type (first order.placed, now order.paid)"},
		{"payload", func(in *eventstore.EmitInput) {
			in.Payload = map[string]any{"order_id": "o-1", "total_cents": 990}
		}, "payload (at payload.total_cents)"},
		{"payload member", func(in *eventstore.EmitInput) {
			in.Payload = map[string]any{"order_id": "o-1", "total_cents": 1250, "currency": "EUR"}
		}, "payload (at payload.currency)"},
		{"write", func(in *eventstore.EmitInput) { in.Extra = []types.TransactWriteItem{put("o-1", "paid")} }, "extra writes (as many, other content)"},
		{"writes", func(in *eventstore.EmitInput) { in.Extra = nil }, "extra writes (first 1, now 0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			again := in
			tc.edit(&again)
			got, err := f.store.EmitWith(ctx, again)
			var mm *eventstore.IdempotencyKeyMismatchError
			if !errors.Is(err, eventstore.ErrIdempotencyKeyMismatch) || !errors.As(err, &mm) {
				t.Fatalf("got %+v, %v; want an IdempotencyKeyMismatchError", got, err)
			}
			if mm.Key != "place/o-1" || mm.EventID != first.ID || mm.Seq != 1 || len(mm.Differs) != 1 || mm.Differs[0] != tc.want {
				t.Errorf("got %+v; want key place/o-1, event %s at seq 1, differing in %q", mm, first.ID, tc.want)
			}
			for _, w := range []string{`"place/o-1"`, tc.want, "nothing was written"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "990") {
				t.Errorf("message %q shows a payload value", err)
			}
			if got.ID != "" {
				t.Errorf("got event %s with the error, want none", got.ID)
			}
		})
	}
	f.verify(t, "acme", 1)
	item, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.orders),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "o-1"}}, ConsistentRead: aws.Bool(true)})
	if err != nil || item.Item["status"].(*types.AttributeValueMemberS).Value != "placed" {
		t.Fatalf("the order: %v, %v; want the first emit's write only", item.Item, err)
	}

	// The same content, from another store (another process): the first event.
	other, err := eventstore.New(f.db, eventstore.Config{Table: f.table, Catalog: catalog})
	if err != nil {
		t.Fatal(err)
	}
	same := in
	same.Payload = map[string]any{"total_cents": 1250, "order_id": "o-1"} // member order does not matter
	same.Extra = []types.TransactWriteItem{put("o-1", "placed")}
	if again, err := other.EmitWith(ctx, same); err != nil || again.ID != first.ID {
		t.Fatalf("retry with the same content: got %s, %v; want the first event %s", again.ID, err, first.ID)
	}

	// A key recorded before its row kept the writes' digest: writes are not
	// compared (there is nothing to compare them with); type and payload are.
	row := scanIdemRows(t, f.db, f.table)
	if len(row) != 1 {
		t.Fatalf("got %d idempotency rows, want 1", len(row))
	}
	if _, err := f.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(f.table),
		Key:              map[string]types.AttributeValue{keys.AttrTenant: row[0][keys.AttrTenant], keys.AttrSeq: row[0][keys.AttrSeq]},
		UpdateExpression: aws.String("REMOVE writes, writes_digest")}); err != nil {
		t.Fatal(err)
	}
	old := in
	old.Extra = nil
	if again, err := f.store.EmitWith(ctx, old); err != nil || again.ID != first.ID {
		t.Errorf("old key, other writes: got %s, %v; want the first event, as before digests were kept", again.ID, err)
	}
	old.Payload = map[string]any{"order_id": "o-9", "total_cents": 1250}
	if _, err := f.store.EmitWith(ctx, old); !errors.Is(err, eventstore.ErrIdempotencyKeyMismatch) || !strings.Contains(err.Error(), "payload.order_id") {
		t.Errorf("old key, other payload: got %v, want a mismatch at payload.order_id", err)
	}
	f.verify(t, "acme", 1)
}

func scanIdemRows(t *testing.T, db *dynamodb.Client, table string) []map[string]types.AttributeValue {
	t.Helper()
	out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]types.AttributeValue
	for _, it := range out.Items {
		if k, _ := it[keys.AttrKind].(*types.AttributeValueMemberS); k != nil && k.Value == keys.KindIdempotency {
			rows = append(rows, it)
		}
	}
	return rows
}
