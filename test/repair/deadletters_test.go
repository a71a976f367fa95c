package repair_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

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
