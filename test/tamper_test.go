package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestTamperOverwriteRaisesSignal: on the synthesized stack, an emitter that
// overwrites an event row with a plain PutItem (re-hashed, no condition:
// exactly what IAM cannot forbid) raises the tamper signal, through
// tamper-watch's own mapping on the events stream, while the honest head
// advances before it raise nothing. A deleted row raises it too.
func TestTamperOverwriteRaisesSignal(t *testing.T) {
	s := startStack(t, nil)
	ctx := context.Background()
	fn, mapping := s.fn[keys.FnTamperWatch], s.tamperMap

	const tenant = "acme"
	for i := range 3 {
		if _, err := s.app.Order(ctx, tenant, i); err != nil {
			t.Fatal(err)
		}
	}
	evs := s.allEvents(t, tenant)
	if len(evs) < 3 {
		t.Fatalf("%d events, want at least 3", len(evs))
	}
	// Honest history first: tamper-watch is handed the head's advances
	// (MODIFY) and the filter drops the inserts; none is a finding.
	eventually(t, 60*time.Second, "tamper-watch saw the honest head advances", func() (bool, string) {
		st, _ := s.tw.Poller(mapping)
		return st.Delivered >= 1 && st.Filtered >= int64(len(evs)), fmt.Sprintf("tamper mapping %+v", st)
	})
	if lines := s.grep(fn, "log tampered"); len(lines) != 0 {
		t.Fatalf("honest appends reported as tampering:\n%s", strings.Join(lines, "\n"))
	}

	// The overwrite: seq 1 re-written with another payload and a new hash.
	table := s.env[keys.EnvEventsTable]
	key := map[string]types.AttributeValue{
		keys.AttrTenant: &types.AttributeValueMemberS{Value: tenant},
		keys.AttrSeq:    &types.AttributeValueMemberN{Value: "1"},
	}
	out, err := s.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		t.Fatalf("event 1 of %s: %v", tenant, err)
	}
	forged := out.Item
	forged[keys.AttrPayload] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"order_id": &types.AttributeValueMemberS{Value: "forged"},
	}}
	forged[keys.AttrHash] = &types.AttributeValueMemberS{Value: strings.Repeat("ab", 32)}
	if _, err := s.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: forged}); err != nil {
		t.Fatal(err)
	}
	// And a deletion of seq 2.
	key[keys.AttrSeq] = &types.AttributeValueMemberN{Value: "2"}
	if _, err := s.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key}); err != nil {
		t.Fatal(err)
	}

	want := []struct{ change, seq string }{{"event_modified", "1"}, {"event_removed", "2"}}
	eventually(t, 60*time.Second, "tamper-watch reported the overwrite and the deletion", func() (bool, string) {
		lines := s.grep(fn, "log tampered")
		for _, w := range want {
			found := false
			for _, l := range lines {
				found = found || (strings.Contains(l, `"level":"ERROR"`) && strings.Contains(l, `"change":"`+w.change+`"`) &&
					strings.Contains(l, `"tenant":"`+tenant+`"`) && strings.Contains(l, `"seq":"`+w.seq+`"`))
			}
			if !found {
				return false, fmt.Sprintf("no ERROR line for %s of seq %s; tamper lines:\n%s", w.change, w.seq, strings.Join(lines, "\n"))
			}
		}
		return true, ""
	})
	emf := s.grep(fn, `"`+keys.MetricTamperDetected+`":1`)
	for _, w := range want {
		found := false
		for _, l := range emf {
			found = found || (strings.Contains(l, `"Change":"`+w.change+`"`) && strings.Contains(l, `"Namespace":"`+keys.MetricNamespace+`"`))
		}
		if !found {
			t.Errorf("no EMF %s line with Change %s:\n%s", keys.MetricTamperDetected, w.change, strings.Join(emf, "\n"))
		}
	}
	if lines := s.grep(fn, "log tampered"); len(lines) != len(want) {
		t.Errorf("%d tamper lines, want %d (one per change):\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
}
