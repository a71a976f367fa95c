package repair_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/repair"
)

const emailSub = "notifications.order-email"

func (rg *rig) watermark(t *testing.T, tenant string) int64 {
	t.Helper()
	ms, err := rg.claimStore.Watermarks(context.Background(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return ms[emailSub].Seq
}

// hold takes the claim of (event, the email subscription) for an hour, as
// another delivery in flight would.
func (rg *rig) hold(t *testing.T, tenant, eventID string, seq int64) {
	t.Helper()
	now := time.Now()
	c, err := rg.claimStore.Claim(context.Background(), delivery.ClaimRequest{Key: delivery.Key{EventID: eventID, Subscription: emailSub},
		Tenant: tenant, Type: "order.placed", Seq: seq, SchemaVersion: 1, Token: "other", Now: now, LeaseUntil: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour)})
	if err != nil || !c.Acquired {
		t.Fatalf("hold: %+v %v", c, err)
	}
}

func after(s int64) *int64 { return &s }

// releaseHold removes the held claim of tenant's event at seq, as if the
// other delivery's lease had ended without a word.
func (rg *rig) releaseHold(t *testing.T, tenant string, seq int64) error {
	t.Helper()
	k := delivery.Key{EventID: rg.event(t, tenant, seq).ID, Subscription: emailSub}
	_, err := rg.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(rg.stateTbl), Key: map[string]types.AttributeValue{
		keys.AttrPK: &types.AttributeValueMemberS{Value: keys.StateEventClaimPrefix + k.EventID},
		keys.AttrSK: &types.AttributeValueMemberS{Value: keys.StateEventClaimSK},
	}, UpdateExpression: aws.String("REMOVE #c"), ExpressionAttributeNames: map[string]string{"#c": keys.AttrSubClaimPrefix + k.Subscription}})
	return err
}

// TestUnsettledSweep: events no lane delivered (nothing in any queue names
// them) are redelivered from the log once the first of them is old enough,
// in seq order, and the watermark reaches the head; a run before that
// leaves them to the lane; an event held by another delivery stops the
// sweep there, reported open, and a later run finishes.
func TestUnsettledSweep(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	rg.place(t, "tenant-1", "ana@example.com")
	rg.place(t, "tenant-1", "bo@example.com")
	rg.place(t, "tenant-1", "cy@example.com")
	only := repair.Request{Sources: []string{repair.SourceUnsettled}, Tenants: []string{"tenant-1"}}

	rep := rg.run(t, only)
	if src := rep.Sources[repair.SourceUnsettled]; src.Fixed+src.Open != 0 || rg.mail.count() != 0 {
		t.Fatalf("young events: %+v, %d emails; want them left to the lane", src, rg.mail.count())
	}

	rg.hold(t, "tenant-1", rg.event(t, "tenant-1", 2).ID, 2)
	only.UnsettledAfterSeconds = after(0)
	rep = rg.run(t, only)
	src := rep.Sources[repair.SourceUnsettled]
	if src.Open != 1 || src.Fixed != 0 || src.Items[0].Records != 1 {
		t.Fatalf("with seq 2 held: %+v, want open after delivering seq 1", src)
	}
	if w := rg.watermark(t, "tenant-1"); w != 1 || rg.mail.count() != 1 {
		t.Errorf("with seq 2 held: watermark %d, %d emails; want 1 and 1 (never past the held event)", w, rg.mail.count())
	}

	if err := rg.releaseHold(t, "tenant-1", 2); err != nil {
		t.Fatal(err)
	}
	rep = rg.run(t, only)
	if src := rep.Sources[repair.SourceUnsettled]; src.Fixed != 1 || src.Open != 0 {
		t.Fatalf("released: %+v, want fixed", src)
	}
	if w := rg.watermark(t, "tenant-1"); w != 3 || rg.mail.count() != 3 {
		t.Errorf("released: watermark %d, %d emails; want 3 and 3, each once", w, rg.mail.count())
	}
	if rep := rg.run(t, only); rep.Sources[repair.SourceUnsettled].Fixed+rep.Sources[repair.SourceUnsettled].Open != 0 {
		t.Errorf("settled tenant swept again: %+v", rep.Sources[repair.SourceUnsettled])
	}
}

