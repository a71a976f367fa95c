package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/fourlanes/fourlanes/examples/library"
	"github.com/fourlanes/fourlanes/examples/library/loans"
	"github.com/fourlanes/fourlanes/examples/library/reminders"
	"github.com/fourlanes/fourlanes/pkg/catalog"
	"github.com/fourlanes/fourlanes/pkg/erasure"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// vault is the library service's vault on the twin: the subject-keys table
// and data key the stack made (its catalog declares loan.opened's email
// personal), through the twin's KMS.
func (s *stack) vault(t *testing.T) func(*eventstore.Config) {
	t.Helper()
	v, err := s.newVault()
	if err != nil {
		t.Fatal(err)
	}
	return erasure.Use(v)
}

func (s *stack) newVault() (*erasure.Vault, error) {
	kc := kms.NewFromConfig(localaws.Config(), func(o *kms.Options) { o.BaseEndpoint = aws.String(s.tw.KMSEndpoint()) })
	return erasure.New(s.ddb, kc, erasure.Config{Table: s.env[keys.EnvSubjectKeysTable], KeyID: s.env[keys.EnvDataKeyID]})
}

// remindersTo returns the "to" of every reminder the functions logged, by
// member.
func (s *stack) remindersTo() map[string][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]string{}
	for _, l := range s.lines {
		_, text, _ := strings.Cut(l, ": ")
		var line struct {
			Msg    string `json:"msg"`
			Member string `json:"member"`
			To     string `json:"to"`
		}
		if json.Unmarshal([]byte(text), &line) == nil && line.Msg == reminders.Sent {
			out[line.Member] = append(out[line.Member], line.To)
		}
	}
	return out
}

// TestErasureOnTwin is erasure end to end on the library's stack: the
// member's email is stored sealed (no row of the log holds it) and reaches
// the DURABLE reminder in the clear; `fourlanes erase` erases member-2
// while its loan's delivery is held before reading the member's key, and
// the reminder then reads "[erased]"; a new loan for an erased member is
// refused with nothing written; the export still verifies offline, bytes
// unchanged, and reconcile finds the chain intact.
func TestErasureOnTwin(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startLibrary(t)
	fs := newFaults(t)
	ctx := context.Background()
	const tenant = "erase-branch"
	tctx := tenancy.MustWithTenant(ctx, tenant)
	eventsTable, keysTable := s.env[keys.EnvEventsTable], s.env[keys.EnvSubjectKeysTable]
	if keysTable == "" || s.env[keys.EnvDataKeyID] == "" {
		t.Fatalf("dlq-repair has no %s/%s: the stack made no erasure resources: %v", keys.EnvSubjectKeysTable, keys.EnvDataKeyID, s.env)
	}
	if _, err := library.App.EventStore(s.ddb, eventsTable); err == nil || !strings.Contains(err.Error(), "personal") {
		t.Fatalf("an event store without a vault for a catalog with personal fields: %v; want a refusal", err)
	}
	v, err := s.newVault()
	if err != nil {
		t.Fatal(err)
	}
	events, err := library.App.EventStore(s.ddb, eventsTable, erasure.Use(v))
	if err != nil {
		t.Fatal(err)
	}
	desk := &loans.Service{Events: events, Table: s.env[loans.EnvTable]}

	// member-1: delivered in the clear.
	if _, err := desk.Open(tctx, "isbn-1", "member-1", "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "member-1's reminder", func() (bool, string) {
		got := s.remindersTo()["member-1"]
		return len(got) == 1, strings.Join(got, ",")
	})
	if got := s.remindersTo()["member-1"]; got[0] != "ada@example.com" {
		t.Fatalf("member-1's reminder went to %q; want the opened email", got[0])
	}

	// member-2: its key exists (sealed once), then its delivery is held
	// just before the consumer reads the member's key, and the member is
	// erased meanwhile.
	if _, err := v.Seal(ctx, tenant, "member-2", "warm", "x"); err != nil {
		t.Fatal(err)
	}
	fs.arm(fault{Action: "GetItem", Table: keysTable, Match: keys.SubjectKeyPrefix + "member-2", Kind: "stall", DelayMs: 5_000})
	if _, err := desk.Open(tctx, "isbn-2", "member-2", "bob@example.com"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the consumer's read of member-2's key held", func() (bool, string) {
		n := fs.left("GetItem", keysTable)
		return n == 0, "not yet"
	})
	code, out, errOut := s.cli2("erase", "-table", keysTable, "-tenant", tenant, "-subject", "member-2", "-by", "dpo@example.com", "-reason", "request 7")
	if code != 0 || !strings.Contains(out, "erased at") {
		t.Fatalf("fourlanes erase: %d %q %q", code, out, errOut)
	}
	eventually(t, 60*time.Second, "member-2's reminder", func() (bool, string) {
		got := s.remindersTo()["member-2"]
		return len(got) == 1, strings.Join(got, ",")
	})
	if got := s.remindersTo()["member-2"]; got[0] != catalog.Erased {
		t.Fatalf("member-2's reminder, delivered after the erasure, went to %q; want %q", got[0], catalog.Erased)
	}

	// A new loan for the erased member is refused; nothing is written. (A
	// vault that read the member's key before the erasure may use it for
	// up to its cache TTL: this service's did, so a fresh one stands for it
	// a minute later.)
	fresh, err := s.newVault()
	if err != nil {
		t.Fatal(err)
	}
	later, err := library.App.EventStore(s.ddb, eventsTable, erasure.Use(fresh))
	if err != nil {
		t.Fatal(err)
	}
	desk = &loans.Service{Events: later, Table: s.env[loans.EnvTable]}
	if _, err := desk.Open(tctx, "isbn-3", "member-2", "bob@new.example.com"); !errors.Is(err, catalog.ErrErased) {
		t.Fatalf("a loan for an erased member: %v; want ErrErased", err)
	}
	evs, err := events.AllEvents(ctx, tenant)
	if err != nil || len(evs) != 2 {
		t.Fatalf("log of %s: %d events, %v; want 2", tenant, len(evs), err)
	}

	// The log never held an email; the export verifies offline.
	dir := t.TempDir()
	file := filepath.Join(dir, tenant+".jsonl")
	if code, out, errOut := s.cli2("export", "-tenant", tenant, "-table", eventsTable, "-o", file); code != 0 {
		t.Fatalf("export: %d %q %q", code, out, errOut)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, email := range []string{"ada@example.com", "bob@example.com"} {
		if strings.Contains(string(raw), email) {
			t.Fatalf("the export holds %s in the clear", email)
		}
	}
	if !strings.Contains(string(raw), erasure.Prefix) {
		t.Fatalf("the export holds no sealed value:\n%s", raw)
	}
	if code, out, errOut := s.cli2("verify", file); code != 0 || !strings.Contains(out, "OK") {
		t.Fatalf("verify after the erasure: %d %q %q", code, out, errOut)
	}
	if r := s.reconcile(tenant); r.ChainIntact == nil || !*r.ChainIntact || r.LastSeq != 2 {
		t.Fatalf("reconcile after the erasure: %+v", r)
	}
	// member-1 is still readable; member-2 reads as erased everywhere.
	cat, err := library.App.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	cat.UseVault(fresh)
	for i, want := range []string{"ada@example.com", catalog.Erased} {
		p, err := cat.Decode(evs[i])
		if err != nil {
			t.Fatal(err)
		}
		if got := p.(*loans.OpenedV1).Email; got != want {
			t.Errorf("event %d decoded email %q; want %q", i+1, got, want)
		}
	}
}
