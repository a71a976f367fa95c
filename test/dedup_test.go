package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/cfn"
)

// Two messages that share one deduplication id: SQS accepts both sends and
// delivers one; the twin reports the other as dropped. The template here is
// broken on purpose (the dedup path names the tenant, not the event); the
// design never shares an id (TestOrdersFlowEndToEnd checks none is dropped),
// and durable-consumer refuses the survivor too, loudly: its dedup id is
// not its event id, so it is undecodable and dead-lettered to the FIFO DLQ
// at its first receive, its reason beside it.
func TestSharedDedupIDIsDropped(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, func(tm *cfn.Template) {
		for _, r := range tm.OfType(cfn.TypePipe) {
			r.SetProp("$.tenant_id", "TargetParameters", "SqsQueueParameters", "MessageDeduplicationId")
		}
	})
	ctx, err := tenancy.WithTenant(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	o, err := s.app.Orders.Place(ctx, "x@acme.example", []orders.Item{{SKU: "sku-mug", Qty: 1}}, 1000, "EUR")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.app.Orders.Pay(ctx, o, "pay-1"); err != nil {
		t.Fatal(err)
	}
	if evs := s.allEvents(t, "acme"); len(evs) != 2 {
		t.Fatalf("%d events, want 2", len(evs))
	}
	eventually(t, 30*time.Second, "one message dropped, the other dead-lettered", func() (bool, string) {
		dups := s.tw.Journal().Count(func(e twin.Entry) bool { return e.Kind == twin.KindDuplicate })
		dead := s.depth(keys.EnvDurableDLQURL)
		return dups == 1 && dead == 1, fmt.Sprintf("%d dropped, %d in the DURABLE DLQ", dups, dead)
	})
	dups := s.tw.Journal().Entries(func(e twin.Entry) bool { return e.Kind == twin.KindDuplicate })
	t.Logf("dropped by SQS:\n%s", twin.FormatEntries(dups))
	sent := s.tw.Journal().Entries(func(e twin.Entry) bool { return e.Source == s.pipe && e.Kind == twin.KindDelivered })
	if all := twin.FormatEntries(sent); strings.Count(all, "DROPPED as duplicate") != 1 || strings.Count(all, "dedup=acme") != 2 {
		t.Errorf("the Pipe's sends: want two messages with dedup id acme, one dropped:\n%s", all)
	}
	s.waitLines(t, s.fn[keys.FnDurableConsumer], "is not the event id") // the consumer says why it refused
	if st, _ := s.tw.Poller(s.durableMap); st.Read != 1 {
		t.Errorf("durable mapping: %+v, want the one surviving message received once", st)
	}
}
