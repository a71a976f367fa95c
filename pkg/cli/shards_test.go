package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/pkg/tenancy/tenancytest"
)

// shardedLog writes 3 events on chain hot, 2 on hot~5 and 1 on hot~17
// (tenant hot split into tenancy.MaxShards chain shards) and 2 on an
// unsharded tenant, cold, to a fresh events table; the CLI commands reach
// that DynamoDB through the environment.
func shardedLog(t *testing.T) (db *dynamodb.Client, eventsTable, stateTable string) {
	t.Helper()
	db = localaws.DynamoDB(t)
	eventsTable, stateTable, plain := logTables(t, db)
	store, err := eventstore.New(db, eventstore.Config{Table: eventsTable, Catalog: anyCatalog{}, Shards: map[string]int{"hot": tenancy.MaxShards}})
	if err != nil {
		t.Fatal(err)
	}
	hot := tenancy.MustWithTenant(context.Background(), "hot")
	for shard, n := range map[int]int{0: 3, 5: 2, 17: 1} {
		for i := range n {
			e, err := store.EmitWith(hot, eventstore.EmitInput{Type: "order.placed", Payload: map[string]any{"n": i}, ShardKey: tenancytest.KeyFor(shard, tenancy.MaxShards)})
			if err != nil {
				t.Fatal(err)
			}
			if want := tenancy.Chain("hot", shard); e.TenantID != want {
				t.Fatalf("event on chain %q, want %q", e.TenantID, want)
			}
		}
	}
	cold := tenancy.MustWithTenant(context.Background(), "cold")
	for i := range 2 {
		if _, err := plain.Emit(cold, "order.placed", map[string]any{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	localAWSEnv(t, aws.ToString(db.Options().BaseEndpoint))
	return db, eventsTable, stateTable
}

// export of a tenant with chain shards exports its own chain and says,
// loudly, which chains it left out; a shard's chain exports and verifies
// on its own.
func TestExportShardedTenant(t *testing.T) {
	_, table, _ := shardedLog(t)
	dir := t.TempDir()
	const warning = "WARNING: tenant hot has 2 more chains (chain shards): hot~5 hot~17; export each with -tenant <chain>"

	code, _, stderr := runCLI(t, "export", "-table", table, "-tenant", "hot", "-o", filepath.Join(dir, "hot.jsonl"))
	if code != ExitOK || !strings.Contains(stderr, "exported tenant hot: 3 events") || !strings.Contains(stderr, warning) {
		t.Fatalf("export -tenant hot: exit %d, stderr %q; want 3 events exported and %q", code, stderr, warning)
	}
	for chain, n := range map[string]int{"hot~5": 2, "hot~17": 1, "cold": 2} {
		file := filepath.Join(dir, chain+".jsonl")
		code, _, stderr := runCLI(t, "export", "-table", table, "-tenant", chain, "-o", file)
		if code != ExitOK || !strings.Contains(stderr, fmt.Sprintf("exported tenant %s: %d events", chain, n)) || strings.Contains(stderr, "WARNING") {
			t.Errorf("export -tenant %s: exit %d, stderr %q; want %d events and no warning", chain, code, stderr, n)
			continue
		}
		if code, out, stderr := runCLI(t, "verify", file); code != ExitOK || !strings.Contains(out, fmt.Sprintf("OK tenant %s: %d events verified", chain, n)) {
			t.Errorf("verify %s: exit %d: %s %s", chain, code, out, stderr)
		}
	}
	for _, bad := range []string{"hot~0", "hot~32", "hot~99"} {
		if code, _, stderr := runCLI(t, "export", "-table", table, "-tenant", bad); code != ExitUsage || !strings.Contains(stderr, "-tenant") {
			t.Errorf("export -tenant %s: exit %d, stderr %q; want a usage error naming -tenant", bad, code, stderr)
		}
	}
}

// watermarks -tenant T covers every chain of T (watermarks, like heads,
// are per chain); -tenant T~k that chain alone.
func TestWatermarksShardedTenant(t *testing.T) {
	db, eventsTable, stateTable := shardedLog(t)
	cat, err := testApp.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	w, err := newWatermarkTool(db, cat, eventsTable, stateTable)
	if err != nil {
		t.Fatal(err)
	}
	chainsListed := func(tenant string) map[string]string {
		t.Helper()
		var out bytes.Buffer
		if code, err := w.list(context.Background(), tenant, false, &out); err != nil || code != ExitOK {
			t.Fatalf("list %s: exit %d, %v", tenant, code, err)
		}
		heads := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
			f := strings.Fields(line)
			heads[f[0]] = f[3]
		}
		return heads
	}
	if got, want := fmt.Sprint(chainsListed("hot")), "map[hot:3 hot~17:1 hot~5:2]"; got != want {
		t.Errorf("watermarks -tenant hot: chains and heads %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(chainsListed("hot~5")), "map[hot~5:2]"; got != want {
		t.Errorf("watermarks -tenant hot~5: chains and heads %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(chainsListed("cold")), "map[cold:2]"; got != want {
		t.Errorf("watermarks -tenant cold: chains and heads %s, want %s", got, want)
	}
	var out bytes.Buffer
	if _, err := w.setToHead(context.Background(), "hot", false, &out); err != nil {
		t.Fatal(err)
	}
	subs := delivery.ForChain(w.subs, "hot") // the application's, not the heartbeat's
	if want := fmt.Sprintf("%d watermark(s) set", 3*len(subs)); !strings.Contains(out.String(), want) {
		t.Errorf("-set-to-head -tenant hot printed:\n%s\nwant %q (3 chains x %d subscriptions)", out.String(), want, len(subs))
	}
	for _, bad := range []string{"hot~0", "hot~99"} {
		code, _, stderr := runCLI(t, "watermarks", "-table", eventsTable, "-state-table", stateTable, "-tenant", bad)
		if code != ExitUsage || !strings.Contains(stderr, "-tenant") || !strings.Contains(stderr, "reserved") {
			t.Errorf("watermarks -tenant %s: exit %d, stderr %q; want a usage error naming -tenant", bad, code, stderr)
		}
	}
}

// reconcile -tenant T of a tenant with chain shards follows the cursor
// across its chains and exits with a finding when any chain is broken, the
// tenant's own chain being intact.
func TestReconcileShardedTenant(t *testing.T) {
	db, eventsTable, stateTable := shardedLog(t)
	store, err := eventstore.New(db, eventstore.Config{Table: eventsTable})
	if err != nil {
		t.Fatal(err)
	}
	srv := reconcileServer(t, db, store, stateTable)

	code, out, stderr := runCLI(t, "reconcile", "-url", srv.URL+"/", "-tenant", "hot", "-full", "-max-events", "2")
	if code != ExitOK || strings.Count(out, `"cursor": null`) != 1 || !strings.Contains(out, `"chains_intact": true`) {
		t.Fatalf("reconcile -tenant hot: exit %d, stderr %q; want intact, paged to the end:\n%s", code, stderr, out)
	}

	// Forge hot~5's seq 2, keeping its hash.
	key := map[string]types.AttributeValue{
		keys.AttrTenant: &types.AttributeValueMemberS{Value: "hot~5"},
		keys.AttrSeq:    &types.AttributeValueMemberN{Value: "2"},
	}
	got, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(eventsTable), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item == nil {
		t.Fatalf("read hot~5 seq 2: %v", err)
	}
	got.Item[keys.AttrPayload] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "9"}}}
	if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(eventsTable), Item: got.Item}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = runCLI(t, "reconcile", "-url", srv.URL+"/", "-tenant", "hot", "-full")
	if code != ExitFinding || !strings.Contains(stderr, "a chain is broken") || !strings.Contains(out, `"broken_chains": [`+"\n"+`    "hot~5"`) {
		t.Fatalf("reconcile -tenant hot with hot~5 forged: exit %d, stderr %q; want exit %d naming hot~5:\n%s", code, stderr, ExitFinding, out)
	}
	if !strings.Contains(out, `"tenant": "hot",`+"\n"+`  "chain_intact": true`) {
		t.Errorf("the tenant's own chain should be reported intact at the top level:\n%s", out)
	}
}