// TestStreamGoneKeepsMessageWhileUnsettled: a Pipe DLQ message whose
// stream range is gone is deleted only once every subscription of every
// tenant is settled through the head: not while one event is held.
func TestStreamGoneKeepsMessageWhileUnsettled(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	rg.cfg.Streams = trimmedStreams{rg.streams}
	rg.place(t, "tenant-1", "ana@example.com")
	rg.place(t, "tenant-2", "bo@example.com")
	shard, erec := rg.streamRecords(t, rg.eventsStream, 4)
	send(t, rg.q, rg.pipeDLQ, onFailure(t, rg.eventsStream, shard, erec[0], erec[3], 4))
	rg.hold(t, "tenant-2", rg.event(t, "tenant-2", 1).ID, 1)

	rep := rg.run(t, repair.Request{Sources: []string{repair.SourcePipeDLQ}})
	if src := rep.Sources[repair.SourcePipeDLQ]; src.Open != 1 || src.Fixed != 0 {
		t.Fatalf("%+v, want the message open while tenant-2 seq 1 is held", src)
	}
	if v, f := rg.depth(t, rg.pipeDLQ); v+f != 1 {
		t.Errorf("Pipe DLQ: %d + %d, want the message kept", v, f)
	}
	if err := rg.releaseHold(t, "tenant-2", 1); err != nil {
		t.Fatal(err)
	}
	rep = rg.run(t, repair.Request{Sources: []string{repair.SourcePipeDLQ}})
	if src := rep.Sources[repair.SourcePipeDLQ]; src.Fixed != 1 || src.Items[0].Via != repair.ViaTable {
		t.Fatalf("%+v, want fixed via the table", src)
	}
	if v, f := rg.depth(t, rg.pipeDLQ); v+f != 0 {
		t.Errorf("Pipe DLQ: %d + %d, want empty", v, f)
	}
	if n := rg.mail.count(); n != 2 {
		t.Errorf("emails %d, want 2", n)
	}
}

// TestUnsettledOlderThanClaimsIsNotRedelivered: an event above the
// watermark but older than the claims' retention may have been delivered
// with its claim since expired (a stack that had no watermarks yet): it is
// reported open, never sent again blindly.
func TestUnsettledOlderThanClaimsIsNotRedelivered(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	rg.place(t, "tenant-1", "ana@example.com")
	rg.cfg.Now = func() time.Time { return time.Now().Add(31 * 24 * time.Hour) }
	rep := rg.run(t, repair.Request{Sources: []string{repair.SourceUnsettled}, Tenants: []string{"tenant-1"}})
	src := rep.Sources[repair.SourceUnsettled]
	if src.Open != 1 || src.Fixed != 0 || !strings.Contains(src.Items[0].Reason, "retention") {
		t.Fatalf("%+v, want open naming the claims' retention", src)
	}
	if n := rg.mail.count(); n != 0 {
		t.Errorf("%d emails, want none", n)
	}
}

// editLogRow rewrites the payload of tenant's event at seq in the log, its
// hash kept: what someone with write access to the table could do.
func (rg *rig) editLogRow(t *testing.T, tenant string, seq int64) {
	t.Helper()
	_, err := rg.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(rg.eventsTbl),
		Key: map[string]types.AttributeValue{
			keys.AttrTenant: &types.AttributeValueMemberS{Value: tenant},
			keys.AttrSeq:    &types.AttributeValueMemberN{Value: strconv.FormatInt(seq, 10)},
		},
		UpdateExpression:          aws.String("SET #p.customer_email = :v"),
		ExpressionAttributeNames:  map[string]string{"#p": keys.AttrPayload},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "eve@example.com"}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTamperedLogRowIsNeverDelivered: a log row edited in place (its hash
// kept) is delivered neither from a DLQ message naming it nor by the
// unsettled sweep; both stay open with a reason that says to run reconcile
// and the integrity error naming tenant and seq.
func TestTamperedLogRowIsNeverDelivered(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	rg.place(t, "tenant-1", "ana@example.com")
	rg.place(t, "tenant-1", "bo@example.com")
	e2 := rg.event(t, "tenant-1", 2)
	rg.editLogRow(t, "tenant-1", 2)
	wantErr := []string{`tenant "tenant-1" seq 2`, "hash", "run reconcile on the tenant"}

	rg.toDLQ(t, envJSON(t, e2), "tenant-1", e2.ID)
	rep := rg.run(t, repair.Request{Sources: []string{repair.SourceDurableDLQ}})
	open := items(rep, repair.SourceDurableDLQ, repair.Open)
	if len(open) != 1 || !strings.HasPrefix(open[0].Reason, "cannot re-read the event from the log") {
		t.Fatalf("DLQ: open %+v, want the message open: cannot re-read the event from the log", open)
	}
	for _, w := range wantErr {
		if !strings.Contains(open[0].Error, w) {
			t.Errorf("DLQ item error %q does not name %q", open[0].Error, w)
		}
	}

	rep = rg.run(t, repair.Request{Sources: []string{repair.SourceUnsettled}, Tenants: []string{"tenant-1"}, UnsettledAfterSeconds: after(0)})
	open = items(rep, repair.SourceUnsettled, repair.Open)
	if len(open) != 1 || open[0].Records != 1 || open[0].Reason != "the log's row at seq 2 does not match its hash: run reconcile on the tenant" {
		t.Fatalf("sweep: open %+v, want seq 1 delivered and the sweep stopped at seq 2's hash", open)
	}
	for _, w := range wantErr {
		if !strings.Contains(open[0].Error, w) {
			t.Errorf("sweep item error %q does not name %q", open[0].Error, w)
		}
	}
	if w := rg.watermark(t, "tenant-1"); w != 1 || rg.mail.count() != 1 {
		t.Errorf("watermark %d, %d emails; want 1 and 1 (seq 1 only)", w, rg.mail.count())
	}
}
