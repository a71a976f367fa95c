package reconcile_test

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/pkg/tenancy/tenancytest"
)

// hotEvents is how many events emitSharded writes on each of hot's chains.
var hotEvents = map[string]int{"hot": 4, "hot~5": 3, "hot~17": 2}

// emitSharded writes hotEvents through a store that splits tenant hot into
// tenancy.MaxShards chain shards, each event with a shard key that goes to
// the chain wanted, and 2 events for an unsharded tenant, cold.
func (e *env) emitSharded(t *testing.T) {
	t.Helper()
	s, err := eventstore.New(e.db, eventstore.Config{Table: e.eventsTable, Catalog: testCatalog{},
		Shards: map[string]int{"hot": tenancy.MaxShards}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := tenancy.MustWithTenant(t.Context(), "hot")
	for _, ch := range []string{"hot~17", "hot", "hot~5"} {
		_, k := tenancy.SplitChain(ch)
		for i := range hotEvents[ch] {
			ev, err := s.EmitWith(ctx, eventstore.EmitInput{Type: "order.placed",
				Payload: map[string]any{"order_id": fmt.Sprintf("o-%d", i), "total_cents": 100 + i}, ShardKey: tenancytest.KeyFor(k, tenancy.MaxShards)})
			if err != nil {
				t.Fatal(err)
			}
			if ev.TenantID != ch {
				t.Fatalf("event on chain %q, want %q", ev.TenantID, ch)
			}
		}
	}
	e.emit(t, "cold", 2)
}

// shardReports returns the body's shards, as reports.
func shardReports(t *testing.T, body map[string]any) []map[string]any {
	t.Helper()
	raw, ok := body["shards"].([]any)
	if !ok {
		t.Fatalf("shards: got %v (%T), want a list in %v", body["shards"], body["shards"], body)
	}
	var out []map[string]any
	for _, r := range raw {
		out = append(out, r.(map[string]any))
	}
	return out
}

func TestShardedTenantWalkedTogether(t *testing.T) {
	e := newEnv(t, nil)
	e.emitSharded(t)

	body := e.get(t, "tenant=hot")
	// The tenant's own chain's report, as for any tenant.
	want(t, body, map[string]any{"tenant": "hot", "chain_intact": true, "complete": true, "verified": 4, "last_seq": 4, "verified_through": 4, "cursor": nil})
	// Its shards', in shard order, and the summary.
	want(t, body, map[string]any{"chains": 3, "chains_intact": true, "broken_chains": []any{}})
	sh := shardReports(t, body)
	if len(sh) != 2 {
		t.Fatalf("shards: got %d reports, want 2 (hot~5, hot~17): %v", len(sh), sh)
	}
	for i, ch := range []string{"hot~5", "hot~17"} {
		want(t, sh[i], map[string]any{"tenant": ch, "chain_intact": true, "complete": true, "verified": hotEvents[ch], "verified_through": hotEvents[ch], "checkpoint_seq": hotEvents[ch]})
		if _, ok := sh[i]["cursor"]; ok {
			t.Errorf("shard report %s carries a cursor: %v", ch, sh[i])
		}
	}

	// A tenant with one chain answers as before: no shard fields.
	body = e.get(t, "tenant=cold")
	want(t, body, map[string]any{"tenant": "cold", "chain_intact": true, "verified": 2})
	for _, f := range []string{"shards", "chains", "chains_intact", "broken_chains"} {
		if _, ok := body[f]; ok {
			t.Errorf("tenant=cold: %s present in %v; want it only for a sharded tenant", f, body)
		}
	}

	// A chain's name walks that chain alone.
	body = e.get(t, "tenant=hot~5&full=true")
	want(t, body, map[string]any{"tenant": "hot~5", "chain_intact": true, "complete": true, "verified": 3, "mode": "full", "cursor": nil})
	if _, ok := body["shards"]; ok {
		t.Errorf("tenant=hot~5: shards present in %v; want that chain alone", body)
	}

	// The sweep still lists each chain as a tenant of its own.
	body = e.get(t, "")
	var listed []string
	for _, r := range body["tenants"].([]any) {
		listed = append(listed, r.(map[string]any)["tenant"].(string))
	}
	slices.Sort(listed)
	if w := []string{"cold", "hot", "hot~17", "hot~5"}; !slices.Equal(listed, w) {
		t.Errorf("GET /: tenants %v, want %v", listed, w)
	}
}

func TestShardedTenantBreakInOneShard(t *testing.T) {
	e := newEnv(t, nil)
	e.emitSharded(t)
	e.editPayload(t, "hot~5", 2)

	body := e.get(t, "tenant=hot")
	want(t, body, map[string]any{"tenant": "hot", "chain_intact": true, "first_break": nil})
	want(t, body, map[string]any{"chains": 3, "chains_intact": false, "broken_chains": []any{"hot~5"}, "cursor": nil})
	sh := shardReports(t, body)
	if len(sh) != 2 {
		t.Fatalf("shards: got %d reports, want 2: %v", len(sh), sh)
	}
	want(t, sh[0], map[string]any{"tenant": "hot~5", "chain_intact": false, "verified_through": 1})
	if seq, reason := breakOf(t, sh[0]); seq != 2 || reason != string(chain.ReasonHashMismatch) {
		t.Errorf("hot~5: break at %d (%s), want 2 (%s)", seq, reason, chain.ReasonHashMismatch)
	}
	// The break does not stop the walk of the chains after it.
	want(t, sh[1], map[string]any{"tenant": "hot~17", "chain_intact": true, "complete": true, "verified": 2})
}

// A budget of 2 events pages across the chains: every page verifies at most
// 2, every event is verified exactly once, and each chain's walk resumes
// where the previous page left it. A break found on an early page is still
// in the last page's summary.
func TestShardedTenantPaged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper string // chain whose seq 2 is edited
	}{{"intact", ""}, {"hot~5 broken", "hot~5"}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.emitSharded(t)
			if tc.tamper != "" {
				e.editPayload(t, tc.tamper, 2)
			}
			verified := map[string]int64{} // per chain, as the reports count it (across resumed calls)
			through := map[string]int64{}  // per chain, verified_through
			done := map[string]bool{}
			var firsts []string // each page's top-level chain
			q := "tenant=hot&max_events=2"
			var last map[string]any
			for page := 1; ; page++ {
				if page > 20 {
					t.Fatal("more than 20 pages for 9 events")
				}
				body := e.get(t, q)
				last = body
				firsts = append(firsts, body["tenant"].(string))
				var pageVerified int64
				for _, rep := range append([]map[string]any{body}, shardReports(t, body)...) {
					ch := rep["tenant"].(string)
					if done[ch] {
						t.Fatalf("page %d: chain %s reported again after its walk completed", page, ch)
					}
					n := num(t, rep, "verified")
					if n < verified[ch] {
						t.Fatalf("page %d: chain %s verified %d, fewer than %d before: its walk restarted", page, ch, n, verified[ch])
					}
					// The events this page verified are exactly the seqs after the
					// previous page's verified_through: none again, none skipped.
					vt := num(t, rep, "verified_through")
					if n-verified[ch] != vt-through[ch] {
						t.Errorf("page %d: chain %s verified %d more events but moved verified_through %d -> %d", page, ch, n-verified[ch], through[ch], vt)
					}
					pageVerified += n - verified[ch]
					verified[ch], through[ch] = n, vt
					done[ch] = rep["complete"] == true
				}
				if pageVerified > 2 {
					t.Errorf("page %d verified %d events, want at most max_events=2", page, pageVerified)
				}
				cur, _ := body["cursor"].(string)
				if cur == "" {
					break
				}
				if body["chains_intact"] == true {
					t.Errorf("page %d: chains_intact true while a cursor remains", page)
				}
				q = "tenant=hot&max_events=2&cursor=" + url.QueryEscape(cur)
			}
			t.Logf("%d pages, each beginning at %v", len(firsts), firsts)
			wantVerified := map[string]int64{"hot": 4, "hot~5": 3, "hot~17": 2}
			wantBroken := []any{}
			if tc.tamper != "" {
				wantVerified[tc.tamper] = 1 // the walk stops at the break
				wantBroken = []any{tc.tamper}
			}
			for ch, n := range wantVerified {
				if verified[ch] != n || !done[ch] {
					t.Errorf("chain %s: verified %d (complete %v), want %d, complete", ch, verified[ch], done[ch], n)
				}
			}
			if len(firsts) < 3 || firsts[0] != "hot" {
				t.Errorf("pages began at %v; want several, the first at hot", firsts)
			}
			want(t, last, map[string]any{"chains": 3, "chains_intact": tc.tamper == "", "broken_chains": wantBroken})
			if tc.tamper != "" && last["tenant"] == tc.tamper {
				t.Fatalf("the last page walked %s itself; the test wants the break carried from an earlier page", tc.tamper)
			}
		})
	}
}

