package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestBackfillOnTheTwin: on the orders stack, a backfill of the email
// subscription through the CLI and the deployed dlq-repair: every event was
// delivered by the lane already, so it runs no handler again (each email
// once), ends done, and reconcile reports the subscription's start and the
// backfill's position; the deadletters listing finds none.
func TestBackfillOnTheTwin(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go
	s := startStack(t, nil)
	evs := pastOrders(t, s, "acme", 3)
	s.waitDelivered(t, evs)
	eventually(t, 60*time.Second, "acme's watermark at its head", func() (bool, string) {
		r := s.audit(t, "acme")
		return r.Subscriptions[0].Watermark == r.LastSeq, fmt.Sprintf("%+v", r)
	})
	name, err := s.tw.FunctionName(s.fn[keys.FnDLQRepair])
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := s.cli2("backfill", "-function", name, "-subscription", emailSub, "-tenant", "acme", "-from", "1", "-rate", "100", "-json")
	if code != 0 {
		t.Fatalf("backfill: exit %d\n%s\n%s", code, out, errOut)
	}
	var rep struct {
		Backfill struct {
			Done    bool `json:"done"`
			Tenants []struct {
				Tenant    string `json:"tenant"`
				From, To  int64
				Position  int64 `json:"position"`
				Delivered int   `json:"delivered"`
				Already   int   `json:"already"`
				Status    string
			} `json:"tenants"`
		} `json:"backfill"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("backfill output %q: %v", out, err)
	}
	b := rep.Backfill
	if !b.Done || len(b.Tenants) != 1 || b.Tenants[0].Position != int64(len(evs)) || b.Tenants[0].Delivered != 0 || b.Tenants[0].Already != len(evs) {
		t.Errorf("backfill: %+v, want done through seq %d, nothing delivered again, %d already delivered", b, len(evs), len(evs))
	}
	if !strings.Contains(errOut, "fourlanes backfill: run 1: acme "+emailSub) {
		t.Errorf("no progress line on stderr:\n%s", errOut)
	}
	s.checkEmailsOnce(t, evs)

	raw := s.reconcileCLI("-url", s.url, "-tenant", "acme")
	var r struct {
		Subscriptions []struct {
			Subscription string `json:"subscription"`
			Start        string `json:"start"`
			Backfill     *struct {
				Position int64  `json:"position"`
				Status   string `json:"status"`
			} `json:"backfill"`
		} `json:"subscriptions"`
	}
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		t.Fatal(err)
	}
	if sd := r.Subscriptions[0]; !strings.HasPrefix(sd.Start, "live since ") || sd.Backfill == nil || sd.Backfill.Status != "done" || sd.Backfill.Position != int64(len(evs)) {
		t.Errorf("reconcile: %s", raw)
	}

	code, out, errOut = s.cli2("deadletters", "-state-table", s.env[keys.EnvStateTable], "-json")
	if code != 0 || strings.TrimSpace(out) != "" {
		t.Errorf("deadletters: exit %d, %q %q; want none, exit 0", code, out, errOut)
	}
}
