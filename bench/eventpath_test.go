package main

import (
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
