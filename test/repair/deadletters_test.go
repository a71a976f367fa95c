package repair_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/repair"
)

// countingScanner counts the Scans a run issues.
type countingScanner struct {
	repair.Scanner
	mu    sync.Mutex
	scans []string
}

func (c *countingScanner) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	c.mu.Lock()
	c.scans = append(c.scans, *in.TableName)
	c.mu.Unlock()
	return c.Scanner.Scan(ctx, in, o...)
}

func (c *countingScanner) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.scans)
}

// TestDeadLettersAtScale: dlq-repair finds the tenants with dead letters
// through the state table's dead-letter index, never a Scan; a dead letter
// that fails its replay waits a doubling backoff, and after its cap is
// quarantined, loudly, and no longer replayed; a replayed one leaves the
// index and is kept as history (who, when, how, expiring).
func TestDeadLettersAtScale(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	scans := &countingScanner{Scanner: rg.cfg.DB}
	rg.cfg.DB = scans
	rg.cfg.Backfills = rg.claimStore
	rg.cfg.ReplayCap = 2
	rg.cfg.ReplayBackoff = time.Minute
	ctx := context.Background()
	rg.mail.setFail(errors.New("smtp: 451 try again later"))
	for _, tenant := range []string{"tenant-a", "tenant-b", "tenant-c"} {
		rg.place(t, tenant, "x@example.com")
		if _, err := rg.cfg.Deliverer.Deliver(ctx, rg.event(t, tenant, 1)); err != nil {
			t.Fatal(err)
		}
	}
	ts, next, err := rg.claimStore.DeadLetterTenants(ctx, "", 2)
	if err != nil || len(ts) != 2 || ts[0] != "tenant-a" || ts[1] != "tenant-b" || next != "tenant-b" {
		t.Fatalf("index, first page: %v %q %v; want tenant-a, tenant-b and a cursor", ts, next, err)
	}
	if ts, next, err := rg.claimStore.DeadLetterTenants(ctx, next, 2); err != nil || len(ts) != 1 || ts[0] != "tenant-c" || next != "" {
		t.Fatalf("index, second page: %v %q %v; want tenant-c, done", ts, next, err)
	}

	dead := repair.Request{Sources: []string{repair.SourceDeadLetters}}
	now := time.Now()
	step := func(at time.Duration) repair.Report {
		t.Helper()
		rg.cfg.Now = func() time.Time { return now.Add(at) }
		return rg.run(t, dead)
	}
	// 1st replay: at once; it fails (replays 1). 2nd, a moment later: the
	// backoff (1 min after 1 failure: 2 min) defers it, no handler run.
	if rep := step(0); rep.Open != 3 || !strings.Contains(rep.Sources[repair.SourceDeadLetters].Items[0].Reason, "failed again") {
		t.Fatalf("first replay: %+v", rep.Sources[repair.SourceDeadLetters])
	}
	rep := step(30 * time.Second)
	if it := rep.Sources[repair.SourceDeadLetters].Items[0]; rep.Open != 3 || !strings.Contains(it.Reason, "backoff 2m0s") {
		t.Fatalf("inside the backoff: %+v, want deferred naming the backoff", it)
	}
	// 2nd replay after the backoff fails (replays 2 = the cap); the next run
	// quarantines them.
	step(3 * time.Minute)
	rep = step(time.Hour)
	if it := rep.Sources[repair.SourceDeadLetters].Items[0]; rep.Open != 3 || !strings.Contains(it.Reason, "quarantined now: failed 2 replays (the cap)") {
		t.Fatalf("at the cap: %+v, want quarantined", it)
	}
	if !strings.Contains(rg.metrics.String(), `"`+keys.MetricDeadLetterQuarantined+`"`) {
		t.Errorf("%s not counted", keys.MetricDeadLetterQuarantined)
	}
	rg.mail.setFail(nil)
	rep = step(2 * time.Hour)
	if it := rep.Sources[repair.SourceDeadLetters].Items[0]; rep.Open != 3 || !strings.Contains(it.Reason, "quarantined (failed 2 replays") || rg.mail.count() != 0 {
		t.Fatalf("quarantined: %+v, %d emails; want still open, not replayed", it, rg.mail.count())
	}

	// A new dead letter, replayed once the mail works: resolved, out of the
	// index, into the history.
	rg.mail.setFail(errors.New("smtp: 451"))
	rg.place(t, "tenant-d", "y@example.com")
	if _, err := rg.cfg.Deliverer.Deliver(ctx, rg.event(t, "tenant-d", 1)); err != nil {
		t.Fatal(err)
	}
	rg.mail.setFail(nil)
	rep = rg.run(t, repair.Request{Sources: []string{repair.SourceDeadLetters}, Tenants: []string{"tenant-d"}})
	if rep.Fixed != 1 || rep.Open != 0 || rg.mail.count() != 1 {
		t.Fatalf("tenant-d: %+v, %d emails; want fixed, one email", rep, rg.mail.count())
	}
	ts, _, err = rg.claimStore.DeadLetterTenants(ctx, "", 10)
	if err != nil || strings.Join(ts, ",") != "tenant-a,tenant-b,tenant-c" {
		t.Errorf("index after resolving tenant-d: %v %v; want a, b, c", ts, err)
	}
	hist, _, err := rg.claimStore.ResolvedDeadLetters(ctx, "tenant-d", "", 10)
	if err != nil || len(hist) != 1 {
		t.Fatalf("history: %+v %v", hist, err)
	}
	if h := hist[0]; h.ResolvedBy != keys.FnDLQRepair || h.How != keys.ResolvedReplayed || h.Subscription != emailSub || h.Seq != 1 ||
		!strings.Contains(h.Error, "451") || h.ExpiresAt.Sub(h.ResolvedAt) < 89*24*time.Hour {
		t.Errorf("history row %+v, want resolved by dlq-repair, replayed, the last error, expiring in 90 days", h)
	}
	if n := scans.count(); n != 0 {
		t.Errorf("repair issued %d Scans (%v), want none", n, scans.scans)
	}
}

