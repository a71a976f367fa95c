package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/restore"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// TestStateRestoreSendsNoEmailTwice is the runbook "restoring the state
// table to a point in time" on the synthesized stack: acme's orders are
// delivered (one email each); a copy of the state table is taken (the
// restore point); globex's orders are delivered after it. Then every claim,
// effect record and watermark is deleted from the live state table (what
// pointing the stack at an older restore, or an attacker, does): reconcile
// reports acme's events unsettled, which dlq-repair would deliver again.
// restore-state from the copy brings acme's rows back (a dry run first,
// which writes nothing), reconcile reports acme settled, and dlq-repair
// sends none of acme's emails again. globex's rows were written after the
// restore point, so no copy holds them: dlq-repair sends each of its emails
// a second time, the limit the runbook names (and the proof that this test
// sees a duplicate when there is one).
func TestStateRestoreSendsNoEmailTwice(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, nil)
	ctx := context.Background()
	state := s.env[keys.EnvStateTable]

	acme := pastOrders(t, s, "acme", 3)
	s.waitDelivered(t, acme)
	settled := func(tenant string) {
		t.Helper()
		eventually(t, 60*time.Second, tenant+"'s watermark at its head", func() (bool, string) {
			last, sd := s.emailAudit(t, tenant)
			return sd.Watermark == last && sd.Unsettled == 0, fmt.Sprintf("last_seq %d, %+v", last, sd)
		})
	}
	settled("acme")
	s.checkEmailsOnce(t, acme)

	// The restore point: a copy of the state table as it is now.
	copyTable := aws.ToString(localaws.CreateTable(t, s.ddb, delivery.StateTableSchema(localaws.UniqueName(t, "state-restored"))).TableName)
	rows := scanAll(t, s.ddb, state)
	for _, it := range rows {
		if _, err := s.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(copyTable), Item: it}); err != nil {
			t.Fatal(err)
		}
	}

	globex := pastOrders(t, s, "globex", 2)
	s.waitDelivered(t, globex)
	settled("globex")

	// The damage: claims, effect records and watermarks deleted.
	deleted := map[restore.Kind]int{}
	for _, it := range scanAll(t, s.ddb, state) {
		pk := it[keys.AttrPK].(*types.AttributeValueMemberS).Value
		k := restore.KindOf(pk)
		if k != restore.Claims && k != restore.Effects && k != restore.Watermarks {
			continue
		}
		if _, err := s.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(state),
			Key: map[string]types.AttributeValue{keys.AttrPK: it[keys.AttrPK], keys.AttrSK: it[keys.AttrSK]}}); err != nil {
			t.Fatal(err)
		}
		deleted[k]++
	}
	if deleted[restore.Claims] < len(acme)+len(globex) || deleted[restore.Effects] < len(acme)+len(globex) || deleted[restore.Watermarks] < 2 {
		t.Fatalf("deleted %v: want a claim and an email effect record per event and both tenants' watermarks", deleted)
	}
	if _, sd := s.emailAudit(t, "acme"); sd.Unsettled != int64(len(acme)) {
		t.Fatalf("reconcile acme after the deletes: %+v, want its %d events unsettled (what dlq-repair redelivers)", sd, len(acme))
	}

	// The dry run writes nothing.
	code, out, errOut := s.cli2("restore-state", "-from", copyTable, "-state-table", state, "-json")
	var dry restore.Report
	if err := json.Unmarshal([]byte(out), &dry); code != 0 || err != nil {
		t.Fatalf("restore-state (dry run): exit %d, %v\nstdout: %s\nstderr: %s", code, err, out, errOut)
	}
	if dry.Applied || dry.Kinds[restore.Claims].Copied < len(acme) || !strings.Contains(errOut, "nothing written") {
		t.Fatalf("dry run: %+v\nstderr: %s; want acme's claims counted, nothing applied", dry, errOut)
	}
	if _, sd := s.emailAudit(t, "acme"); sd.Watermark != 0 {
		t.Fatalf("the dry run wrote acme's watermark: %+v", sd)
	}

	code, out, errOut = s.cli2("restore-state", "-from", copyTable, "-state-table", state, "-yes", "-json")
	var rep restore.Report
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("restore-state -yes: exit %d, %v\nstdout: %s\nstderr: %s", code, err, out, errOut)
	}
	t.Logf("restore-state: %s", out)
	for _, k := range []restore.Kind{restore.Claims, restore.Effects} {
		if c := rep.Kinds[k]; c.Copied < len(acme) || c.Failed != 0 {
			t.Errorf("restore-state %s: %+v, want at least acme's %d copied", k, c, len(acme))
		}
	}
	if c := rep.Kinds[restore.Watermarks]; c.Copied < 1 {
		t.Errorf("restore-state watermarks: %+v, want acme's copied", c)
	}
	for _, e := range acme {
		if c, ok := s.claim(e.ID, emailSub); !ok || c.Status != delivery.StatusCompleted {
			t.Errorf("acme seq %d after restore-state: claim %q (found %v), want completed", e.Seq, c.Status, ok)
		}
	}
	if last, sd := s.emailAudit(t, "acme"); sd.Watermark != last || sd.Unsettled != 0 {
		t.Errorf("reconcile acme after restore-state: %+v, want settled through its head %d", sd, last)
	}

	repaired, repOut := s.repair()
	t.Logf("dlq-repair: %s", repOut)
	// globex's rows were written after the restore point: redelivered.
	eventually(t, 30*time.Second, "globex's emails sent again", func() (bool, string) {
		per := s.emailsSent(t)
		for _, e := range globex {
			if per[emailKey(e)] < 2 {
				return false, fmt.Sprintf("globex seq %d: %d emails", e.Seq, per[emailKey(e)])
			}
		}
		return true, ""
	})
	per := s.emailsSent(t)
	for _, e := range acme {
		if n := per[emailKey(e)]; n != 1 {
			t.Errorf("acme seq %d: %d emails sent, want exactly 1 (its state was restored)", e.Seq, n)
		}
	}
	for _, e := range globex {
		if n := per[emailKey(e)]; n != 2 {
			t.Errorf("globex seq %d: %d emails sent, want 2 (its state postdates the restore point)", e.Seq, n)
		}
	}
	if src := repaired.Sources["unsettled"]; src.Fixed < 1 {
		t.Errorf("dlq-repair's unsettled source: %+v, want globex fixed", src)
	}
}