// TestExportWithoutBatchGetItem: a role granted before chain shards may not
// allow dynamodb:BatchGetItem, with which export looks for a tenant's other
// chains. The export still runs, and says what it could not check. (The
// local DynamoDB's admin API refuses the BatchGetItem calls here.)
func TestExportWithoutBatchGetItem(t *testing.T) {
	db, table, _ := shardedLog(t)
	admin := strings.TrimRight(aws.ToString(db.Options().BaseEndpoint), "/") + "/_fourlanes/faults"
	rule := fmt.Sprintf(`{"action":"BatchGetItem","table":%q,"kind":"error","count":20}`, table)
	resp, err := http.Post(admin, "application/json", strings.NewReader(rule))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("arm the fault: %s", resp.Status)
	}
	// The rule names this test's own table, so what is left of its count
	// touches no other test; it is not cleared (DELETE clears every rule).
	file := filepath.Join(t.TempDir(), "hot.jsonl")
	code, _, stderr := runCLI(t, "export", "-table", table, "-tenant", "hot", "-o", file)
	if code != ExitOK || !strings.Contains(stderr, "exported tenant hot: 3 events") ||
		!strings.Contains(stderr, "WARNING: could not look for tenant hot's other chains") {
		t.Fatalf("export with BatchGetItem refused: exit %d, stderr %q; want the export and a warning that it could not look", code, stderr)
	}
	if code, out, _ := runCLI(t, "verify", file); code != ExitOK || !strings.Contains(out, "OK tenant hot: 3 events verified") {
		t.Errorf("verify: exit %d: %s", code, out)
	}
}
