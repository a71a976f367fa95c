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

// TestTamperOfLogRaisesNotaryFinding: on the synthesized stack, an emitter
// that overwrites an event row with a plain PutItem (re-hashed, no
// condition: exactly what IAM cannot forbid) or deletes one raises a notary
// finding (ERROR line and EMF NotaryFinding), through the notary's mapping on
// the events stream, while the honest appends before it raise nothing.
// tamper-watch no longer reads the events stream (the stream's two readers
// are the Pipe and the notary) and says nothing about the log.
func TestTamperOfLogRaisesNotaryFinding(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, nil)
	ctx := context.Background()
	fn, mapping := s.fn[keys.FnNotary], s.notaryMap

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
	// Honest history first: the notary is handed every insert and head
	// advance (its mapping has no filter); none is a finding.
	eventually(t, 60*time.Second, "the notary saw the honest appends", func() (bool, string) {
		st, _ := s.tw.Poller(mapping)
		return st.Delivered >= int64(len(evs)), fmt.Sprintf("notary mapping %+v", st)
	})
	if lines := s.grep(fn, "notary finding"); len(lines) != 0 {
		t.Fatalf("honest appends reported as findings:\n%s", strings.Join(lines, "\n"))
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

	// tamper-watch's event_modified is the notary's rewrite, its
	// event_removed the notary's removed.
	want := []struct{ finding, seq string }{{"rewrite", "1"}, {"removed", "2"}}
	eventually(t, 60*time.Second, "the notary reported the overwrite and the deletion", func() (bool, string) {
		lines := s.grep(fn, "notary finding")
		for _, w := range want {
			found := false
			for _, l := range lines {
				found = found || (strings.Contains(l, `"level":"ERROR"`) && strings.Contains(l, `"finding":"`+w.finding+`"`) &&
					strings.Contains(l, `"chain":"`+tenant+`"`) && strings.Contains(l, `"seq":`+w.seq+`,`))
			}
			if !found {
				return false, fmt.Sprintf("no ERROR line for %s of seq %s; notary lines:\n%s", w.finding, w.seq, strings.Join(lines, "\n"))
			}
		}
		return true, ""
	})
	emf := s.grep(fn, `"`+keys.MetricNotaryFinding+`":1`)
	for _, w := range want {
		found := false
		for _, l := range emf {
			found = found || (strings.Contains(l, `"Finding":"`+w.finding+`"`) && strings.Contains(l, `"Namespace":"`+keys.MetricNamespace+`"`))
		}
		if !found {
			t.Errorf("no EMF %s line with Finding %s:\n%s", keys.MetricNotaryFinding, w.finding, strings.Join(emf, "\n"))
		}
	}
	if lines := s.grep(s.fn[keys.FnTamperWatch], "log tampered"); len(lines) != 0 {
		t.Errorf("tamper-watch reported changes to the log, which it no longer reads:\n%s", strings.Join(lines, "\n"))
	}
}

// TestStateDeletesRaiseSignal: on the synthesized stack, deleting a
// delivered event's claim item and a delivery watermark from the state
// table (what a hand-run cleanup or a point-in-time restore does, and what
// made dlq-repair send an email again) raises the tamper signal, through
// tamper-watch's mapping on the state table's stream; the deliveries that
// wrote them raise nothing.
func TestStateDeletesRaiseSignal(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, nil)
	ctx := context.Background()
	fn, state := s.fn[keys.FnTamperWatch], s.env[keys.EnvStateTable]
	const tenant = "acme"
	if _, err := s.app.Order(ctx, tenant, 0); err != nil {
		t.Fatal(err)
	}
	var claim, watermark map[string]types.AttributeValue
	eventually(t, 90*time.Second, "the order was delivered: a claim item and a watermark in the state table", func() (bool, string) {
		out, err := s.ddb.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(state), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return false, err.Error()
		}
		var pks []string
		for _, it := range out.Items {
			pk := it[keys.AttrPK].(*types.AttributeValueMemberS).Value
			pks = append(pks, pk)
			key := map[string]types.AttributeValue{keys.AttrPK: it[keys.AttrPK], keys.AttrSK: it[keys.AttrSK]}
			switch {
			case strings.HasPrefix(pk, keys.StateEventClaimPrefix) && claim == nil:
				claim = key
			case pk == keys.StateWatermarkPrefix+tenant && watermark == nil:
				watermark = key
			}
		}
		return claim != nil && watermark != nil, fmt.Sprintf("state rows %v", pks)
	})
	if lines := s.grep(fn, "log tampered"); len(lines) != 0 {
		t.Fatalf("honest deliveries reported as tampering:\n%s", strings.Join(lines, "\n"))
	}
	for _, k := range []map[string]types.AttributeValue{claim, watermark} {
		if _, err := s.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(state), Key: k}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 60*time.Second, "tamper-watch reported both deletes", func() (bool, string) {
		lines := s.grep(fn, "log tampered")
		var claimSeen, watermarkSeen bool
		for _, l := range lines {
			claimSeen = claimSeen || (strings.Contains(l, `"level":"ERROR"`) && strings.Contains(l, `"change":"claim_removed"`) && strings.Contains(l, `"tenant":"`+tenant+`"`))
			watermarkSeen = watermarkSeen || (strings.Contains(l, `"level":"ERROR"`) && strings.Contains(l, `"change":"watermark_removed"`) && strings.Contains(l, `"tenant":"`+tenant+`"`))
		}
		return claimSeen && watermarkSeen, fmt.Sprintf("tamper lines:\n%s", strings.Join(lines, "\n"))
	})
	emf := strings.Join(s.grep(fn, `"`+keys.MetricTamperDetected+`":1`), "\n")
	for _, c := range []string{"claim_removed", "watermark_removed"} {
		if !strings.Contains(emf, `"Change":"`+c+`"`) {
			t.Errorf("no EMF %s line with Change %s:\n%s", keys.MetricTamperDetected, c, emf)
		}
	}
}
