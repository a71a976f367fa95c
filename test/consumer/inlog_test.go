package consumer_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// logOf is the log as a LogReader: the fixture's events.
type logOf map[delivery.EventRef]delivery.LoggedEvent

func (l logOf) LoggedEvent(_ context.Context, ref delivery.EventRef) (delivery.LoggedEvent, bool, error) {
	e, ok := l[ref]
	return e, ok, nil
}

// Coverage reads the fixture's head (keys.HeadSeq) and the event before ref.
func (l logOf) Coverage(_ context.Context, ref delivery.EventRef) (delivery.Coverage, error) {
	var c delivery.Coverage
	c.Head, c.HeadFound = l[delivery.EventRef{Tenant: ref.Tenant, Seq: keys.HeadSeq}]
	c.Prev, c.PrevFound = l[delivery.EventRef{Tenant: ref.Tenant, Seq: ref.Seq - 1}]
	return c, nil
}

// TestNotInLogComesBackAlone: a hash-intact envelope of tenant-1 at seq 999,
// which the log does not hold, sits between tenant-1's real messages. It is
// not delivered (no claim, no email), logged at ERROR, counted, and
// answered as a failure so the redrive takes it to the DLQ; tenant-1's
// later messages are delivered (it is not one of the tenant's events), and
// the tenant's watermark moves over them.
func TestNotInLogComesBackAlone(t *testing.T) {
	log := logOf{}
	for _, e := range fixtureEvents(t) {
		log[delivery.EventRef{Tenant: e.TenantID, Seq: e.Seq}] = delivery.LoggedEvent{ID: e.ID, Hash: e.Hash}
		head := delivery.EventRef{Tenant: e.TenantID, Seq: keys.HeadSeq}
		log[head] = delivery.LoggedEvent{Head: true, LastSeq: max(log[head].LastSeq, e.Seq)}
	}
	rg := newRig(t, func(c *delivery.Config) { c.Log = log })
	ev := loadFixture(t)
	forged := fixtureEvents(t)[0]
	id, err := envelope.NewID()
	if err != nil {
		t.Fatal(err)
	}
	forged.ID, forged.Seq, forged.PrevHash = id, 999, fixtureEvents(t)[4].Hash
	if err := chain.Seal(&forged); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(forged)
	m := fifoMessage("0c1f8f5e-58a4-4a5c-9d1e-0000000000f0", "tenant-1", keys.DedupReparkPrefix+"forged", string(b), 1)
	// Queue order: t1 placed, t2 placed, FORGED, t1 paid, t2 paid, t1 shipped.
	batch := events.SQSEvent{Records: slices.Insert(slices.Clone(ev.Records), 2, m)}

	resp, err := rg.h.Handle(lambdaCtx(t), batch)
	if err != nil {
		t.Fatal(err)
	}
	if got := failures(resp); !slices.Equal(got, []string{m.MessageId}) {
		t.Fatalf("batchItemFailures %v, want only the forged message %s", got, m.MessageId)
	}
	if _, ok := rg.claim(t, forged.ID); ok {
		t.Error("the forged envelope has a claim")
	}
	if got := rg.mail.subjects(); len(got) != 5 {
		t.Errorf("emails %v, want 5: every real event once, none for the forgery", got)
	}
	logs := rg.logs.String()
	if !strings.Contains(logs, `"level":"ERROR","msg":"envelope is not in the log`) || !strings.Contains(logs, `"reason":"not_in_log"`) {
		t.Errorf("no ERROR line with reason not_in_log:\n%s", logs)
	}
	if met := rg.metrics.String(); !strings.Contains(met, `"`+keys.MetricNotInLog+`"`) || !strings.Contains(met, `"Reason":"not_in_log"`) {
		t.Errorf("metrics lack %s and the not_in_log failure: %s", keys.MetricNotInLog, met)
	}
	if rg.db.marks != 0 {
		t.Errorf("%d watermark writes, want 0 (the consumer writes none; the forgery has no claim to derive one from)", rg.db.marks)
	}
}
