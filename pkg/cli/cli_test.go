package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/fourlanes/fourlanes/pkg/chain"
	"github.com/fourlanes/fourlanes/pkg/envelope"
)

// run runs the CLI with the tests' application (testapp_test.go), whose event
// types the tests emit.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return Run(ctx, &testApp, args, stdout, stderr)
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestWithoutAnApplication: a build of the CLI without an application
// (cmd/fourlanes) says how to get one for the commands that need its
// catalog, and runs the others.
func TestWithoutAnApplication(t *testing.T) {
	for _, args := range [][]string{
		{"emit", "-tenant", "t1", "-type", "order.paid", "-payload", "{}", "-table", "x"},
		{"watermarks", "-table", "x", "-state-table", "y"},
	} {
		var out, errb bytes.Buffer
		code := Run(context.Background(), nil, args, &out, &errb)
		if code != ExitUsage || !strings.Contains(errb.String(), "needs the application's catalog") || !strings.Contains(errb.String(), "cli.Main(yourapp.App)") {
			t.Errorf("fourlanes %v without an application: exit %d, stderr %q; want exit %d naming cli.Main", args, code, errb.String(), ExitUsage)
		}
	}
	var out, errb bytes.Buffer
	if code := Run(context.Background(), nil, []string{"verify", "-h"}, &out, &errb); code != ExitOK {
		t.Errorf("verify -h without an application: exit %d, stderr %q", code, errb.String())
	}
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, ExitUsage, "Usage:"},
		{[]string{"help"}, ExitOK, "fourlanes reconcile"},
		{[]string{"frobnicate"}, ExitUsage, `unknown command "frobnicate"`},
		{[]string{"reconcile"}, ExitUsage, "no URL: pass -url"},
		{[]string{"reconcile", "-url", "not a url"}, ExitUsage, "is not an absolute URL"},
		{[]string{"repair"}, ExitUsage, "no function: pass -function"},
		{[]string{"verify"}, ExitUsage, "want one FILE"},
		{[]string{"emit", "-tenant", "t1"}, ExitUsage, "-tenant, -type and -payload are required"},
		{[]string{"emit", "-tenant", "t1", "-type", "order.paid", "-payload", "[1]"}, ExitUsage, "is not a JSON object"},
		{[]string{"reconcile", "-nope"}, ExitUsage, "flag provided but not defined"},
		{[]string{"emit", "-tenant", "t1", "-type", "widget.made", "-payload", "{}", "-table", "x"}, ExitUsage, "the application declares no such event type"},
		{[]string{"verify", "-h"}, ExitOK, "Usage: fourlanes verify"},
	} {
		t.Setenv(EnvReconcileURL, "")
		t.Setenv(EnvRepairFunction, "")
		t.Setenv("EVENTS_TABLE", "")
		code, _, stderr := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("fourlanes %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}

// chainOf seals n events of tenant into a chain and its head.
func chainOf(t *testing.T, tenant string, n int) chain.Export {
	t.Helper()
	prev := chain.Genesis(tenant)
	x := chain.Export{}
	for i := 1; i <= n; i++ {
		e := envelope.Envelope{
			ID: fmt.Sprintf("01a20000-0000-7000-8000-%012d", i), Type: "order.paid", TenantID: tenant, Seq: int64(i),
			OccurredAt: "2026-11-29T10:00:00Z", SchemaVersion: 1, PrevHash: prev,
			Payload: map[string]any{"order_id": fmt.Sprint("o", i), "amount_cents": envelopeNumber(t, "100")},
		}
		if err := chain.Seal(&e); err != nil {
			t.Fatal(err)
		}
		prev = e.Hash
		x.Events = append(x.Events, e)
	}
	x.Head = &chain.Head{TenantID: tenant, LastSeq: int64(n), LastHash: prev}
	return x
}

func envelopeNumber(t *testing.T, s string) any {
	t.Helper()
	n, err := envelope.CanonicalNumber("amount_cents", s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writeExport(t *testing.T, x chain.Export) string {
	t.Helper()
	var b bytes.Buffer
	if err := chain.WriteExport(&b, x); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "chain.jsonl")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVerify(t *testing.T) {
	x := chainOf(t, "t1", 3)
	code, out, stderr := runCLI(t, "verify", writeExport(t, x))
	if code != ExitOK || !strings.Contains(out, "OK tenant t1: 3 events verified from genesis; head last_seq 3 matches") {
		t.Fatalf("intact chain: exit %d, %q %q", code, out, stderr)
	}

	tampered := chainOf(t, "t1", 3)
	tampered.Events[1].Payload["order_id"] = "forged"
	code, out, _ = runCLI(t, "verify", writeExport(t, tampered))
	if code != ExitFinding || !strings.Contains(out, "BROKEN tenant t1 at seq 2: hash mismatch") {
		t.Errorf("tampered chain: exit %d, %q; want exit %d naming seq 2", code, out, ExitFinding)
	}

	gap := chainOf(t, "t1", 3)
	gap.Events = append(gap.Events[:1], gap.Events[2:]...)
	code, out, _ = runCLI(t, "verify", writeExport(t, gap))
	if code != ExitFinding || !strings.Contains(out, "at seq 2: missing seq") {
		t.Errorf("gap: exit %d, %q", code, out)
	}

	code, out, _ = runCLI(t, "verify", "-tenant", "t2", writeExport(t, x))
	if code != ExitFinding || !strings.Contains(out, "wrong tenant") {
		t.Errorf("another tenant's chain: exit %d, %q", code, out)
	}

	code, _, stderr = runCLI(t, "verify", filepath.Join(t.TempDir(), "missing.jsonl"))
	if code != ExitError || !strings.Contains(stderr, "no such file") {
		t.Errorf("missing file: exit %d, %q", code, stderr)
	}
}

// Against a loopback URL (the twin), reconcile is unsigned and follows the
// cursor page after page; a broken chain exits 3.
func TestReconcileLocalFollowsCursor(t *testing.T) {
	var mu sync.Mutex
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		if r.Header.Get("Authorization") != "" {
			t.Errorf("a loopback call was signed")
		}
		switch r.URL.Query().Get("cursor") {
		case "":
			fmt.Fprint(w, `{"complete":false,"cursor":"c2","tenants":[{"tenant":"a","chain_intact":true}]}`)
		case "c2":
			fmt.Fprint(w, `{"complete":true,"cursor":null,"tenants":[{"tenant":"b","chain_intact":false,"first_break":{"seq":7,"reason":"hash mismatch"}}]}`)
		}
	}))
	defer srv.Close()
	code, out, stderr := runCLI(t, "reconcile", "-url", srv.URL+"/")
	if code != ExitFinding || !strings.Contains(stderr, "a chain is broken") || strings.Count(out, `"tenant"`) != 2 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if fmt.Sprint(queries) != "[ cursor=c2]" {
		t.Errorf("queries: %q", queries)
	}
}

func TestReconcileHTTPErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("tenant") == "forbidden" {
			http.Error(w, `{"Message":"Forbidden"}`, http.StatusForbidden)
			return
		}
		http.Error(w, `{"error":"bad tenant"}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	code, _, stderr := runCLI(t, "reconcile", "-url", srv.URL, "-tenant", "forbidden")
	if code != ExitError || !strings.Contains(stderr, "ReconcileCallerPolicyArn") {
		t.Errorf("403: exit %d, %q; want the policy named", code, stderr)
	}
	code, _, stderr = runCLI(t, "reconcile", "-url", srv.URL, "-tenant", "x y")
	if code != ExitError || !strings.Contains(stderr, "400 Bad Request") || !strings.Contains(stderr, "bad tenant") {
		t.Errorf("400: exit %d, %q", code, stderr)
	}
}

// Against AWS, reconcile signs with SigV4 for the lambda service in the
// URL's region.
func TestReconcileSignsSigV4(t *testing.T) {
	var auth, date, token string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, date, token = r.Header.Get("Authorization"), r.Header.Get("X-Amz-Date"), r.Header.Get("X-Amz-Security-Token")
		fmt.Fprint(w, `{"tenant":"t1","chain_intact":true,"cursor":null}`)
	}))
	defer srv.Close()
	c := &reconcileClient{
		http:   srv.Client(),
		creds:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "session"),
		region: regionOfURL("abcdefghij.lambda-url.eu-west-1.on.aws"),
	}
	base, _ := url.Parse(srv.URL + "/")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.get(ctx, base, url.Values{"tenant": {"t1"}}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") || !strings.Contains(auth, "/eu-west-1/lambda/aws4_request") || !strings.Contains(auth, "Signature=") {
		t.Errorf("Authorization: %q", auth)
	}
	if date == "" || token != "session" {
		t.Errorf("X-Amz-Date %q, X-Amz-Security-Token %q", date, token)
	}
	if !isLoopback("127.0.0.1") || !isLoopback("localhost") || isLoopback("abc.lambda-url.eu-west-1.on.aws") {
		t.Error("isLoopback")
	}
}

func TestLocalWithoutTwin(t *testing.T) {
	t.Setenv(EnvTwinDir, t.TempDir())
	code, _, stderr := runCLI(t, "repair", "-local")
	if code != ExitError || !strings.Contains(stderr, "no running twin") {
		t.Errorf("repair -local without a twin: exit %d, %q", code, stderr)
	}
}
