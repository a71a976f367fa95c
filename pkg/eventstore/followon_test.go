package eventstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// TestFollowOnExactlyOnce: a handler's follow-on emit commits with its own
// state write, caused by the triggering event and in its tenant whatever the
// context says; the same handler run again (a crash before its claim was
// completed, or a retry) emits nothing new and gets the first event back;
// ranks count per run and per type; a re-run that emits other content is a
// permanent IdempotencyKeyMismatchError with nothing written; an unbound
// context says how to bind one.
func TestFollowOnExactlyOnce(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	placed, err := f.store.Emit(tenancy.WithCorrelation(ctxFor("t1"), "corr-1"), "order.placed", map[string]any{"order": "o-1"})
	if err != nil {
		t.Fatal(err)
	}
	put := func(status string) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(f.orders), Item: map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: "o-1"}, "status": &types.AttributeValueMemberS{Value: status}}}}
	}
	// One run of subscription billing.charge on the placed event. The
	// handler's context is bound to another tenant on purpose: the
	// emitter's own binding wins.
	run := func(status string) ([]envelope.Envelope, error) {
		hctx := f.store.BindFollowOn(ctxFor("t2"), placed, "billing.charge")
		em, err := eventstore.EmitterFrom(hctx)
		if err != nil {
			t.Fatal(err)
		}
		a, err := em.Emit(hctx, "order.paid", map[string]any{"order": "o-1", "n": 1}, put(status))
		if err != nil {
			return nil, err
		}
		b, err := em.Emit(hctx, "order.paid", map[string]any{"order": "o-1", "n": 2})
		if err != nil {
			return nil, err
		}
		return []envelope.Envelope{a, b}, nil
	}
	first, err := run("paid")
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range first {
		if e.TenantID != "t1" || e.CausationID != placed.ID || e.CorrelationID != "corr-1" || e.Seq != int64(2+i) {
			t.Errorf("follow-on %d: tenant %q causation %q correlation %q seq %d; want t1, %s, corr-1, %d",
				i, e.TenantID, e.CausationID, e.CorrelationID, e.Seq, placed.ID, 2+i)
		}
	}
	got, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.orders), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "o-1"}}})
	if err != nil || got.Item == nil {
		t.Fatalf("the handler's state write: %v, %v; want it committed with the follow-on", got.Item, err)
	}

	// The re-run: the same emits, the same events, nothing appended.
	again, err := run("paid")
	if err != nil {
		t.Fatal(err)
	}
	for i := range again {
		if again[i].ID != first[i].ID || again[i].Seq != first[i].Seq {
			t.Errorf("re-run emit %d: event %s seq %d, want the first run's %s seq %d", i, again[i].ID, again[i].Seq, first[i].ID, first[i].Seq)
		}
	}
	f.verify(t, "t1", 3)
	if _, err := f.store.Emit(ctxFor("t2"), "order.placed", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	f.verify(t, "t2", 1) // nothing landed in the tenant the handler's context named

	// A re-run that writes something else: loud, permanent, nothing written.
	_, err = run("refunded")
	var mm *eventstore.IdempotencyKeyMismatchError
	if !errors.As(err, &mm) || !errors.Is(err, eventstore.ErrIdempotencyKeyMismatch) {
		t.Fatalf("re-run with other writes: %v, want an IdempotencyKeyMismatchError", err)
	}
	if want := eventstore.FollowOnKey(placed.ID, "billing.charge", "order.paid/1"); mm.Key != want {
		t.Errorf("mismatch key %q, want %q", mm.Key, want)
	}
	var perm interface{ Permanent() bool }
	if !errors.As(err, &perm) || !perm.Permanent() {
		t.Errorf("mismatch %v is not permanent: the lane would retry it", err)
	}
	f.verify(t, "t1", 3)

	// An explicit name; a bad one names the field.
	hctx := f.store.BindFollowOn(ctx, placed, "billing.charge")
	em, _ := eventstore.EmitterFrom(hctx)
	named, err := em.EmitWith(hctx, eventstore.EmitInput{Type: "order.paid", Payload: map[string]any{"n": 3}, IdempotencyKey: "refund"})
	if err != nil || named.Seq != 4 {
		t.Fatalf("named emit: seq %d, %v; want seq 4", named.Seq, err)
	}
	_, err = em.EmitWith(hctx, eventstore.EmitInput{Type: "order.paid", Payload: map[string]any{}, IdempotencyKey: "no spaces"})
	var fe *envelope.FieldError
	if !errors.As(err, &fe) || fe.Field != "IdempotencyKey" {
		t.Errorf("bad name: %v, want a FieldError naming IdempotencyKey", err)
	}
	f.verify(t, "t1", 4)

	if _, err := eventstore.EmitterFrom(ctx); !errors.Is(err, eventstore.ErrNoEmitter) || !strings.Contains(err.Error(), "DURABLE") {
		t.Errorf("unbound: %v, want ErrNoEmitter saying where emitters come from", err)
	}
}
