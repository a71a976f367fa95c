package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	example "github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/examples/orders/orders"
	"github.com/fourlanes/fourlanes/pkg/delivery"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/eventstore"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tenancy"
	"github.com/fourlanes/fourlanes/twin/localaws"
	"github.com/fourlanes/fourlanes/twin/twintest"
)

// The chaos soak (issue 26): the whole stack on the twin while our DynamoDB
// injects faults at rates on every table (errors, throttles, answers lost
// after the commit, answers delayed after the commit, requests stalled
// before they run), the functions that carry events (stream-filter,
// durable-consumer, changefeed) are SIGKILLed every few seconds, the
// emitters (this test binary again, one OS process per tenant, EmitWith
// with an idempotency key, retrying as a careful caller does) are SIGKILLed
// mid-emit and restarted, and dlq-repair runs under the same faults. Then
// the faults stop and the test waits for the stack to settle and checks the
// promise: every logical event committed once (none lost, none doubled),
// every chain intact, every event delivered and its email sent at least once
// (none lost; each second send named by the redelivery that made it), every
// order projected, every watermark at its head, every queue empty.
//
// `make test` runs the short, seeded run; `make bench` runs the long one
// (FOURLANES_SOAK=long) and puts its report (FOURLANES_SOAK_REPORT) in
// bench/RESULTS.md. FOURLANES_SOAK_SEED replays a run's faults and kills
// (the servers' scheduling still varies).

// soakPlan is one run's shape.
type soakPlan struct {
	PerTenant int           // logical events per tenant
	Window    time.Duration // faults and kills last at least this long
	Seed      uint64
}

func soakPlanFromEnv(t *testing.T) soakPlan {
	p := soakPlan{PerTenant: 75, Window: 35 * time.Second, Seed: 26}
	if os.Getenv("FOURLANES_SOAK") == "long" {
		p = soakPlan{PerTenant: 500, Window: 5 * time.Minute, Seed: 2026}
	}
	if s := os.Getenv("FOURLANES_SOAK_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FOURLANES_SOAK_SEED=%q: %v", s, err)
		}
		p.Seed = n
	}
	return p
}

// soakTenants: three tenants of one chain and one with chain shards.
var soakTenants = []string{"soak-a", "soak-b", "soak-c", "soak-hot"}

const soakHotShards = 4

// SoakReport is what a run found; `make bench` tabulates it.
type SoakReport struct {
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
	FaultsInjected    map[string]int `json:"faults_injected"` // by kind
	Kills             map[string]int `json:"kills"`           // by process
	EmitRetries       int            `json:"emit_retries"`
	RepairRuns        int            `json:"repair_runs"`
	WindowSeconds     float64        `json:"window_s"`
	QuiesceSeconds    float64        `json:"quiesce_s"`
}

