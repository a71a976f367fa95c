// Command bench measures fourlanes side by side in one run and writes the
// results as markdown (bench/RESULTS.md):
//
//   - Emit: one process × N emitters, N independent stores × 1 emitter (the
//     Lambda shape), N × M, one tenant and many, closed and open loop, the
//     design against one transaction per event (naive) and one per event
//     behind a per-tenant mutex, on the project's own DynamoDB served with
//     AWS-like conflicts and AWS's per-partition write budget, each table
//     beside AWS's ceiling by model;
//   - chain verification throughput beside raw SHA-256 over the same
//     canonical bytes, and the library canonicalizer it replaced;
//   - reconcile after a checkpoint: the reads it costs;
//   - durable delivery: DynamoDB writes per (event, subscription);
//   - cold start of every function under a local Lambda Runtime API, beside
//     a hello-world aws-lambda-go binary built the same way;
//   - latency on the twin: commit → DURABLE and BEST_EFFORT handler done,
//     p50/p99 at several poll periods, beside AWS's documented poll rates;
//   - the chaos soak's long run (test/soak_test.go): faults and kills on the
//     whole stack, and what was lost or doubled.
//
// `make bench` runs it under scripts/with-servers.sh, which exports
// FOURLANES_DYNAMODB_ENDPOINT and FOURLANES_SQS_ENDPOINT (a `fourlanes
// dynamodb` process); without the first it serves the same DynamoDB in its
// own process, which then shares the bench's cores and garbage collector.
// Every loop is bounded in count and in time.
// The machine is shared and noisy, so compared things run interleaved in the
// same run and the tables give ratios beside absolute numbers.
//
//	go run ./bench                  # everything, about fifteen minutes
//	go run ./bench -only emit -emit-shapes independent   # some emit shapes, log only
//	go run ./bench -quick -out /tmp/r.md -only verify,coldstart
//	go run ./bench -only latency -out latency.md   # one section; -out keeps RESULTS.md
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/twin/localaws"
)

// options are the knobs of one run; quick() shrinks them for a smoke run.
type options struct {
	out        string
	only       map[string]bool
	emitTrial  time.Duration   // one emit trial's measured part (bounded also by emitMax)
	emitWarm   time.Duration   // run before it, not counted
	emitReps   int             // interleaved repetitions per emitter count
	emitMax    int64           // events per emit trial at most
	emitShapes string          // only the emit shapes whose name contains this (no tables)
	emitRTTs   []time.Duration // round trips every closed-loop emit shape runs at (0: loopback's)
	verifyN    int             // events in the in-memory chain
	verifyReps int             // interleaved rounds
	coldReps   int             // cold starts per binary
	reconcileN int             // events before the checkpoint
	latencyN   int             // orders per poll period in the latency section
	exportN    int             // events in the export section's chain
	exportReps int             // interleaved rounds of the export section
	pathN      int             // events per run of the event path's CPU benchmark
	pathReps   int             // interleaved rounds of it (HEAD and the baseline commit)
}

func defaults() options {
	return options{
		out:        "", // bench/RESULTS.md in the repository
		emitTrial:  3 * time.Second,
		emitWarm:   time.Second,
		emitReps:   2,
		emitMax:    30000,
		emitRTTs:   []time.Duration{0, awsRTT},
		verifyN:    2000,
		verifyReps: 9,
		coldReps:   9,
		reconcileN: 1000,
		latencyN:   300,
		exportN:    20000,
		exportReps: 5,
		pathN:      300,
		pathReps:   3,
	}
}

func (o *options) quick() {
	o.emitTrial, o.emitReps, o.emitMax, o.emitWarm = 300*time.Millisecond, 1, 500, 0
	o.verifyN, o.verifyReps = 100, 2
	o.coldReps = 1
	o.reconcileN = 30
	o.latencyN = 20
	o.exportN, o.exportReps = 2000, 1
	o.pathN, o.pathReps = 20, 1
}

var sections = []string{"emit", "verify", "export", "reconcile", "delivery", "backfill", "coldstart", "eventpath", "soak", "latency"}