func TestShardedTenantBadRequests(t *testing.T) {
	e := newEnv(t, nil)
	e.emitSharded(t)
	hotCursor := e.get(t, "tenant=hot&max_events=5")["cursor"].(string) // 4 on hot, 1 on hot~5: in hot~5
	shardCursor := e.get(t, "tenant=hot~5&max_events=1")["cursor"].(string)
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"tenant=hot~99", []string{"tenant", "reserved", "~1 to ~31"}},
		{"tenant=hot~0", []string{"tenant", "reserved", "~1 to ~31"}},
		{"tenant=hot~32", []string{"tenant", "reserved", "~1 to ~31"}},
		{"tenant=hot~05", []string{"tenant", "reserved", "~1 to ~31"}},
		{"tenant=hot~5&cursor=" + url.QueryEscape(hotCursor), []string{"cursor", "tenant=hot ", `chain "hot~5"`}},
		{"tenant=hot&cursor=" + url.QueryEscape(shardCursor), []string{"cursor", "tenant=hot~5"}},
		{"cursor=" + url.QueryEscape(hotCursor), []string{"cursor", "tenant=hot"}},
		// A cursor (well-formed, as a caller could write one) at a chain of
		// hot that has no head row: refused, not taken for the end of the walk.
		{"tenant=hot&cursor=" + base64.RawURLEncoding.EncodeToString([]byte(`{"v":1,"t":"hot","c":"hot~9","m":"incremental"}`)),
			[]string{"cursor", `chain "hot~9"`, "no head row"}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			status, body := e.call(t, "GET", "/", tc.query)
			msg, _ := body["error"].(string)
			if status != 400 {
				t.Fatalf("got %d %v, want 400", status, body)
			}
			t.Logf("400: %s", msg)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not name %q", msg, w)
				}
			}
		})
	}
	// The cursors still work where they belong.
	want(t, e.get(t, "tenant=hot&max_events=100&cursor="+url.QueryEscape(hotCursor)), map[string]any{"tenant": "hot~5", "chains_intact": true, "cursor": nil})
	want(t, e.get(t, "tenant=hot~5&max_events=100&cursor="+url.QueryEscape(shardCursor)), map[string]any{"tenant": "hot~5", "chain_intact": true, "verified_through": 3, "cursor": nil})
}