func TestChaosSoak(t *testing.T) {
	// Not parallel (see parallel in harness_test.go): its report measures how fast
	// the stack settles, which other tests on the same cores would distort.
	plan := soakPlanFromEnv(t)
	s := startStack(t, shortConsumer)
	fs := newFaults(t)
	rnd := rand.New(rand.NewPCG(plan.Seed, plan.Seed^0x26))
	rep := SoakReport{Seed: plan.Seed, Logical: plan.PerTenant * len(soakTenants), FaultsInjected: map[string]int{}, Kills: map[string]int{}}

	tables := []string{s.app.Tables.Events, s.app.Tables.Orders, s.app.Tables.Search, s.env[keys.EnvStateTable], s.env[keys.EnvChangeFeedTable]}
	s.armSoakFaults(fs, tables, plan.Seed)

	start := time.Now()
	stop := make(chan struct{})
	var bg sync.WaitGroup
	var mu sync.Mutex // rep's counters, from the goroutines below

	// Emitters: one process per tenant, restarted after each kill.
	ems := make([]*soakEmitter, len(soakTenants))
	interval := plan.Window / time.Duration(plan.PerTenant+plan.PerTenant/5)
	for i, tenant := range soakTenants {
		ems[i] = &soakEmitter{t: t, s: s, tenant: tenant, total: plan.PerTenant, interval: interval}
		ems[i].start()
	}
	// Kills and repairs until the window ends.
	bg.Go(func() {
		fns := []string{keys.FnDurableConsumer, keys.FnChangefeed, keys.FnStreamFilter}
		nextRepair := time.Now().Add(10 * time.Second)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(1000+rnd.IntN(1500)) * time.Millisecond):
			}
			mu.Lock()
			switch r := rnd.IntN(4); {
			case r < 3:
				f, err := s.tw.Function(s.fn[fns[r]])
				if err == nil && f.Kill() > 0 {
					rep.Kills[fns[r]]++
				}
			default:
				if em := ems[rnd.IntN(len(ems))]; em.kill() {
					rep.Kills["emitter"]++
				}
			}
			mu.Unlock()
			if time.Now().After(nextRepair) {
				nextRepair = time.Now().Add(10 * time.Second)
				s.repairUnderFaults()
				mu.Lock()
				rep.RepairRuns++
				mu.Unlock()
			}
		}
	})
	// Restart killed emitters.
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			for _, em := range ems {
				em.restartIfKilled()
			}
		}
	})

	// The window: at least plan.Window, and until every emitter is done.
	deadline := start.Add(plan.Window + 5*time.Minute)
	for time.Since(start) < plan.Window || !allDone(ems) {
		if time.Now().After(deadline) {
			t.Fatalf("the emitters did not finish within %v of the window:\n%s", deadline.Sub(start), emitterStatus(ems))
		}
		time.Sleep(250 * time.Millisecond)
	}
	close(stop)
	bg.Wait()
	rep.WindowSeconds = time.Since(start).Seconds()
	for _, f := range fs.list() {
		if slices.Contains(tables, f.Table) {
			rep.FaultsInjected[f.Kind] += f.Hits
		}
	}
	fs.clear()
	faultsOff := time.Now()
	for _, em := range ems {
		rep.EmitRetries += em.retries()
	}

	// Quiesce: the stack settles on its own (redeliveries, retries); the
	// hourly dlq-repair is run every 10 s for whatever it must fix.
	committed := s.soakCommitted(t, ems)
	settled := s.waitSoakSettled(t, committed, &rep)
	rep.QuiesceSeconds = time.Since(faultsOff).Seconds()
	s.checkSoak(t, ems, committed, &rep)
	b, _ := json.MarshalIndent(rep, "", "  ")
	t.Logf("soak report:\n%s", b)
	if path := os.Getenv("FOURLANES_SOAK_REPORT"); path != "" {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Error(err)
		}
	}
	if !settled {
		t.Errorf("the stack did not settle within %v of the faults stopping", soakQuiesceLimit)
	}
}

// soakQuiesceLimit bounds the wait for the stack to settle.
const soakQuiesceLimit = 3 * time.Minute

// armSoakFaults arms, on each table, rules at rates for every data-plane
// action the functions and the emitters call. The rates are per request:
// together about 6 % of requests to a table are hit.
func (s *stack) armSoakFaults(fs faults, tables []string, seed uint64) {
	actions := []string{"PutItem", "UpdateItem", "DeleteItem", "GetItem", "BatchGetItem", "Query", "TransactWriteItems"}
	kinds := []struct {
		kind    string
		rate    float64
		delayMs int64
	}{
		{"error", 0.02, 0}, {"throttle", 0.01, 0}, {"drop", 0.01, 0},
		{"delay", 0.004, 200}, {"delay", 0.003, 1500}, {"delay", 0.002, 7000},
		{"stall", 0.004, 1000},
	}
	n := uint64(0)
	for _, table := range tables {
		for _, a := range actions {
			for _, k := range kinds {
				n++
				fs.arm(fault{Action: a, Table: table, Kind: k.kind, Rate: k.rate, Seed: seed*1000 + n, DelayMs: k.delayMs})
			}
		}
	}
}

// repairUnderFaults invokes dlq-repair as its schedule would; open repairs
// and failed runs are expected while the faults last.
func (s *stack) repairUnderFaults() {
	name, err := s.tw.FunctionName(s.fn[keys.FnDLQRepair])
	if err != nil {
		s.t.Fatal(err)
	}
	_, _ = s.runCLI("repair", "-function", name)
}

// soakEmitter is one tenant's emitter process, restarted from where it got
// after each kill.
type soakEmitter struct {
	t        *testing.T
	s        *stack
	tenant   string
	total    int
	interval time.Duration

	mu      sync.Mutex
	em      *emitter
	runs    []*emitter // every process, for their output
	next    int        // the first index not yet printed
	killed  bool
	done    bool
	nRetry  int
	emitted map[int]envelope.Envelope
}

