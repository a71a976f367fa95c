package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// TestDeadLettersRelease: -release refuses (exit 2, nothing written)
// without all of -tenant, -subscription and -event, and for an event that
// is not quarantined; it takes a quarantined event off the list and resets
// its dead letter's failed replays, so that the next dlq-repair run replays
// it at once, and says so.
func TestDeadLettersRelease(t *testing.T) {
	ctx := context.Background()
	db := localaws.DynamoDB(t)
	localAWSEnv(t, aws.ToString(db.Options().BaseEndpoint))
	_, stateTable, store := logTables(t, db)
	claims := delivery.NewDynamoStore(db, stateTable)
	now := time.Now().UTC().Truncate(time.Second)
	e, err := store.Emit(tenancy.MustWithTenant(ctx, "t1"), "order.placed", map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	const sub = "s.email"
	k := delivery.Key{EventID: e.ID, Subscription: sub}
	if c, err := claims.Claim(ctx, delivery.ClaimRequest{Key: k, Tenant: "t1", Type: e.Type, Seq: e.Seq, SchemaVersion: 1, Token: "d",
		Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil || !c.Acquired {
		t.Fatal(c, err)
	}
	dl := delivery.DeadLetter{Tenant: "t1", EventID: e.ID, Subscription: sub, Type: e.Type, Seq: e.Seq, SchemaVersion: 1, Error: "handler failed", DeadAt: now}
	if err := claims.Kill(ctx, k, "d", dl, true); err != nil { // a failed replay
		t.Fatal(err)
	}
	if err := claims.Quarantine(ctx, delivery.Quarantined{Tenant: "t1", Subscription: sub, EventID: e.ID, Seq: e.Seq, Reason: "failed 1 replays (the cap)", At: now}); err != nil {
		t.Fatal(err)
	}
	quarantined := func() int {
		t.Helper()
		q, err := claims.QuarantineList(ctx, "t1", sub)
		if err != nil {
			t.Fatal(err)
		}
		return len(q)
	}
	replays := func() int {
		t.Helper()
		dls, _, err := claims.DeadLetters(ctx, "t1", "", 10)
		if err != nil || len(dls) != 1 {
			t.Fatalf("dead letters of t1: %v, %v; want the one", dls, err)
		}
		return dls[0].Replays
	}
	if got := replays(); got != 1 {
		t.Fatalf("replays before the release: %d, want 1", got)
	}

	table := []string{"deadletters", "-state-table", stateTable, "-release"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "pass -event, -subscription, -tenant"},
		{[]string{"-tenant", "t1", "-subscription", sub}, "pass -event"},
		{[]string{"-tenant", "t1", "-event", e.ID}, "pass -subscription"},
		{[]string{"-subscription", sub, "-event", e.ID}, "pass -tenant"},
		{[]string{"-tenant", "t1", "-subscription", sub, "-event", e.ID, "-json"}, "-release does not list"},
		{[]string{"-tenant", "t1", "-subscription", "s.sms", "-event", e.ID}, "is not quarantined for s.sms"},
	} {
		code, _, stderr := runCLI(t, append(table, tc.args...)...)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("-release %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, ExitUsage, tc.want)
		}
	}
	if code, _, stderr := runCLI(t, "deadletters", "-state-table", stateTable, "-event", e.ID); code != ExitUsage || !strings.Contains(stderr, "-event applies to -release only") {
		t.Errorf("-event without -release: exit %d, %q", code, stderr)
	}
	if quarantined() != 1 || replays() != 1 {
		t.Fatalf("a refused release wrote: quarantined %d, replays %d; want 1 and 1", quarantined(), replays())
	}

	code, out, stderr := runCLI(t, append(table, "-tenant", "t1", "-subscription", sub, "-event", e.ID)...)
	if code != ExitOK || !strings.Contains(out, "released event "+e.ID) || !strings.Contains(out, "reset from 1 to 0") {
		t.Fatalf("-release: exit %d, stdout %q, stderr %q; want exit 0 saying it released the event and reset 1 replay", code, out, stderr)
	}
	if quarantined() != 0 || replays() != 0 {
		t.Errorf("after the release: quarantined %d, replays %d; want 0 and 0", quarantined(), replays())
	}
	// Released once; a second release is refused.
	if code, _, stderr := runCLI(t, append(table, "-tenant", "t1", "-subscription", sub, "-event", e.ID)...); code != ExitUsage || !strings.Contains(stderr, "not quarantined") {
		t.Errorf("second -release: exit %d, %q; want exit 2, not quarantined", code, stderr)
	}
}
