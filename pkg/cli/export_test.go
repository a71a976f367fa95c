package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fourlanes/fourlanes/internal/localaws"
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
	file := filepath.Join(t.TempDir(), "acme.jsonl")
	code, _, stderr := runCLI(t, "export", "-table", table, "-tenant", "acme", "-o", file)
	if code != ExitOK || !strings.Contains(stderr, "exported tenant acme: 3 events, head last_seq 3") {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	code, out, stderr := runCLI(t, "verify", file)
	if code != ExitOK || !strings.Contains(out, "OK tenant acme: 3 events verified from genesis; head last_seq 3 matches") {
		t.Fatalf("verify: exit %d: %s %s", code, out, stderr)
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
	if code, _, stderr := runCLI(t, "export", "-table", table, "-tenant", "nobody", "-o", empty); code != ExitOK || !strings.Contains(stderr, "no events") {
		t.Errorf("empty tenant: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Errorf("empty tenant: %s exists (%v); want no file", empty, err)
	}
	if code, _, stderr := runCLI(t, "export", "-table", table); code != ExitUsage || !strings.Contains(stderr, "-tenant is required") {
		t.Errorf("no tenant: exit %d: %s", code, stderr)
	}
}
