package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// soakResult is the report TestChaosSoak writes (test/soak_test.go,
// SoakReport) when FOURLANES_SOAK_REPORT names a file.
type soakResult struct {
	Seed              uint64         `json:"seed"`
	Logical           int            `json:"logical_events"`
	Committed         int            `json:"committed"`
	Lost              int            `json:"lost"`
	Doubled           int            `json:"doubled"`
	Chains            int            `json:"chains"`
	ChainsIntact      int            `json:"chains_intact"`
	EmailsLost        int            `json:"emails_lost"`
	EmailsDoubled     int            `json:"emails_doubled"`
	EmailsRedoneNamed int            `json:"emails_redone_named"`
	Unprojected       int            `json:"unprojected"`
	FaultsInjected    map[string]int `json:"faults_injected"`
	Kills             map[string]int `json:"kills"`
	EmitRetries       int            `json:"emit_retries"`
	RepairRuns        int            `json:"repair_runs"`
	WindowSeconds     float64        `json:"window_s"`
	QuiesceSeconds    float64        `json:"quiesce_s"`
}

// benchSoak runs the chaos soak's long run (2,000 logical events, five
// minutes of faults and kills; the short one is in `make test`) as the
// e2e suite's own test, on this run's servers, and tabulates its report.
func benchSoak(ctx context.Context, env *benchEnv, quick bool) (section, error) {
	sec := section{title: "Chaos soak: faults and kills on the whole stack"}
	out, err := os.MkdirTemp("", "fourlanes-soak-")
	if err != nil {
		return sec, err
	}
	defer os.RemoveAll(out)
	reportFile := filepath.Join(out, "soak.json")
	cmd := exec.CommandContext(ctx, "go", "test", "./test/", "-run", "^TestChaosSoak$", "-count=1", "-timeout", "25m")
	cmd.Dir = env.root
	run := "long"
	if quick {
		run = "short"
	}
	cmd.Env = append(os.Environ(), "CI=true", "FOURLANES_SOAK_REPORT="+reportFile)
	if run == "long" {
		cmd.Env = append(cmd.Env, "FOURLANES_SOAK=long")
	}
	logFile := filepath.Join(out, "soak.log")
	lf, err := os.Create(logFile)
	if err != nil {
		return sec, err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	begin := time.Now()
	runErr := cmd.Run()
	lf.Close()
	b, err := os.ReadFile(reportFile)
	if err != nil {
		tail, _ := os.ReadFile(logFile)
		return sec, fmt.Errorf("the soak wrote no report (%v): %w\n%s", runErr, err, lastLines(string(tail), 40))
	}
	var r soakResult
	if err := json.Unmarshal(b, &r); err != nil {
		return sec, fmt.Errorf("soak report: %w", err)
	}
	faults, kills := 0, 0
	for _, n := range r.FaultsInjected {
		faults += n
	}
	for _, n := range r.Kills {
		kills += n
	}
	sec.para("The %s run of `TestChaosSoak` (test/soak_test.go), seed %d, in %s: the orders stack on the twin; four tenants, one with %d chain shards; "+
		"emitters in one OS process per tenant (EmitWith with an idempotency key per logical event, retrying until it commits); "+
		"DynamoDB faults at rates on every table (errors, throttles, answers dropped after the commit, answers delayed 0.2–7 s after the commit, "+
		"requests stalled 1 s before they run); SIGKILLs of durable-consumer, changefeed, stream-filter and the emitters; dlq-repair every 10 s, under the same faults. "+
		"Then the faults stop, and the stack must settle by itself (dlq-repair every 10 s, as its schedule would, only faster).",
		run, r.Seed, time.Since(begin).Round(time.Second), 4)
	t := &table{head: []string{"", "result", "wanted"}}
	t.add("logical events / committed", fmt.Sprintf("%d / %d", r.Logical, r.Committed), "equal")
	t.add("events lost / doubled", fmt.Sprintf("%d / %d", r.Lost, r.Doubled), "0 / 0")
	t.add("chains intact", fmt.Sprintf("%d of %d", r.ChainsIntact, r.Chains), "all")
	t.add("emails (DURABLE, at least once) lost", fmt.Sprint(r.EmailsLost), "0")
	t.add("emails sent twice / named by the redelivery", fmt.Sprintf("%d / %d", r.EmailsDoubled, r.EmailsRedoneNamed), "equal (counted, never silent)")
	t.add("orders not projected (BEST_EFFORT)", fmt.Sprint(r.Unprojected), "0")
	t.add("faults injected", fmt.Sprintf("%d (%s)", faults, counts(r.FaultsInjected)), "")
	t.add("kills", fmt.Sprintf("%d (%s)", kills, counts(r.Kills)), "")
	t.add("emitter retries (after the SDK's own)", fmt.Sprint(r.EmitRetries), "")
	t.add("dlq-repair runs", fmt.Sprint(r.RepairRuns), "")
	t.add("window with faults", fmt.Sprintf("%.0f s", r.WindowSeconds), "")
	t.add("time to settle after the faults stop", fmt.Sprintf("%.1f s", r.QuiesceSeconds), "")
	sec.table(t)
	sec.para("AWS gives no figure to set beside these: the faults are a harsher mix than a normal day's (about 6 %% of requests to every table), and the kills come every 1–2.5 s. " +
		"A second send of an email is at-least-once doing its job after a kill between the send and its record; the example's mailer takes no idempotency key, so nothing deduplicates it.")
	if runErr != nil {
		return sec, fmt.Errorf("the soak failed: %v (its report is above)", runErr)
	}
	return sec, nil
}

func counts(m map[string]int) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
