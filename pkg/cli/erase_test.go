package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/fourlanes/fourlanes/internal/localaws"
	"github.com/fourlanes/fourlanes/pkg/erasure"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestErase: erase writes the tombstone with who and why and prints the
// subject's state; -status reads without writing; a missing -by or -reason,
// tenant or subject is a usage error (exit 2) and writes nothing.
func TestErase(t *testing.T) {
	db := localaws.DynamoDB(t)
	localAWSEnv(t, aws.ToString(db.Options().BaseEndpoint))
	table := aws.ToString(localaws.CreateTable(t, db, keys.PKSKTable(localaws.UniqueName(t, "subject-keys"))).TableName)

	code, out, errOut := runCLI(t, "erase", "-table", table, "-tenant", "acme", "-subject", "c-1", "-status", "-json")
	if code != 0 || !strings.Contains(out, `"known":false`) {
		t.Fatalf("status of an unknown subject: %d %q %q", code, out, errOut)
	}
	for _, args := range [][]string{
		{"-tenant", "acme", "-subject", "c-1", "-by", "dpo"},
		{"-tenant", "acme", "-subject", "c-1", "-reason", "r"},
		{"-tenant", "acme", "-by", "dpo", "-reason", "r"},
		{"-subject", "c-1", "-by", "dpo", "-reason", "r"},
		{"-tenant", "acme", "-subject", "c-1", "-status", "-by", "dpo"},
	} {
		code, _, errOut := runCLI(t, append([]string{"erase", "-table", table}, args...)...)
		if code != ExitUsage {
			t.Errorf("erase %v: exit %d (%s); want %d", args, code, errOut, ExitUsage)
		}
	}
	subjects, err := erasure.NewSubjects(db, table)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := subjects.Status(context.Background(), "acme", "c-1"); st.Known {
		t.Fatalf("a refused erase wrote: %+v", st)
	}

	code, out, errOut = runCLI(t, "erase", "-table", table, "-tenant", "acme", "-subject", "c-1", "-by", "dpo@example.com", "-reason", "ticket 42")
	if code != 0 || !strings.Contains(out, "erased at") || !strings.Contains(out, "dpo@example.com") {
		t.Fatalf("erase: %d %q %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, "erase", "-table", table, "-tenant", "acme", "-subject", "c-1", "-status", "-json")
	var st struct {
		Tenant, Subject string
		erasure.Status
	}
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || !st.Erased || st.Reason != "ticket 42" || st.Subject != "c-1" {
		t.Fatalf("status after erase: %d %q %v", code, out, err)
	}
}
