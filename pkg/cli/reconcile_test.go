package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
)

type anyCatalog struct{}

func (anyCatalog) Prepare(_ string, payload any) (int, map[string]any, error) {
	p, err := envelope.NormalizePayload(payload)
	return 1, p, err
}

// urlHandler serves the real reconcile handler the way a Function URL does: the HTTP
// request becomes a payload-format-2.0 event (raw query string included).
// reconcileServer serves the real reconcile handler over store's log and
// stateTable's dead letters and state as a Function URL on loopback, closed
// when the test ends.
func reconcileServer(t *testing.T, db *dynamodb.Client, store *eventstore.Store, stateTable string) *httptest.Server {
	t.Helper()
	r, err := reconcile.New(reconcile.Config{Log: store, DeadLetters: delivery.NewDynamoStore(db, stateTable), State: reconcile.NewDynamoState(db, stateTable)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(urlHandler(t, reconcile.NewHandler(r, nil)))
	t.Cleanup(srv.Close)
	return srv
}

func urlHandler(t *testing.T, h *reconcile.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := events.LambdaFunctionURLRequest{
			RawPath:        r.URL.Path,
			RawQueryString: r.URL.RawQuery,
			Body:           string(body),
			RequestContext: events.LambdaFunctionURLRequestContext{
				RequestID: "cli-test",
				HTTP:      events.LambdaFunctionURLRequestContextHTTPDescription{Method: r.Method, Path: r.URL.Path},
			},
		}
		resp, err := h.Handle(r.Context(), req)
		if err != nil {
			t.Errorf("handler error: %v", err)
		}
		for k, v := range resp.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(resp.StatusCode)
		io.WriteString(w, resp.Body)
	})
}

// logTables creates a fresh events table and state table on the test run's
// DynamoDB and returns their names and a store that emits to the first.
func logTables(t *testing.T, db *dynamodb.Client) (eventsTable, stateTable string, store *eventstore.Store) {
	t.Helper()
	eventsTable = aws.ToString(localaws.CreateTable(t, db, eventstore.TableSchema(localaws.UniqueName(t, "events"))).TableName)
	stateTable = aws.ToString(localaws.CreateTable(t, db, delivery.StateTableSchema(localaws.UniqueName(t, "state"))).TableName)
	store, err := eventstore.New(db, eventstore.Config{Table: eventsTable, Catalog: anyCatalog{}})
	if err != nil {
		t.Fatal(err)
	}
	return eventsTable, stateTable, store
}