// TestStateRestoreMergesAPartialClaim: the damage is not a whole claim item
// but one subscription's entry in it (the item stays, with its tenant, type
// and seq): the email subscription's entry is removed from each of acme's
// claim items. restore-state must merge the entry back into the live item
// (a dry run counts it and writes nothing); dlq-repair then sends none of
// acme's emails again. So that the claim entry is the only thing stopping
// the redelivery, the copy holds no email effect record and no watermark of
// acme (a copy taken before reconcile moved the watermark, of a handler
// whose side effect is not behind pkg/effect): without the merge, dlq-repair
// sends each of acme's emails a second time.
func TestStateRestoreMergesAPartialClaim(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, nil)
	ctx := context.Background()
	state := s.env[keys.EnvStateTable]

	acme := pastOrders(t, s, "acme", 3)
	s.waitDelivered(t, acme)
	eventually(t, 60*time.Second, "acme's watermark at its head", func() (bool, string) {
		last, sd := s.emailAudit(t, "acme")
		return sd.Watermark == last && sd.Unsettled == 0, fmt.Sprintf("last_seq %d, %+v", last, sd)
	})
	s.checkEmailsOnce(t, acme)
	ids := map[string]bool{}
	for _, e := range acme {
		ids[e.ID] = true
	}
	ofAcme := func(it map[string]types.AttributeValue) (restore.Kind, bool) {
		pk := it[keys.AttrPK].(*types.AttributeValueMemberS).Value
		k := restore.KindOf(pk)
		switch k {
		case restore.Effects:
			id, rest, _ := strings.Cut(strings.TrimPrefix(pk, keys.StateEffectPrefix), ":")
			return k, ids[id] && strings.HasPrefix(rest, emailSub+":")
		case restore.Watermarks:
			return k, pk == keys.StateWatermarkPrefix+"acme" && it[keys.AttrSK].(*types.AttributeValueMemberS).Value == emailSub
		case restore.Claims:
			return k, ids[strings.TrimPrefix(pk, keys.StateEventClaimPrefix)]
		}
		return k, false
	}
	del := func(table string, it map[string]types.AttributeValue) {
		t.Helper()
		if _, err := s.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{keys.AttrPK: it[keys.AttrPK], keys.AttrSK: it[keys.AttrSK]}}); err != nil {
			t.Fatal(err)
		}
	}

	// The restore point, without acme's email effect records and watermark.
	copyTable := aws.ToString(localaws.CreateTable(t, s.ddb, delivery.StateTableSchema(localaws.UniqueName(t, "state-restored"))).TableName)
	for _, it := range scanAll(t, s.ddb, state) {
		if k, mine := ofAcme(it); mine && k != restore.Claims {
			continue
		}
		if _, err := s.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(copyTable), Item: it}); err != nil {
			t.Fatal(err)
		}
	}

	// The damage: the email entry out of each of acme's claim items, its
	// effect records and watermark deleted.
	removed := 0
	for _, it := range scanAll(t, s.ddb, state) {
		k, mine := ofAcme(it)
		switch {
		case !mine:
		case k == restore.Claims:
			if _, ok := it[keys.AttrSubClaimPrefix+emailSub]; !ok {
				t.Fatalf("claim item %v has no %s entry", it[keys.AttrPK], emailSub)
			}
			if _, err := s.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(state),
				Key:                      map[string]types.AttributeValue{keys.AttrPK: it[keys.AttrPK], keys.AttrSK: it[keys.AttrSK]},
				UpdateExpression:         aws.String("REMOVE #e"),
				ExpressionAttributeNames: map[string]string{"#e": keys.AttrSubClaimPrefix + emailSub}}); err != nil {
				t.Fatal(err)
			}
			removed++
		default:
			del(state, it)
		}
	}
	if removed != len(acme) {
		t.Fatalf("removed the email entry from %d claim items, want %d (one per acme event)", removed, len(acme))
	}
	for _, e := range acme {
		if _, ok := s.claim(e.ID, emailSub); ok {
			t.Fatalf("acme seq %d: the email claim is still there after the damage", e.Seq)
		}
		out, err := s.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(state), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{keys.AttrPK: &types.AttributeValueMemberS{Value: keys.StateEventClaimPrefix + e.ID},
				keys.AttrSK: &types.AttributeValueMemberS{Value: keys.StateEventClaimSK}}})
		if err != nil || out.Item == nil {
			t.Fatalf("acme seq %d: the claim item is gone (%v): the damage must leave the item, only its entry removed", e.Seq, err)
		}
	}
	if _, sd := s.emailAudit(t, "acme"); sd.Unsettled != int64(len(acme)) {
		t.Fatalf("reconcile acme after the damage: %+v, want its %d events unsettled (what dlq-repair redelivers)", sd, len(acme))
	}

	code, out, errOut := s.cli2("restore-state", "-from", copyTable, "-state-table", state, "-json")
	var dry restore.Report
	if err := json.Unmarshal([]byte(out), &dry); code != 0 || err != nil {
		t.Fatalf("restore-state (dry run): exit %d, %v\nstdout: %s\nstderr: %s", code, err, out, errOut)
	}
	if c := dry.Kinds[restore.Claims]; dry.Applied || c.Merged != len(acme) || c.Entries != len(acme) || c.Copied != 0 || !strings.Contains(errOut, "nothing written") {
		t.Fatalf("dry run: claims %+v\nstderr: %s; want acme's %d claim items to merge, nothing applied", c, errOut, len(acme))
	}
	if _, ok := s.claim(acme[0].ID, emailSub); ok {
		t.Fatal("the dry run merged an entry")
	}

	code, out, errOut = s.cli2("restore-state", "-from", copyTable, "-state-table", state, "-yes", "-json")
	var rep restore.Report
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("restore-state -yes: exit %d, %v\nstdout: %s\nstderr: %s", code, err, out, errOut)
	}
	t.Logf("restore-state: %s", out)
	if c := rep.Kinds[restore.Claims]; c.Merged != len(acme) || c.Entries != len(acme) || c.Failed != 0 || rep.Merged != len(acme) {
		t.Errorf("restore-state claims: %+v (merged %d), want acme's %d claim items merged", c, rep.Merged, len(acme))
	}
	for _, e := range acme {
		if c, ok := s.claim(e.ID, emailSub); !ok || c.Status != delivery.StatusCompleted {
			t.Errorf("acme seq %d after restore-state: claim %q (found %v), want completed", e.Seq, c.Status, ok)
		}
	}

	repaired, repOut := s.repair()
	t.Logf("dlq-repair: %s", repOut)
	if last, sd := s.emailAudit(t, "acme"); sd.Watermark != last || sd.Unsettled != 0 {
		t.Errorf("reconcile acme after restore-state and dlq-repair: %+v, want settled through its head %d", sd, last)
	}
	// A redelivery would be on its way by now; give it the time one takes.
	time.Sleep(3 * time.Second)
	per := s.emailsSent(t)
	for _, e := range acme {
		if n := per[emailKey(e)]; n != 1 {
			t.Errorf("acme seq %d: %d emails sent, want exactly 1 (its claim entry was merged back)", e.Seq, n)
		}
	}
	if src := repaired.Sources["unsettled"]; src.Fixed != 0 {
		t.Errorf("dlq-repair's unsettled source: %+v, want nothing to fix", src)
	}
}

