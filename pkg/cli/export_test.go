package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
)

func TestMain(m *testing.M) { localaws.Main(m) }

// TestExportThenVerify appends events with `fourlanes emit` to a table in
// the local DynamoDB, exports the tenant with `fourlanes export` and verifies
// the file with `fourlanes verify`.
func TestExportThenVerify(t *testing.T) {
	db := localaws.DynamoDB(t)
	table := aws.ToString(localaws.CreateTable(t, db, eventstore.TableSchema(localaws.UniqueName(t, "events"))).TableName)
	localAWSEnv(t, aws.ToString(db.Options().BaseEndpoint))

	for _, id := range []string{"o-1", "o-2", "o-3"} {
		code, _, stderr := runCLI(t, "emit", "-table", table, "-tenant", "acme", "-type", "order.placed",
			"-payload", `{"order_id":"`+id+`","customer_email":"zoë@example.com","items":[{"sku":"A-1","qty":2}],"total_cents":1999,"currency":"EUR"}`)
		if code != ExitOK {
			t.Fatalf("emit: exit %d: %s", code, stderr)
		}
	}
	// emit -json: the event on one line.
	code, out, stderr := runCLI(t, "emit", "-json", "-table", table, "-tenant", "other", "-type", "order.paid", "-payload", `{"order_id":"o-1"}`)
	var e envelope.Envelope
	if err := json.Unmarshal([]byte(out), &e); err != nil || code != ExitOK || strings.Count(out, "\n") != 1 || e.Seq != 1 || e.Type != "order.paid" {
		t.Fatalf("emit -json: exit %d, %q (%v) %s; want one line, the event at seq 1", code, out, err, stderr)
	}

	file := filepath.Join(t.TempDir(), "acme.jsonl")
	code, out, stderr = runCLI(t, "export", "-table", table, "-tenant", "acme", "-o", file, "-json")
	if code != ExitOK || !strings.Contains(stderr, "exported tenant acme: 3 events, head last_seq 3") {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	var sum exportSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("export -json: %q: %v; want one JSON line", out, err)
	}
	if want := (exportSummary{Tenant: "acme", Exported: true, File: file, Events: 3, LastSeq: 3, LastHash: sum.LastHash, OtherChains: []string{}}); len(sum.LastHash) != 64 || !reflect.DeepEqual(sum, want) {
		t.Errorf("export -json: %+v; want %+v with a hash", sum, want)
	}
	if code, _, stderr := runCLI(t, "export", "-table", table, "-tenant", "acme", "-json"); code != ExitUsage || !strings.Contains(stderr, "pass -o FILE") {
		t.Errorf("export -json to stdout: exit %d, %q; want a usage error asking for -o FILE", code, stderr)
	}
	code, out, stderr = runCLI(t, "verify", file)
	if code != ExitOK || !strings.Contains(out, "OK tenant acme: 3 events verified from genesis; head last_seq 3 matches") {
		t.Fatalf("verify: exit %d: %s %s", code, out, stderr)
	}
	// -parallel: the same file whatever the readers; out of range is a usage error.
	first, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"1", "3", "8"} {
		other := filepath.Join(t.TempDir(), "acme-"+n+".jsonl")
		if code, _, stderr := runCLI(t, "export", "-table", table, "-tenant", "acme", "-parallel", n, "-o", other); code != ExitOK {
			t.Fatalf("export -parallel %s: exit %d: %s", n, code, stderr)
		}
		if got, err := os.ReadFile(other); err != nil || string(got) != string(first) {
			t.Errorf("export -parallel %s: the file differs from the default's (%v)", n, err)
		}
	}
	for _, n := range []string{"0", "65"} {
		if code, _, stderr := runCLI(t, "export", "-table", table, "-tenant", "acme", "-parallel", n, "-o", file+".x"); code != ExitUsage || !strings.Contains(stderr, "-parallel "+n+": want 1 to 64") {
			t.Errorf("export -parallel %s: exit %d, %q; want a usage error", n, code, stderr)
		}
	}

	// A tampered export fails verification; a tenant without events writes
	// no file; a missing tenant is a usage error.
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(b), `"o-2"`, `"o-9"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runCLI(t, "verify", file); code != ExitFinding || !strings.Contains(out, "BROKEN tenant acme at seq 2: hash mismatch") {
		t.Errorf("tampered export: exit %d: %s", code, out)
	}
	empty := filepath.Join(t.TempDir(), "none.jsonl")
	if code, out, stderr := runCLI(t, "export", "-table", table, "-tenant", "nobody", "-o", empty, "-json"); code != ExitOK || !strings.Contains(stderr, "no events") ||
		!strings.Contains(out, `"exported":false`) {
		t.Errorf("empty tenant: exit %d: %s %s; want exported false", code, out, stderr)
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Errorf("empty tenant: %s exists (%v); want no file", empty, err)
	}
	if code, _, stderr := runCLI(t, "export", "-table", table); code != ExitUsage || !strings.Contains(stderr, "-tenant is required") {
		t.Errorf("no tenant: exit %d: %s", code, stderr)
	}
}