// TestReconcileFlagsReachHandler runs every reconcile flag of the CLI against the real
// reconcile handler over real stores: each is accepted (no 400 for a parameter the
// handler does not know, as `-mode full` once got) and has its effect.
func TestReconcileFlagsReachHandler(t *testing.T) {
	db := localaws.DynamoDB(t)
	_, stateTable, store := logTables(t, db)
	for _, tenant := range []string{"t1", "t2", "t3"} {
		ctx := tenancy.MustWithTenant(context.Background(), tenant)
		for i := range 3 {
			if _, err := store.Emit(ctx, "order.placed", map[string]any{"n": i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	srv := reconcileServer(t, db, store, stateTable)

	type page struct {
		Mode    string `json:"mode"`
		Tenant  string `json:"tenant"`
		Cursor  *string
		Tenants []struct {
			Tenant string `json:"tenant"`
		} `json:"tenants"`
		Verified int64 `json:"verified"`
	}
	pages := func(out string) []page {
		t.Helper()
		var ps []page
		dec := json.NewDecoder(strings.NewReader(out))
		for dec.More() {
			var p page
			if err := dec.Decode(&p); err != nil {
				t.Fatalf("stdout is not a sequence of JSON pages: %v\n%s", err, out)
			}
			ps = append(ps, p)
		}
		return ps
	}
	run := func(args ...string) []page {
		t.Helper()
		code, out, stderr := runCLI(t, append([]string{"reconcile", "-url", srv.URL + "/"}, args...)...)
		if code != ExitOK {
			t.Fatalf("reconcile %v: exit %d: %s", args, code, stderr)
		}
		return pages(out)
	}

	if ps := run("-tenant", "t2"); len(ps) != 1 || ps[0].Tenant != "t2" || ps[0].Mode != "incremental" {
		t.Errorf("-tenant t2: got %+v, want one incremental report of t2", ps)
	}
	if ps := run("-tenant", "t2", "-full"); len(ps) != 1 || ps[0].Mode != "full" || ps[0].Verified != 3 {
		t.Errorf("-full: got %+v, want a full walk verifying 3 events", ps)
	}
	if ps := run("-limit", "1"); len(ps) != 3 {
		t.Errorf("-limit 1 over 3 tenants: got %d pages, want 3", len(ps))
	} else {
		for _, p := range ps {
			if len(p.Tenants) != 1 {
				t.Errorf("-limit 1: a page with %d tenants", len(p.Tenants))
			}
		}
	}
	// -max-events 1 answers with a cursor after one event; the CLI follows it to the end.
	if ps := run("-tenant", "t3", "-full", "-max-events", "1"); len(ps) < 2 {
		t.Errorf("-max-events 1: got %d pages, want the walk split over several", len(ps))
	}
	// -cursor resumes: the first page's cursor, passed back, gives the rest.
	code, out, stderr := runCLI(t, "reconcile", "-url", srv.URL+"/", "-limit", "2")
	if code != ExitOK {
		t.Fatalf("reconcile -limit 2: exit %d: %s", code, stderr)
	}
	first := pages(out)[0]
	if first.Cursor == nil {
		t.Fatalf("first page of 2 over 3 tenants has no cursor: %+v", first)
	}
	if ps := run("-cursor", *first.Cursor, "-limit", "2"); len(ps) != 1 || len(ps[0].Tenants) != 1 || ps[0].Tenants[0].Tenant != "t3" {
		t.Errorf("-cursor: got %+v, want the last tenant t3", ps)
	}
	// Flags the handler would refuse are refused by the CLI first.
	if code, _, stderr := runCLI(t, "reconcile", "-url", srv.URL+"/", "-tenant", "t1", "-limit", "2"); code != ExitUsage || !strings.Contains(stderr, "-limit pages the list of tenants") {
		t.Errorf("-tenant with -limit: exit %d, %q", code, stderr)
	}
	if code, _, stderr := runCLI(t, "reconcile", "-url", srv.URL+"/", "-mode", "full"); code != ExitUsage || !strings.Contains(stderr, "flag provided but not defined: -mode") {
		t.Errorf("-mode: exit %d, %q", code, stderr)
	}
}

// TestReconcileExitsOnFindings: reconcile exits 3 when an answer reports a
// broken chain, dead letters, unsettled events or effects of unknown
// outcome (in a page of tenants, a tenant's own report or a chain shard's),
// and says on stderr which, by tenant; an answer with none exits 0. -json
// prints each answer on one line, the same members.
func TestReconcileExitsOnFindings(t *testing.T) {
	intact := `"chain_intact":true,"dead_letter_count":0,"subscriptions":[{"subscription":"s.email","unsettled":0,"effects_unknown":0}]`
	for _, tc := range []struct {
		name   string
		answer string
		code   int
		stderr []string
	}{
		{"nothing found", `{"tenant":"t1",` + intact + `,"cursor":null}`, ExitOK, nil},
		{"a page of tenants, nothing found", `{"complete":true,"cursor":null,"tenants":[{"tenant":"t1",` + intact + `},{"tenant":"t2",` + intact + `}]}`, ExitOK, nil},
		{"dead letters", `{"tenant":"t1","chain_intact":true,"dead_letter_count":2,"dead_letters":["a","b"],"cursor":null}`,
			ExitFinding, []string{"dead letters: t1 (2)"}},
		{"unsettled events", `{"tenant":"t1","chain_intact":true,"subscriptions":[{"subscription":"s.email","unsettled":4}],"cursor":null}`,
			ExitFinding, []string{"unsettled events: t1 s.email (4)"}},
		{"effects of unknown outcome", `{"tenant":"t1","chain_intact":true,"subscriptions":[{"subscription":"s.email","effects_unknown":1}],"cursor":null}`,
			ExitFinding, []string{"effects of unknown outcome: t1 s.email (1)", "fourlanes effects"}},
		{"a page of tenants with findings", `{"complete":true,"cursor":null,"tenants":[{"tenant":"t1",` + intact + `},` +
			`{"tenant":"t2","chain_intact":false,"first_break":{"seq":3}},{"tenant":"t3","chain_intact":true,"dead_letter_count":1}]}`,
			ExitFinding, []string{"a chain is broken: t2 (", "dead letters: t3 (1)"}},
		{"a chain shard's dead letters", `{"tenant":"hot","chain_intact":true,"shards":[{"tenant":"hot~1","chain_intact":true,"dead_letter_count":5}],` +
			`"chains":2,"chains_intact":true,"cursor":null}`, ExitFinding, []string{"dead letters: hot~1 (5)"}},
		{"a sharded tenant broken", `{"tenant":"hot","chain_intact":true,"shards":[],"chains":2,"chains_intact":false,"broken_chains":["hot~1"],"cursor":null}`,
			ExitFinding, []string{"a chain is broken: hot"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, tc.answer) }))
			defer srv.Close()
			code, out, stderr := runCLI(t, "reconcile", "-url", srv.URL+"/")
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.code, stderr)
			}
			for _, w := range tc.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q; want %q", stderr, w)
				}
			}
			if tc.code == ExitOK && stderr != "" {
				t.Errorf("nothing found, yet stderr %q", stderr)
			}
			if !strings.Contains(out, "\n  \"") {
				t.Errorf("stdout %q; want the answer indented", out)
			}
			code, out, _ = runCLI(t, "reconcile", "-url", srv.URL+"/", "-json")
			var got, want any
			if err := json.Unmarshal([]byte(out), &got); err != nil || code != tc.code || strings.Count(out, "\n") != 1 {
				t.Fatalf("-json: exit %d, %q (%v); want exit %d and one line", code, out, err, tc.code)
			}
			if err := json.Unmarshal([]byte(tc.answer), &want); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("-json: %v; want the answer as it came, %v", got, want)
			}
		})
	}
}

// TestReconcileFindingsAcrossPages: a walk resumed from its cursor reports
// the same tenant again; its findings count once, the last count winning,
// and a long list is cut with how many more there are.
func TestReconcileFindingsAcrossPages(t *testing.T) {
	var f findings
	f.add(reconcilePage{reconcileReport: reconcileReport{Tenant: "t1", DeadLetterCount: 1}})
	f.add(reconcilePage{reconcileReport: reconcileReport{Tenant: "t1", DeadLetterCount: 3}})
	var tenants []reconcileReport
	for i := range 12 {
		tenants = append(tenants, reconcileReport{Tenant: fmt.Sprintf("u%02d", i), DeadLetterCount: 1})
	}
	f.add(reconcilePage{Tenants: tenants})
	var b strings.Builder
	f.write(&b)
	if got := b.String(); !strings.Contains(got, "dead letters: t1 (3), u00 (1),") || !strings.Contains(got, "u08 (1) and 3 more") || strings.Contains(got, "u09") {
		t.Errorf("got %q; want t1 once with 3, the first ten, and 3 more", got)
	}
}
