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
	// Another process retries, with other content, after the token window.
	td.advance(t, 11*time.Minute)
	b := td.store(t, td.client, nil)
	again, err := b.EmitWith(ctx, eventstore.EmitInput{Type: "order.paid", Payload: map[string]any{"n": 2}, IdempotencyKey: "order-1/placed"})
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
			got[i], errs[i] = a.EmitWith(ctx, eventstore.EmitInput{Type: "order.paid", Payload: map[string]any{"i": i}, IdempotencyKey: key})
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
