package eventstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	fwcatalog "github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
)

type notedV1 struct {
	OrderID string   `json:"order_id"`
	Note    string   `json:"note"`
	Tags    []string `json:"tags,omitempty"`
}

// TestEmitRefusesWhatTheVerifierRefuses: a payload with a repeated member,
// text that is not valid UTF-8 or a lone surrogate escape is refused through
// the application's catalog with a *envelope.FieldError naming the field,
// before any transaction is sent: no event, no head, no caller write. Stored
// as encoding/json would repair it (last member wins, U+FFFD), the event
// would differ from what its producer sent while its chain still verified.
func TestEmitRefusesWhatTheVerifierRefuses(t *testing.T) {
	cat, err := fwcatalog.New(fwcatalog.Spec{Name: "order", Emits: []fwcatalog.EventType{{
		Name: "order.noted", Versions: []fwcatalog.Version{fwcatalog.V[notedV1](1)}}}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *eventstore.Config) { c.Catalog = cat })
	ctx := ctxFor("t1")
	extra := types.TransactWriteItem{Put: &types.Put{TableName: aws.String(f.orders),
		Item: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "o-1"}}}}
	for _, tc := range []struct {
		name    string
		payload any
		field   string
	}{
		{"repeated member", json.RawMessage(`{"order_id":"o-1","note":"a","note":"b"}`), "payload.note"},
		{"invalid UTF-8 bytes", json.RawMessage("{\"order_id\":\"o-1\",\"note\":\"caf\xe9\"}"), "payload.note"},
		{"lone surrogate", json.RawMessage(`{"order_id":"o-1","note":"x","tags":["ok","\ud800"]}`), "payload.tags[1]"},
		{"invalid UTF-8 in a Go struct", notedV1{OrderID: "o-1", Note: "caf\xe9"}, "payload.note"},
		{"invalid UTF-8 in a Go map", map[string]any{"order_id": "o-\xff", "note": "x"}, "payload.order_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.store.Emit(ctx, "order.noted", tc.payload, extra)
			var fe *envelope.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("got %v, want a *envelope.FieldError on %s", err, tc.field)
			}
			if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), "verifier refuses") {
				t.Errorf("message %q does not name %s and why", err, tc.field)
			}
		})
	}
	if st := f.store.Stats(); st.Attempts != 0 {
		t.Errorf("%d transactions were sent for refused emits", st.Attempts)
	}
	for _, table := range []string{f.table, f.orders} {
		out, err := f.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		if err != nil || len(out.Items) != 0 {
			t.Errorf("table %s has %d items after refused emits (err %v), want none", table, len(out.Items), err)
		}
	}
	// The same payload, well formed, is appended and verifies.
	if _, err := f.store.Emit(ctx, "order.noted", json.RawMessage(`{"order_id":"o-1","note":"café \ud83d\ude00"}`), extra); err != nil {
		t.Fatal(err)
	}
	f.verify(t, "t1", 1)
}
