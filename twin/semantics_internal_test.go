package twin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// The wire ids a group-scoped queue gives ElasticMQ: distinct per group,
// within SQS's 128 characters, and undone to the sender's id — also for
// ids too long to carry in place. Ids that did not come through the twin,
// or whose group does not match, pass unchanged.
func TestWireDedupRoundTrip(t *testing.T) {
	q := &queue{fifo: true, groupScope: true}
	long := strings.Repeat("x", 128)
	for _, id := range []string{"evt-1", "~", "~abc~def", long[:114], long[:115], long} {
		a, b := q.wireDedup("tenant-a", id), q.wireDedup("tenant-b", id)
		if a == b || a == id {
			t.Errorf("%q: wire ids %q and %q; want distinct per group and not the id itself", id, a, b)
		}
		if len(a) > maxDedupLen {
			t.Errorf("%q: wire id of %d characters, more than %d", id, len(a), maxDedupLen)
		}
		if got := q.plainDedup("tenant-a", a); got != id {
			t.Errorf("%q: plainDedup(wire) = %q", id, got)
		}
		if got := q.plainDedup("", b); got != id {
			t.Errorf("%q: plainDedup without a group = %q", id, got)
		}
		if got := q.plainDedup("tenant-b", a); got != a {
			t.Errorf("%q: another group's wire id undone to %q; want it unchanged", id, got)
		}
	}
	for _, raw := range []string{"evt-1", "~nothex00000~x", "~0123456789ab", ""} {
		if got := q.plainDedup("tenant-a", raw); got != raw {
			t.Errorf("plainDedup(%q) = %q; want it unchanged", raw, got)
		}
	}
	plain := &queue{fifo: true}
	if got := plain.wireDedup("tenant-a", "evt-1"); got != "evt-1" {
		t.Errorf("a queue-scoped queue rewrote evt-1 to %q", got)
	}
}

func TestFIFOGaps(t *testing.T) {
	msg := func(id, group string) sqstypes.Message {
		return sqstypes.Message{MessageId: aws.String(id), Attributes: map[string]string{"MessageGroupId": group}}
	}
	batch := []sqstypes.Message{msg("a1", "a"), msg("b1", "b"), msg("a2", "a"), msg("b2", "b"), msg("a3", "a"), msg("c1", "c")}
	for _, tc := range []struct {
		failed []string
		want   string
	}{
		{nil, "[]"},
		{[]string{"a3"}, "[]"},                   // the last of its group
		{[]string{"a2", "a3"}, "[]"},             // the failure and all after it
		{[]string{"a1", "a2", "a3", "b2"}, "[]"}, // each group from its first failure on
		{[]string{"a1"}, "[{a a1 [a2 a3]}]"},     // later messages of a not reported
		{[]string{"a2", "b1"}, "[{b b1 [b2]} {a a2 [a3]}]"},
		{[]string{"a1", "a3", "c1"}, "[{a a1 [a2]}]"},
	} {
		failed := map[string]bool{}
		for _, id := range tc.failed {
			failed[id] = true
		}
		if got := fmt.Sprint(fifoGaps(batch, failed)); got != tc.want {
			t.Errorf("failed %v: got %s, want %s", tc.failed, got, tc.want)
		}
	}
}

// Without bisect, a batch that exhausts its retries goes to the on-failure
// destination as one message: DDBStreamBatchInfo spans the batch, from its
// first to its last sequence number, batchSize its length — the
// consolidated form AWS's on-failure record has (services-dynamodb-errors).
func TestConsolidatedBatchInfo(t *testing.T) {
	s := newScripted(t, batchPolicy{size: 10, maxRetries: 1}, failOn("102"))
	s.c.process(context.Background(), "shard-1", recs("100", "101", "102", "103", "104"))
	if len(s.gave) != 1 {
		t.Fatalf("got %d failures, want the batch's one", len(s.gave))
	}
	b, err := json.Marshal(batchInfo("arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/1", s.gave[0]))
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Shard     string `json:"shardId"`
		Start     string `json:"startSequenceNumber"`
		End       string `json:"endSequenceNumber"`
		BatchSize int    `json:"batchSize"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	if info.Shard != "shard-1" || info.Start != "100" || info.End != "104" || info.BatchSize != 5 {
		t.Errorf("DDBStreamBatchInfo: got %s, want shard-1 100..104, batchSize 5", b)
	}
}
