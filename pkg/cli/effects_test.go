package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/effect"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// TestEffectsListAndDecide: effects lists the dead letters whose effect is
// of unknown outcome (and only those), exits 3 while there is one, and
// records an operator's decision; a decision on an effect that is not
// unknown is refused and changes nothing.
func TestEffectsListAndDecide(t *testing.T) {
	ctx := context.Background()
	db := localaws.DynamoDB(t)
	localAWSEnv(t, aws.ToString(db.Options().BaseEndpoint))
	eventsTable, stateTable, store := logTables(t, db)
	claims := delivery.NewDynamoStore(db, stateTable)
	effects := effect.NewDynamoStore(db, stateTable)
	now := time.Now()
	var unknownKey, smsKey effect.Key
	for i, sub := range []string{"s.email", "s.sms", "s.search"} {
		e, err := store.Emit(tenancy.MustWithTenant(ctx, "t1"), "order.placed", map[string]any{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		k := delivery.Key{EventID: e.ID, Subscription: sub}
		if c, err := claims.Claim(ctx, delivery.ClaimRequest{Key: k, Tenant: "t1", Type: e.Type, Seq: e.Seq, SchemaVersion: 1, Token: "d",
			Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil || !c.Acquired {
			t.Fatal(c, err)
		}
		dl := delivery.DeadLetter{Tenant: "t1", EventID: e.ID, Subscription: sub, Type: e.Type, Seq: e.Seq, SchemaVersion: 1, Error: "handler failed", DeadAt: now}
		if sub != "s.search" {
			key := effect.Key{EventID: e.ID, Subscription: sub, Name: "send"}
			if sub == "s.email" {
				unknownKey = key
			} else {
				smsKey = key
			}
			dl.Effect, dl.Error = key.String(), "effect outcome unknown"
			if _, _, err := effects.Start(ctx, effect.Record{Key: key, Tenant: "t1", Seq: e.Seq, Status: effect.StatusStarted, Token: "d", UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}, false); err != nil {
				t.Fatal(err)
			}
			if err := effects.MarkUnknown(ctx, key, "d", now); err != nil {
				t.Fatal(err)
			}
		}
		if err := claims.Kill(ctx, k, "d", dl, false); err != nil {
			t.Fatal(err)
		}
	}
	tables := []string{"-table", eventsTable, "-state-table", stateTable}
	code, out, stderr := runCLI(t, append([]string{"effects", "-json"}, tables...)...)
	var got []unknownEffect
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var u unknownEffect
		if err := json.Unmarshal([]byte(line), &u); err != nil {
			t.Fatalf("line %q: %v (stderr %s)", line, err, stderr)
		}
		got = append(got, u)
	}
	if code != ExitFinding || len(got) != 2 || got[0].Key != unknownKey.String() || got[0].Status != "unknown" || got[0].Subscription != "s.email" || got[0].Seq != 1 ||
		got[1].Key != smsKey.String() || got[1].Seq != 2 {
		t.Fatalf("effects: exit %d, %+v; want exit %d and the unknown effects %s and %s\n%s", code, got, ExitFinding, unknownKey, smsKey, stderr)
	}
	if code, out, _ := runCLI(t, append([]string{"effects", "-tenant", "t1"}, tables...)...); code != ExitFinding || !strings.Contains(out, "EFFECT KEY") || !strings.Contains(out, unknownKey.String()) {
		t.Errorf("effects -tenant t1: exit %d, %q", code, out)
	}

	if code, _, stderr := runCLI(t, append([]string{"effects", "-redo", "not-a-key"}, tables...)...); code != ExitUsage || !strings.Contains(stderr, "-redo") {
		t.Errorf("-redo of a malformed key: exit %d, %q; want a usage error naming -redo", code, stderr)
	}
	if code, _, stderr := runCLI(t, append([]string{"effects", "-redo", "a:b:c", "-done", "a:b:c"}, tables...)...); code != ExitUsage || !strings.Contains(stderr, "pass one") {
		t.Errorf("-redo and -done: exit %d, %q", code, stderr)
	}
	code, out, stderr = runCLI(t, append([]string{"effects", "-done", unknownKey.String()}, tables...)...)
	if code != ExitOK || !strings.Contains(out, "done") || !strings.Contains(out, "completes without doing it") {
		t.Fatalf("-done: exit %d, %q %q", code, out, stderr)
	}
	if r, _, _ := effects.Get(ctx, unknownKey); r.Status != effect.StatusDone {
		t.Errorf("after -done the record is %q", r.Status)
	}
	// -json: the decision as one object.
	code, out, stderr = runCLI(t, append([]string{"effects", "-json", "-redo", smsKey.String()}, tables...)...)
	var decided decidedEffect
	if err := json.Unmarshal([]byte(out), &decided); err != nil || code != ExitOK || strings.Count(out, "\n") != 1 ||
		decided != (decidedEffect{Key: smsKey.String(), Tenant: "t1", Seq: 2, Status: "redo"}) {
		t.Fatalf("-json -redo: exit %d, %q (%v), %q; want one line {key, tenant t1, seq 2, status redo}", code, out, err, stderr)
	}
	// Decided already: a second decision is refused, and the record stays.
	if code, _, stderr := runCLI(t, append([]string{"effects", "-redo", unknownKey.String()}, tables...)...); code != ExitError || !strings.Contains(stderr, "is done") {
		t.Errorf("-redo after -done: exit %d, %q; want an error saying it is done", code, stderr)
	}
	if r, _, _ := effects.Get(ctx, unknownKey); r.Status != effect.StatusDone {
		t.Errorf("a refused decision changed the record to %q", r.Status)
	}
}
