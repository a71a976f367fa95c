package main

import (
	"go/token"
	"os"
	"path/filepath"
	"testing"
)

// The event-path section counts a block as the event's when its count grew
// between the setup-only profile and the full one, and groups files as
// fourlanes, third-party, or not counted.
func TestEventPathCounting(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	setup, err := readProfile(write("setup.cov", "mode: atomic\n"+
		modulePath+"pkg/a/a.go:1.1,2.2 3 1\n"+
		modulePath+"pkg/a/a.go:3.1,4.2 2 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	full, err := readProfile(write("full.cov", "mode: atomic\n"+
		modulePath+"pkg/a/a.go:1.1,2.2 3 1\n"+
		modulePath+"pkg/a/a.go:3.1,4.2 2 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	k1, k2 := modulePath+"pkg/a/a.go:1.1,2.2", modulePath+"pkg/a/a.go:3.1,4.2"
	if full[k1].count > setup[k1].count {
		t.Errorf("a block setup already ran as often counts as the event's: %+v vs %+v", full[k1], setup[k1])
	}
	if full[k2].count <= setup[k2].count || full[k2].stmts != 2 {
		t.Errorf("the event's block: %+v vs %+v", full[k2], setup[k2])
	}
	if _, err := readProfile(write("bad.cov", "mode: atomic\nx.go:1.1,2.2 three 1\n")); err == nil {
		t.Error("a malformed profile line was read without an error")
	}
	for file, want := range map[string]string{
		modulePath + "pkg/delivery/batch.go":               "fourlanes",
		modulePath + "examples/orders/orders/orders.go":    "fourlanes",
		modulePath + "internal/localaws/testing.go":        "",
		modulePath + "twin/localaws/kit.go":                "",
		modulePath + "test/eventpath/eventpath_test.go":    "",
		"github.com/aws/aws-sdk-go-v2/aws/config.go":       "",
		"github.com/google/uuid/uuid.go":                   "third-party",
		"vendor/golang.org/x/net/http2/hpack/hpack.go":     "",
		"crypto/internal/entropy/v1.0.0/entropy.go":        "",
		"github.com/cockroachdb/apd/v3/decimal.go":         "third-party",
		"golang.org/x/tools/go/packages/packages.go":       "third-party",
		"github.com/prozz/aws-embedded-metrics-golang/emf": "third-party",
	} {
		if got := pathGroup(file); got != want {
			t.Errorf("pathGroup(%s) = %q, want %q", file, got, want)
		}
	}
}

// The entries count calls inside the blocks the event ran, and the CPU
// figures come from the benchmark's own metric columns.
func TestEventPathEntriesAndMetrics(t *testing.T) {
	file, sp, ok := parseBlock(modulePath + "pkg/a/a.go:10.5,12.3")
	if !ok || file != modulePath+"pkg/a/a.go" || sp != (span{10, 5, 12, 3}) {
		t.Fatalf("parseBlock = %q %+v %v", file, sp, ok)
	}
	for _, tc := range []struct {
		line, col int
		want      bool
	}{{10, 5, true}, {11, 1, true}, {12, 3, true}, {10, 4, false}, {12, 4, false}, {9, 80, false}} {
		if got := sp.holds(token.Position{Line: tc.line, Column: tc.col}); got != tc.want {
			t.Errorf("span %+v holds %d.%d = %v, want %v", sp, tc.line, tc.col, got, tc.want)
		}
	}
	if _, _, ok := parseBlock("no-position"); ok {
		t.Error("parseBlock read a key without a position")
	}
	out := "goos: linux\nBenchmarkEventPath-2   \t     300\t   9914614 ns/op\t      3175 deliver-cpu-us/event\t       878.6 emit-cpu-us/event\t       199.0 enrich-cpu-us/event\nPASS\n"
	m, err := parseBenchMetrics(out, "BenchmarkEventPath")
	if err != nil || m["emit-cpu-us/event"] != 878.6 || m["deliver-cpu-us/event"] != 3175 || m["enrich-cpu-us/event"] != 199 {
		t.Fatalf("parseBenchMetrics = %v, %v", m, err)
	}
	if _, err := parseBenchMetrics("PASS\n", "BenchmarkEventPath"); err == nil {
		t.Error("a run without the benchmark's line parsed")
	}
}
