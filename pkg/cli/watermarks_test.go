package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

// TestWatermarksRefuses: -set-to-head changes nothing without -yes, and
// needs exactly one of -tenant and -all.
func TestWatermarksRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-set-to-head", "-all"}, "refusing -set-to-head without -yes"},
		{[]string{"-set-to-head", "-tenant", "t1"}, "refusing -set-to-head without -yes"},
		{[]string{"-set-to-head", "-yes"}, "exactly one of -tenant T and -all"},
		{[]string{"-set-to-head", "-yes", "-all", "-tenant", "t1"}, "exactly one of -tenant T and -all"},
		{[]string{"-all"}, "-all applies to -set-to-head"},
		{[]string{"-yes"}, "-yes applies to -set-to-head only"},
		{[]string{"-tenant", "a b"}, "-tenant"},
		{nil, "pass -table and -state-table"},
	} {
		t.Setenv("EVENTS_TABLE", "")
		t.Setenv("STATE_TABLE", "")
		code, _, stderr := runCLI(t, append([]string{"watermarks"}, tc.args...)...)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("watermarks %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, ExitUsage, tc.want)
		}
	}
}

// TestWatermarksAgainstDynamoDB lists watermarks against the heads and sets
// them to the heads, one tenant and then all, on the twin's DynamoDB.
func TestWatermarksAgainstDynamoDB(t *testing.T) {
	ctx := context.Background()
	db := localaws.DynamoDB(t)
	eventsTable, stateTable, store := logTables(t, db)
	for tenant, n := range map[string]int{"t1": 3, "t2": 2} {
		tctx := tenancy.MustWithTenant(ctx, tenant)
		for i := range n {
			if _, err := store.Emit(tctx, "order.placed", map[string]any{"n": i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cat, err := testApp.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	w, err := newWatermarkTool(db, cat, eventsTable, stateTable)
	if err != nil {
		t.Fatal(err)
	}
	w.now = func() time.Time { return time.Date(2026, 12, 1, 0, 30, 0, 0, time.UTC) }
	// The application's tenants list only the application's subscriptions:
	// the framework's (the heartbeat's subscriber) serve only its chain.
	subs := delivery.ForChain(w.subs, "t1")
	if len(subs) != len(w.subs)-1 || slices.Contains(subs, keys.HeartbeatSubscription) {
		t.Fatalf("subscriptions of t1 %v: want %v without %s", subs, w.subs, keys.HeartbeatSubscription)
	}
	sub := subs[0]
	// A watermark is derived: events a subscription is not routed are
	// settled for it, so one no order.placed routes to stands at the head.
	routed := routedBy(cat, "order.placed")
	if !routed[sub] {
		t.Fatalf("%s is not routed order.placed", sub)
	}
	if moved, err := w.marks.Advance(ctx, "t1", sub, 1, 1, w.now()); err != nil || !moved {
		t.Fatalf("advance t1/%s to 1: moved %v, %v", sub, moved, err)
	}

	listed := func() map[string][]string {
		t.Helper()
		var out bytes.Buffer
		if code, err := w.list(ctx, "", false, &out); err != nil || code != ExitOK {
			t.Fatalf("list: exit %d, %v", code, err)
		}
		rows := map[string][]string{}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
			f := strings.Fields(line)
			rows[f[0]+" "+f[1]] = f[2:6] // watermark, head, behind, effects unknown
		}
		return rows
	}
	row := func(rows map[string][]string, tenant, s string) string {
		return strings.Join(rows[tenant+" "+s], " ")
	}
	rows := listed()
	if r, ok := rows["t1 "+keys.HeartbeatSubscription]; ok {
		t.Errorf("t1 lists %s (%v): it serves only the heartbeat's chain", keys.HeartbeatSubscription, r)
	}
	if len(rows) != 2*len(subs) {
		t.Errorf("listed %d rows, want %d (2 tenants x %d DURABLE subscriptions): %v", len(rows), 2*len(subs), len(subs), rows)
	}
	if got := row(rows, "t1", sub); got != "1 3 2 0" {
		t.Errorf("t1 %s: got %q, want watermark 1, head 3, behind 2", sub, got)
	}
	for _, s := range subs[1:] {
		want := map[bool]string{true: "0 3 3 0", false: "3 3 0 0"}[routed[s]]
		if got := row(rows, "t1", s); got != want {
			t.Errorf("t1 %s: got %q, want %s (no watermark row; routed order.placed: %v)", s, got, want, routed[s])
		}
	}

	var out bytes.Buffer
	if _, err := w.setToHead(ctx, "t1", false, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("t1 %s: watermark 1 -> 3 (the head)", sub)) ||
		!strings.Contains(out.String(), fmt.Sprintf("%d watermark(s) set", len(subs))) {
		t.Errorf("set t1 to head printed:\n%s", out.String())
	}
	rows = listed()
	for _, s := range subs {
		if got := row(rows, "t1", s); got != "3 3 0 0" {
			t.Errorf("t1 %s after -set-to-head: got %q, want 3 3 0", s, got)
		}
		want := map[bool]string{true: "0 2 2 0", false: "2 2 0 0"}[routed[s]]
		if got := row(rows, "t2", s); got != want {
			t.Errorf("t2 %s after -set-to-head -tenant t1: got %q, want %s (untouched)", s, got, want)
		}
	}

	out.Reset()
	if _, err := w.setToHead(ctx, "", false, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "already at the head 3; unchanged") ||
		!strings.Contains(out.String(), fmt.Sprintf("%d watermark(s) set", len(subs))) {
		t.Errorf("set all to head printed:\n%s", out.String())
	}
	rows = listed()
	for _, s := range subs {
		if got := row(rows, "t2", s); got != "2 2 0 0" {
			t.Errorf("t2 %s after -set-to-head -all: got %q, want 2 2 0", s, got)
		}
	}

	// A dead letter of t2 whose effect's outcome is unknown: below the
	// watermark, yet counted, so the listing does not look settled.
	evs, err := w.log.AllEvents(ctx, "t2")
	if err != nil {
		t.Fatal(err)
	}
	k := delivery.Key{EventID: evs[0].ID, Subscription: sub}
	now := time.Now()
	if c, err := w.marks.Claim(ctx, delivery.ClaimRequest{Key: k, Tenant: "t2", Type: evs[0].Type, Seq: 1, SchemaVersion: 1, Token: "d",
		Now: now, LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil || !c.Acquired {
		t.Fatal(c, err)
	}
	if err := w.marks.Kill(ctx, k, "d", delivery.DeadLetter{Tenant: "t2", EventID: k.EventID, Subscription: sub, Type: evs[0].Type, Seq: 1,
		SchemaVersion: 1, Error: "effect outcome unknown", DeadAt: now, Effect: k.EventID + ":" + sub + ":email"}, false); err != nil {
		t.Fatal(err)
	}
	if got := row(listed(), "t2", sub); got != "2 2 0 1" {
		t.Errorf("t2 %s with an effect of unknown outcome: got %q, want 2 2 0 1", sub, got)
	}
}

// TestWatermarksLocal: -local finds both tables and the DynamoDB in the
// running twin's state file (dev.json), the state table by its stack output.
func TestWatermarksLocal(t *testing.T) {
	db := localaws.DynamoDB(t)
	eventsTable, stateTable, store := logTables(t, db)
	tctx := tenancy.MustWithTenant(context.Background(), "t-local")
	for i := range 2 {
		if _, err := store.Emit(tctx, "order.placed", map[string]any{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(EnvTwinDir, t.TempDir())
	t.Setenv("EVENTS_TABLE", "")
	t.Setenv("STATE_TABLE", "")
	if _, err := WriteDevState(DevState{PID: os.Getpid(), DynamoDBEndpoint: aws.ToString(db.Options().BaseEndpoint),
		EventsTable: eventsTable, Outputs: map[string]string{keys.OutputStateTable: stateTable}}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "watermarks", "-local", "-tenant", "t-local")
	if code != ExitOK {
		t.Fatalf("watermarks -local: exit %d, stderr %q", code, stderr)
	}
	rows := strings.Split(strings.TrimSpace(stdout), "\n")[1:]
	if len(rows) == 0 {
		t.Fatalf("watermarks -local listed nothing:\n%s", stdout)
	}
	cat, err := testApp.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	routed := routedBy(cat, "order.placed")
	for _, r := range rows {
		f := strings.Fields(r)
		if len(f) < 5 {
			t.Errorf("row %q: too short", r)
			continue
		}
		// Events a subscription is not routed are settled for it.
		want := map[bool]string{true: "0 2 2", false: "2 2 0"}[routed[f[1]]]
		if f[0] != "t-local" || strings.Join(f[2:5], " ") != want {
			t.Errorf("row %q: want t-local <subscription> %s (no watermark row, head 2)", r, want)
		}
	}

	// -json: an object per chain and subscription; -set-to-head says what
	// it did to each, and the listing then shows it.
	jsonLines := func(args ...string) []map[string]any {
		t.Helper()
		code, stdout, stderr := runCLI(t, append([]string{"watermarks", "-local", "-tenant", "t-local", "-json"}, args...)...)
		if code != ExitOK {
			t.Fatalf("watermarks -json %v: exit %d, %s", args, code, stderr)
		}
		var out []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("watermarks -json %v: line %q: %v", args, l, err)
			}
			out = append(out, m)
		}
		return out
	}
	lines := jsonLines()
	if len(lines) != len(rows) {
		t.Errorf("-json: %d lines, the table %d rows", len(lines), len(rows))
	}
	for _, l := range lines {
		sub, _ := l["subscription"].(string)
		mark := map[bool]float64{true: 0, false: 2}[routed[sub]]
		if l["tenant"] != "t-local" || l["watermark"] != mark || l["head"] != 2.0 || l["behind"] != 2.0-mark || l["effects_unknown"] != 0.0 || l["updated_at"] != nil || sub == "" {
			t.Errorf("-json line %v: want t-local, a subscription, watermark %v, head 2, behind %v, no updated_at", l, mark, 2-mark)
		}
	}
	for _, l := range jsonLines("-set-to-head", "-yes") {
		if l["outcome"] != outcomeSet || l["from"] != 0.0 || l["to"] != 2.0 {
			t.Errorf("-set-to-head -json line %v: want outcome set, from 0, to 2", l)
		}
	}
	for _, l := range jsonLines() {
		if l["watermark"] != 2.0 || l["behind"] != 0.0 || l["updated_at"] == nil {
			t.Errorf("-json after -set-to-head: %v; want watermark 2, behind 0, updated_at set", l)
		}
	}

	// A state file without the output (a twin of an older stack) is a usage error naming it.
	if _, err := WriteDevState(DevState{PID: os.Getpid(), DynamoDBEndpoint: aws.ToString(db.Options().BaseEndpoint), EventsTable: eventsTable}); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "watermarks", "-local"); code != ExitUsage || !strings.Contains(stderr, keys.OutputStateTable) {
		t.Errorf("watermarks -local without the state table output: exit %d, stderr %q; want exit %d naming %s", code, stderr, ExitUsage, keys.OutputStateTable)
	}
}

// routedBy names the DURABLE subscriptions of cat that eventType routes to.
func routedBy(cat *catalog.Catalog, eventType string) map[string]bool {
	out := map[string]bool{}
	for _, sp := range cat.Matching(eventType) {
		if sp.Lane == catalog.Durable {
			out[sp.Name] = true
		}
	}
	return out
}