// emailAudit is reconcile's delivery audit of tenant for the email
// subscription, and the tenant's last seq.
func (s *stack) emailAudit(t *testing.T, tenant string) (int64, subscriptionAudit) {
	t.Helper()
	out := s.reconcileCLI("-url", s.url, "-tenant", tenant)
	var r struct {
		LastSeq       int64               `json:"last_seq"`
		Subscriptions []subscriptionAudit `json:"subscriptions"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("reconcile output %q: %v", out, err)
	}
	for _, sd := range r.Subscriptions {
		if sd.Subscription == emailSub {
			return r.LastSeq, sd
		}
	}
	t.Fatalf("reconcile %s: no subscription %s in %+v", tenant, emailSub, r.Subscriptions)
	return 0, subscriptionAudit{}
}

type subscriptionAudit struct {
	Subscription string `json:"subscription"`
	Watermark    int64  `json:"watermark"`
	Unsettled    int64  `json:"unsettled"`
}

// scanAll reads every item of table, consistently.
func scanAll(t *testing.T, db *dynamodb.Client, table string) []map[string]types.AttributeValue {
	t.Helper()
	var items []map[string]types.AttributeValue
	var start map[string]types.AttributeValue
	for {
		out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true), ExclusiveStartKey: start})
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items
		}
		start = out.LastEvaluatedKey
	}
}