// flakyScanner fails the Scans numbered in fail (1-based), and records
// whether each Scan resumed from a key.
type flakyScanner struct {
	repair.Scanner
	mu      sync.Mutex
	n       int
	fail    map[int]bool
	resumed []bool
}

func (f *flakyScanner) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	f.mu.Lock()
	f.n++
	bad := f.fail[f.n]
	f.resumed = append(f.resumed, len(in.ExclusiveStartKey) > 0)
	f.mu.Unlock()
	if bad {
		return nil, errors.New("injected: the scan's connection reset")
	}
	return f.Scanner.Scan(ctx, in, o...)
}

// TestTableFallbackResumes: a table re-read (the change feed's batch is
// past the stream's retention) that fails after its first page is resumed
// by the next run from the saved position, not started over, and the
// position is cleared when it finishes.
func TestTableFallbackResumes(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	rg.cfg.Streams = trimmedStreams{rg.streams}
	scans := &flakyScanner{Scanner: rg.cfg.DB, fail: map[int]bool{2: true}}
	rg.cfg.DB, rg.cfg.Cursors, rg.cfg.ScanPage = scans, rg.claimStore, 1
	for _, email := range []string{"a@example.com", "b@example.com", "c@example.com"} {
		rg.place(t, "tenant-1", email)
	}
	_, orec := rg.streamRecords(t, rg.ordersStream, 3)
	send(t, rg.q, rg.feedDLQ, onFailure(t, rg.ordersStream, "shardId-gone", orec[0], orec[0], 1))
	only := repair.Request{Sources: []string{repair.SourceChangeFeedDLQ}}

	rep := rg.run(t, only)
	if src := rep.Sources[repair.SourceChangeFeedDLQ]; src.Open != 1 || !strings.Contains(src.Items[0].Error, "connection reset") {
		t.Fatalf("first run: %+v, want open with the scan's error", src)
	}
	rep = rg.run(t, only)
	if src := rep.Sources[repair.SourceChangeFeedDLQ]; src.Fixed != 1 || src.Items[0].Via != repair.ViaTable {
		t.Fatalf("second run: %+v, want fixed via the table", src)
	}
	scans.mu.Lock()
	resumed := append([]bool(nil), scans.resumed...)
	scans.mu.Unlock()
	// Run 1: page 1 (from the start), page 2 fails. Run 2 starts at page 2.
	if len(resumed) < 3 || resumed[0] || !resumed[2] {
		t.Errorf("scans resumed %v, want the second run's first scan to start from the saved key", resumed)
	}
	if !strings.Contains(rg.logs.String(), "resuming a table re-read where an earlier run stopped") {
		t.Error("the resume is not logged")
	}
}

// TestReindexLegacyDeadLetters: a dead letter written before the
// dead-letter index existed is invisible to the hourly run; one run asked to
// reindex scans for such rows (the only Scan of the state table, and only on
// request) and indexes them, after which the hourly run replays them.
func TestReindexLegacyDeadLetters(t *testing.T) {
	t.Parallel()
	rg := newRig(t)
	rg.cfg.Cursors, rg.cfg.ScanPage = rg.claimStore, 2
	ctx := context.Background()
	rg.mail.setFail(errors.New("smtp: 451"))
	rg.place(t, "tenant-l", "old@example.com")
	if _, err := rg.cfg.Deliverer.Deliver(ctx, rg.event(t, "tenant-l", 1)); err != nil {
		t.Fatal(err)
	}
	// As the previous version wrote it: without the index attribute.
	if _, err := rg.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(rg.stateTbl),
		Key: map[string]types.AttributeValue{keys.AttrPK: &types.AttributeValueMemberS{Value: keys.StateDeadPrefix + "tenant-l"},
			keys.AttrSK: &types.AttributeValueMemberS{Value: rg.event(t, "tenant-l", 1).ID + ":" + emailSub}},
		UpdateExpression: aws.String("REMOVE #ix"), ExpressionAttributeNames: map[string]string{"#ix": keys.AttrDeadIndex}}); err != nil {
		t.Fatal(err)
	}
	rg.mail.setFail(nil)
	if rep := rg.run(t, repair.Request{Sources: []string{repair.SourceDeadLetters}}); rep.Fixed+rep.Open != 0 {
		t.Fatalf("before the reindex: %+v, want the legacy dead letter unseen", rep)
	}
	rep := rg.run(t, repair.Request{ReindexDeadLetters: true})
	src := rep.Sources[repair.SourceReindex]
	if src == nil || src.Fixed != 1 || !src.Complete || src.Items[0].Records != 1 {
		t.Fatalf("reindex: %+v, want one dead letter indexed, complete", src)
	}
	if rep := rg.run(t, repair.Request{Sources: []string{repair.SourceDeadLetters}}); rep.Fixed != 1 || rg.mail.count() != 1 {
		t.Errorf("after the reindex: %+v, %d emails; want the legacy dead letter replayed", rep, rg.mail.count())
	}
}