func main() {
	exit := 0
	defer func() { os.Exit(exit) }()
	log.SetFlags(0)
	log.SetPrefix("bench: ")
	o := defaults()
	quick := flag.Bool("quick", false, "a short smoke run (numbers are not meaningful)")
	only := flag.String("only", strings.Join(sections, ","), "comma-separated sections to run: "+strings.Join(sections, ","))
	flag.StringVar(&o.out, "out", o.out, "markdown file to write (default bench/RESULTS.md in the repository)")
	flag.IntVar(&o.verifyN, "verify-events", o.verifyN, "events in the verification bench's chain")
	flag.DurationVar(&o.emitTrial, "emit-trial", o.emitTrial, "length of one emit trial")
	flag.IntVar(&o.emitReps, "emit-reps", o.emitReps, "repetitions per closed-loop emit configuration")
	flag.StringVar(&o.emitShapes, "emit-shapes", "", "run only the emit shapes whose name contains this, and write no tables (e.g. \"independent\")")
	flag.Func("emit-rtt", "comma-separated round trips the closed-loop emit shapes run at, e.g. \"0,8ms\" (0: loopback's; default \"0,8ms\")", func(v string) error {
		o.emitRTTs = nil
		for _, f := range strings.Split(v, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(f))
			if err != nil {
				return err
			}
			o.emitRTTs = append(o.emitRTTs, d)
		}
		return nil
	})
	flag.IntVar(&o.coldReps, "cold-reps", o.coldReps, "cold starts per binary")
	flag.IntVar(&o.latencyN, "latency-events", o.latencyN, "orders per poll period in the latency section")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	if *quick {
		// -quick shrinks everything, then explicit flags win again.
		q := defaults()
		q.quick()
		flag.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "emit-trial":
				q.emitTrial = o.emitTrial
			case "emit-reps":
				q.emitReps = o.emitReps
			case "verify-events":
				q.verifyN = o.verifyN
			case "cold-reps":
				q.coldReps = o.coldReps
			case "latency-events":
				q.latencyN = o.latencyN
			case "emit-shapes":
				q.emitShapes = o.emitShapes
			case "emit-rtt":
				q.emitRTTs = o.emitRTTs
			}
		})
		q.out = o.out
		o = q
	}
	o.only = map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		o.only[strings.TrimSpace(s)] = true
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	// The whole run is bounded too.
	ctx, cancel := context.WithTimeout(ctx, 45*time.Minute)
	defer cancel()

	if err := run(ctx, o, *quick); err != nil {
		log.Print(err)
		exit = 1
	}
}

func run(ctx context.Context, o options, quick bool) error {
	root, err := localaws.ModuleRoot()
	if err != nil {
		return err
	}
	env := &benchEnv{root: root, ddbEndpoint: os.Getenv("FOURLANES_DYNAMODB_ENDPOINT"), sqsEndpoint: os.Getenv("FOURLANES_SQS_ENDPOINT")}
	needDB := o.only["emit"] || o.only["export"] || o.only["reconcile"] || o.only["delivery"] || o.only["backfill"] || o.only["coldstart"] || o.only["eventpath"] || o.only["latency"]
	if needDB && env.ddbEndpoint == "" {
		log.Print("FOURLANES_DYNAMODB_ENDPOINT is unset: serving a DynamoDB in this process")
		srv, err := localaws.StartDynamoDB(ctx)
		if err != nil {
			return fmt.Errorf("start the in-process DynamoDB (or run under scripts/with-servers.sh): %w", err)
		}
		defer srv.Stop()
		env.ddbEndpoint = srv.Endpoint
	}
	if env.ddbEndpoint != "" {
		env.db = localaws.NewDynamoDB(env.ddbEndpoint)
	}

	if o.out == "" {
		o.out = filepath.Join(root, "bench", "RESULTS.md")
	}
	rep := &report{quick: quick, machine: describeMachine(root)}
	var failed []string
	for _, s := range sections {
		if !o.only[s] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		log.Printf("section %s", s)
		begin := time.Now()
		var sec section
		var err error
		switch s {
		case "emit":
			sec, err = benchEmit(ctx, env, o)
		case "verify":
			sec, err = benchVerify(o)
		case "export":
			sec, err = benchExport(ctx, env, o)
		case "reconcile":
			sec, err = benchReconcile(ctx, env, o)
		case "delivery":
			sec, err = benchDelivery(ctx, env, o)
		case "backfill":
			sec, err = benchBackfill(ctx, env, o)
		case "coldstart":
			sec, err = benchColdStart(ctx, env, o)
		case "eventpath":
			sec, err = benchEventPath(ctx, env, o)
		case "soak":
			sec, err = benchSoak(ctx, env, quick)
		case "latency":
			sec, err = benchLatency(ctx, env, o)
		}
		if err != nil {
			// A section that fails says so in the results; it never
			// leaves numbers that were not measured.
			log.Printf("section %s failed: %v", s, err)
			failed = append(failed, s)
			sec.body = append(sec.body, fmt.Sprintf("**This section failed in this run:** `%v`", err))
		}
		sec.took = time.Since(begin)
		rep.sections = append(rep.sections, sec)
		fmt.Println(sec.markdown())
	}
	rep.machine.loadEnd = loadAverage()
	text := rep.markdown()
	if partial(o.only) {
		// A run of some sections replaces only those in the results file,
		// so that one section can be rerun without losing the others.
		if old, err := os.ReadFile(o.out); err == nil {
			text = rep.spliceInto(string(old))
		}
	}
	if err := os.WriteFile(o.out, []byte(text), 0o644); err != nil {
		return err
	}
	log.Printf("wrote %s", o.out)
	if len(failed) > 0 {
		return fmt.Errorf("sections that failed (see %s): %s", o.out, strings.Join(failed, ", "))
	}
	return nil
}

// partial reports whether only names fewer than all the sections.
func partial(only map[string]bool) bool {
	for _, s := range sections {
		if !only[s] {
			return true
		}
	}
	return false
}

// benchEnv is what the sections share: the servers and the repository.
type benchEnv struct {
	root        string
	ddbEndpoint string
	sqsEndpoint string
	db          *dynamodb.Client
}

func (e *benchEnv) requireDB() error {
	if e.db == nil {
		return errors.New("no DynamoDB endpoint")
	}
	return nil
}
