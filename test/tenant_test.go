package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// A tenant id at the edge of what is allowed — 128 characters, every punctuation mark
// SQS accepts in a MessageGroupId among them — flows end to end through the twin: Emit,
// the stream, the Pipe (its MessageGroupId), the FIFO queue, the durable subscriber, and
// reconcile through the CLI (the id travels in a URL query).
func TestTenantAtTheLimitFlowsEndToEnd(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	const punct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
	tenant := punct + strings.Repeat("Zz9", 32)
	tenant = tenant[:128]
	if _, err := tenancy.WithTenant(context.Background(), tenant); err != nil {
		t.Fatalf("the tenant is not valid: %v", err)
	}
	s := startStack(t, nil)
	if _, err := s.app.Workload(context.Background(), []string{tenant}, 2); err != nil {
		t.Fatal(err)
	}
	evs := s.allEvents(t, tenant)
	if len(evs) == 0 {
		t.Fatal("no events in the log")
	}
	s.waitDelivered(t, evs)
	r := s.reconcile(tenant)
	if r.Tenant != tenant || r.ChainIntact == nil || !*r.ChainIntact || r.LastSeq != int64(len(evs)) {
		t.Errorf("reconcile: got %+v, want tenant %q intact at last_seq %d", r, tenant, len(evs))
	}
}