const soakEmitterEnv = "FOURLANES_SOAK_EMITTER"

// soakEpoch dates the orders the emitters place: order i at soakEpoch + i s.
var soakEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type soakEmitterSpec struct {
	Endpoint, Events, Orders, Tenant string
	From, To                         int
	IntervalMs                       int64
	Shards                           map[string]int
}

func (se *soakEmitter) start() {
	se.mu.Lock()
	defer se.mu.Unlock()
	se.startLocked()
}

func (se *soakEmitter) startLocked() {
	if se.emitted == nil {
		se.emitted = map[int]envelope.Envelope{}
	}
	ep, _ := twintest.Endpoints(se.t)
	spec := soakEmitterSpec{Endpoint: ep, Events: se.s.app.Tables.Events, Orders: se.s.app.Tables.Orders, Tenant: se.tenant,
		From: se.next, To: se.total, IntervalMs: se.interval.Milliseconds(), Shards: map[string]int{"soak-hot": soakHotShards}}
	raw, err := json.Marshal(spec)
	if err != nil {
		se.t.Fatal(err)
	}
	em := &emitter{done: make(chan error, 1)}
	em.cmd = exec.Command(os.Args[0], "-test.run=^TestSoakEmitterProcess$", "-test.count=1", "-test.v")
	em.cmd.Env = append(os.Environ(), soakEmitterEnv+"="+string(raw), "AWS_REGION="+localaws.Region,
		"AWS_ACCESS_KEY_ID=fourlanes", "AWS_SECRET_ACCESS_KEY=local", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	em.cmd.Stdout, em.cmd.Stderr = &em.stdout, &em.stderr
	if err := em.cmd.Start(); err != nil {
		se.t.Fatal(err)
	}
	go func() { em.done <- em.cmd.Wait() }()
	se.t.Cleanup(func() { _ = em.cmd.Process.Kill() })
	se.em, se.killed = em, false
	se.runs = append(se.runs, em)
}

// kill SIGKILLs the running process, if it is running.
func (se *soakEmitter) kill() bool {
	se.mu.Lock()
	defer se.mu.Unlock()
	if se.done || se.killed {
		return false
	}
	if ended, _ := se.em.exited(); ended {
		return false
	}
	_ = se.em.cmd.Process.Kill()
	se.killed = true
	return true
}

// restartIfKilled reads what the process printed and, once it has ended,
// starts the next one from the first index it did not print, or marks the
// tenant done.
func (se *soakEmitter) restartIfKilled() {
	se.mu.Lock()
	defer se.mu.Unlock()
	if se.done {
		return
	}
	ended, err := se.em.exited()
	if !ended {
		return
	}
	se.collectLocked()
	if err != nil && !se.killed {
		se.t.Errorf("emitter of %s failed: %v\nstdout: %s\nstderr: %s", se.tenant, err, se.em.out(), se.em.stderr.String())
		se.done = true
		return
	}
	if se.next >= se.total {
		se.done = true
		return
	}
	se.startLocked()
}

// collectLocked reads the events the current process printed.
func (se *soakEmitter) collectLocked() {
	for _, line := range strings.Split(se.em.out(), "\n") {
		rest, ok := strings.CutPrefix(line, emittedPrefix)
		if !ok {
			continue
		}
		i, js, _ := strings.Cut(rest, " ")
		n, err := strconv.Atoi(i)
		if err != nil {
			continue
		}
		var e envelope.Envelope
		if err := json.Unmarshal([]byte(js), &e); err != nil {
			continue // cut off by the kill
		}
		se.emitted[n] = e
		for se.emitted[se.next].ID != "" {
			se.next++
		}
	}
}

func (se *soakEmitter) retries() int {
	se.mu.Lock()
	defer se.mu.Unlock()
	n := 0
	for _, em := range se.runs {
		n += strings.Count(em.out(), "RETRY ")
	}
	return n
}

func allDone(ems []*soakEmitter) bool {
	for _, em := range ems {
		em.mu.Lock()
		d := em.done
		em.mu.Unlock()
		if !d {
			return false
		}
	}
	return true
}

func emitterStatus(ems []*soakEmitter) string {
	var b strings.Builder
	for _, em := range ems {
		em.mu.Lock()
		fmt.Fprintf(&b, "%s: next %d of %d, done %v\n", em.tenant, em.next, em.total, em.done)
		em.mu.Unlock()
	}
	return b.String()
}

// soakKey is the idempotency key of a tenant's i-th logical event; its
// order's id derives from it, so a retry places the same order.
func soakKey(tenant string, i int) string { return fmt.Sprintf("%s-%04d", tenant, i) }

func soakOrderID(key string) string { return uuid.NewSHA1(uuid.NameSpaceOID, []byte(key)).String() }

// TestSoakEmitterProcess is not a test of its own: TestChaosSoak runs this
// test binary again as one tenant's emitter. It places orders From..To-1
// (the order row and order.placed in one transaction, EmitWith with the
// logical event's idempotency key), retrying each until it commits, as a
// careful caller does, and prints each committed event.
func TestSoakEmitterProcess(t *testing.T) {
	raw := os.Getenv(soakEmitterEnv)
	if raw == "" {
		t.Skip("a helper process of TestChaosSoak")
	}
	var spec soakEmitterSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	cat, err := example.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	store, err := eventstore.New(localaws.NewDynamoDB(spec.Endpoint), eventstore.Config{Table: spec.Events, Catalog: cat, Shards: spec.Shards})
	if err != nil {
		t.Fatal(err)
	}
	ctx := tenancy.MustWithTenant(context.Background(), spec.Tenant)
	for i := spec.From; i < spec.To; i++ {
		key := soakKey(spec.Tenant, i)
		o := orders.Order{ID: soakOrderID(key), Version: 1, Status: orders.StatusPlaced, CustomerEmail: key + "@soak.example",
			Items: []orders.Item{{SKU: "sku-mug", Qty: 1}}, TotalCents: 1250, Currency: "EUR"}
		in := eventstore.EmitInput{Type: orders.TypePlaced, IdempotencyKey: key, ShardKey: o.ID,
			Payload: orders.PlacedV2{OrderID: o.ID, CustomerEmail: o.CustomerEmail, Items: o.Items, TotalCents: o.TotalCents, Currency: o.Currency},
			// A restarted emitter re-emits the order a killed one may have
			// committed: with the same key, so with the same write (a clock
			// read here would differ, and the store refuses a key reused with
			// other content).
			Extra: []types.TransactWriteItem{orders.PutNew(spec.Orders, spec.Tenant, o, soakEpoch.Add(time.Duration(i)*time.Second))}}
		pause := 50 * time.Millisecond
		for {
			e, err := store.EmitWith(ctx, in)
			if err == nil {
				b, _ := json.Marshal(e)
				fmt.Printf("%s%d %s\n", emittedPrefix, i, b)
				break
			}
			fmt.Printf("RETRY %d %v\n", i, err)
			time.Sleep(pause)
			pause = min(2*pause, 2*time.Second)
		}
		time.Sleep(time.Duration(spec.IntervalMs) * time.Millisecond)
	}
}

// soakCommitted reads every tenant's log (every chain of the sharded one)
// once the faults have stopped.
func (s *stack) soakCommitted(t *testing.T, ems []*soakEmitter) map[string][]envelope.Envelope {
	t.Helper()
	out := map[string][]envelope.Envelope{}
	for _, tenant := range soakTenants {
		chains, err := s.app.Events.ChainsOf(context.Background(), tenant)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range chains {
			evs, err := s.app.Events.AllEvents(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			out[c] = evs
		}
	}
	return out
}

// waitSoakSettled waits until every event is delivered, its email sent,
// its order projected and every chain's delivery audit settled, running
// dlq-repair every 10 s meanwhile.
func (s *stack) waitSoakSettled(t *testing.T, committed map[string][]envelope.Envelope, rep *SoakReport) bool {
	t.Helper()
	deadline := time.Now().Add(soakQuiesceLimit)
	nextRepair := time.Now().Add(10 * time.Second)
	for {
		why := s.soakUnsettled(committed)
		if why == "" {
			return true
		}
		if time.Now().After(deadline) {
			t.Logf("not settled: %s", why)
			return false
		}
		if time.Now().After(nextRepair) {
			s.repairUnderFaults()
			rep.RepairRuns++
			nextRepair = time.Now().Add(10 * time.Second)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// soakUnsettled says what is not settled yet ("" when everything is).
func (s *stack) soakUnsettled(committed map[string][]envelope.Envelope) string {
	ctx := context.Background()
	emails := s.emailsSent(s.t)
	for chain, evs := range committed {
		for _, e := range evs {
			if c, ok := s.claim(e.ID, emailSub); !ok || c.Status != delivery.StatusCompleted {
				return fmt.Sprintf("%s seq %d: claim %q", chain, e.Seq, c.Status)
			}
			if emails[emailKey(e)] == 0 {
				return fmt.Sprintf("%s seq %d: no email", chain, e.Seq)
			}
			tenant, _ := tenancy.SplitChain(chain)
			if v, ok, err := s.app.SearchVersion(ctx, tenant, e.Payload["order_id"].(string)); err != nil || !ok || v != 1 {
				return fmt.Sprintf("%s seq %d: order not projected (v%d, %v, %v)", chain, e.Seq, v, ok, err)
			}
		}
		r := s.reconcile(chain)
		if r.ChainIntact == nil || !*r.ChainIntact {
			return "chain " + chain + " not intact"
		}
	}
	for _, q := range []string{keys.EnvDurableDLQURL, keys.EnvPipeDLQURL, keys.EnvChangeFeedDLQURL} {
		if n := s.depth(q); n != 0 {
			return fmt.Sprintf("%s holds %d messages", q, n)
		}
	}
	return ""
}

// checkSoak checks the promise and fills the report.
func (s *stack) checkSoak(t *testing.T, ems []*soakEmitter, committed map[string][]envelope.Envelope, rep *SoakReport) {
	t.Helper()
	perKey := map[string]int{} // logical key → events in the log
	for chain, evs := range committed {
		rep.Chains++
		rep.Committed += len(evs)
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				t.Errorf("chain %s: the %d-th event has seq %d", chain, i+1, e.Seq)
			}
			perKey[strings.TrimSuffix(e.Payload["customer_email"].(string), "@soak.example")]++
		}
		if r := s.reconcile(chain); r.ChainIntact != nil && *r.ChainIntact && r.LastSeq == int64(len(evs)) {
			rep.ChainsIntact++
		} else {
			t.Errorf("reconcile %s: %+v, want intact at last_seq %d", chain, r, len(evs))
		}
		s.checkSettled(t, chain)
	}
	for _, em := range ems {
		for i := range em.total {
			switch n := perKey[soakKey(em.tenant, i)]; {
			case n == 0:
				rep.Lost++
				t.Errorf("logical event %s is not in the log", soakKey(em.tenant, i))
			case n > 1:
				rep.Doubled += n - 1
				t.Errorf("logical event %s is in the log %d times", soakKey(em.tenant, i), n)
			}
		}
	}
	if rep.Committed != rep.Logical {
		t.Errorf("%d events committed for %d logical events", rep.Committed, rep.Logical)
	}

	// Effects: every email sent; each second send named by the redelivery
	// that made it (at least once, counted).
	emails := s.emailsSent(t)
	redone := s.redoneEffects()
	ctx := context.Background()
	for _, evs := range committed {
		for _, e := range evs {
			k := emailKey(e)
			switch n := emails[k]; {
			case n == 0:
				rep.EmailsLost++
				t.Errorf("%s seq %d: no email", e.TenantID, e.Seq)
			case n > 1:
				rep.EmailsDoubled += n - 1
				if redone[k] < n-1 {
					t.Errorf("%s seq %d: %d emails and %d redeliveries saying so; every second send must be named", e.TenantID, e.Seq, n, redone[k])
				}
				rep.EmailsRedoneNamed += min(redone[k], n-1)
			}
			tenant, _ := tenancy.SplitChain(e.TenantID)
			if v, ok, _ := s.app.SearchVersion(ctx, tenant, e.Payload["order_id"].(string)); !ok || v != 1 {
				rep.Unprojected++
				t.Errorf("%s seq %d: order not projected", e.TenantID, e.Seq)
			}
		}
	}
}

// redoneEffects counts, per effect key, the lines that say an effect was
// (or may have been) done a second time.
func (s *stack) redoneEffects() map[string]int {
	out := map[string]int{}
	for _, fn := range []string{keys.FnDurableConsumer, keys.FnDLQRepair} {
		id := s.fn[fn]
		for _, l := range s.grep(id, `"effect_key"`) {
			if !strings.Contains(l, "it may happen twice") && !strings.Contains(l, "it may have happened twice") {
				continue
			}
			var rec struct {
				Key string `json:"effect_key"`
			}
			if json.Unmarshal([]byte(strings.TrimPrefix(l, id+": ")), &rec) == nil {
				out[rec.Key]++
			}
		}
	}
	return out
}
