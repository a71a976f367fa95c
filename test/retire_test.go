package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/repair"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/test/relay"
	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// retireGrace is the twin stack's grace period (keys.EnvRetireGrace).
const retireGrace = 3 * time.Second

// TestRetireOnTheTwin: the relay delivers to pager.page, then dlq-repair is
// redeployed from a build without pager (test/relay/retired). Its first run
// finds pager.page undeclared, by its watermark, and a subscription removed
// long ago that left only its start, and keeps both through the grace
// period (shortened by FOURLANES_RETIRE_GRACE); the first run after it
// removes pager.page's watermark and both starts, loudly (an INFO line per
// tenant, the SubscriptionRetired metric), and leaves triage.ticket, still
// declared, alone.
func TestRetireOnTheTwin(t *testing.T) {
	t.Parallel() // see parallel in harness_test.go: no fault rules
	s, desk := startRelay(t, func(tm *cfn.Template) {
		for _, r := range tm.OfType(cfn.TypeFunction) {
			r.SetProp(retireGrace.String(), "Environment", "Variables", keys.EnvRetireGrace)
		}
	})
	ctx := context.Background()
	const tenant, longGone = "retire-a", "welcome.long-gone"
	opened, err := desk.Open(tenancy.MustWithTenant(ctx, tenant), "r-1", "!fan noise")
	if err != nil {
		t.Fatal(err)
	}
	s.waitPaged(t, opened)
	state := delivery.NewDynamoStore(s.ddb, s.env[keys.EnvStateTable])
	if _, err := state.BeginSubscription(ctx, delivery.SubStart{Subscription: longGone, StartedAt: time.Now().Add(-30 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	have := func() (paged, triaged, pagerStart, goneStart bool) {
		t.Helper()
		marks, err := state.Watermarks(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		_, paged = marks[relay.SubPage]
		_, triaged = marks[relay.SubTriage]
		_, pagerStart, err = state.SubscriptionStart(ctx, relay.SubPage)
		if err != nil {
			t.Fatal(err)
		}
		_, goneStart, err = state.SubscriptionStart(ctx, longGone)
		if err != nil {
			t.Fatal(err)
		}
		return paged, triaged, pagerStart, goneStart
	}
	eventually(t, 60*time.Second, "pager.page's watermark of "+tenant, func() (bool, string) {
		p, _, _, _ := have()
		return p, "no watermark yet"
	})

	root, err := localaws.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	build := t.TempDir()
	if err := twin.BuildHost(ctx, root, "test/relay/retired/functions", build, []string{keys.FnDLQRepair}); err != nil {
		t.Fatal(err)
	}
	f, err := s.tw.Function(s.fn[keys.FnDLQRepair])
	if err != nil {
		t.Fatal(err)
	}
	f.Redeploy(filepath.Join(build, keys.FnDLQRepair, "bootstrap"))

	retiring := func(out string) map[string]repair.Retiring {
		t.Helper()
		var rep struct {
			Retiring []repair.Retiring `json:"retiring"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("repair output %q: %v", out, err)
		}
		got := map[string]repair.Retiring{}
		for _, r := range rep.Retiring {
			got[r.Subscription] = r
		}
		return got
	}
	_, out := s.repair()
	got := retiring(out)
	if len(got) != 2 || got[relay.SubPage].RetiredAt != "" || got[longGone].RetiredAt != "" {
		t.Fatalf("first run without pager: retiring %v; want %s and %s in their grace period: %s", got, relay.SubPage, longGone, out)
	}
	if p, tr, ps, gs := have(); !p || !tr || !ps || !gs {
		t.Fatalf("in the grace period: pager watermark %v, triage watermark %v, pager start %v, %s start %v; want all kept", p, tr, ps, longGone, gs)
	}
	if len(s.lineFields(t, keys.FnDLQRepair, "a DURABLE subscription with state is no longer declared: dlq-repair retires it after the grace period",
		"subscription", longGone)) != 1 {
		t.Errorf("dlq-repair did not warn once that %s is undeclared", longGone)
	}

	time.Sleep(retireGrace + time.Second)
	_, out = s.repair()
	got = retiring(out)
	if got[relay.SubPage].RetiredAt == "" || got[longGone].RetiredAt == "" || got[relay.SubPage].Tenants != 1 {
		t.Errorf("after the grace period: retiring %v; want both retired, pager.page of one tenant: %s", got, out)
	}
	if p, tr, ps, gs := have(); p || !tr || ps || gs {
		t.Errorf("after the grace period: pager watermark %v, triage watermark %v, pager start %v, %s start %v; want only triage's watermark left",
			p, tr, ps, longGone, gs)
	}
	if len(s.lineFields(t, keys.FnDLQRepair, "retired a subscription's state of a tenant", "subscription", relay.SubPage)) != 1 {
		t.Errorf("dlq-repair logged no INFO line retiring %s of %s", relay.SubPage, tenant)
	}
	if !s.emfSeen(keys.FnDLQRepair, keys.MetricSubscriptionRetired, `"Subscription":"`+relay.SubPage+`"`) {
		t.Errorf("dlq-repair counted no %s for %s", keys.MetricSubscriptionRetired, relay.SubPage)
	}
}
