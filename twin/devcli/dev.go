package devcli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fourlanes/fourlanes/internal/cdkjson"
	"github.com/fourlanes/fourlanes/pkg/cli"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/ddb"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// Commands are the CLI's commands that run the local twin: dev (with the
// application's demo workload, if d is not nil) and dynamodb.
func Commands(d *Demo) []cli.Command {
	return []cli.Command{
		{Name: "dev", Run: func(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
			return runDev(ctx, d, args, stdout, stderr)
		}, Usage: devUsage(d)},
		{Name: "dynamodb", Run: runDynamoDB,
			Usage: cli.UsageLines("dynamodb", dynamoDBSynopsis, "serve the twin's own DynamoDB and DynamoDB Streams (in memory unless -data)")},
	}
}

func devUsage(d *Demo) string {
	what := "run the stack of the CDK app cdk.json names on this machine, from its synthesized template"
	if d != nil {
		what += ", with the application's demo workload"
	}
	return cli.UsageLines("dev", devSynopsis, what)
}

const devSynopsis = "[-app PKG] [-functions DIR] [-data DIR] [-dynamodb-port N] [-sqs-port N] [-s3-port N] [-kms-port N] [-lambda-port N] [-reconcile-port N] [flags]"

// The ports 'fourlanes dev' listens on by default, on loopback: fixed, so
// that the endpoints (dev.json, fourlanes env -local) stay the same across
// restarts. Each has a flag; 0 picks a free port.
const (
	DefaultDynamoDBPort  = 4700 // DynamoDB and DynamoDB Streams
	DefaultSQSPort       = 4701 // the twin's SQS endpoint (ElasticMQ behind it takes a free port)
	DefaultS3Port        = 4702
	DefaultKMSPort       = 4703
	DefaultLambdaPort    = 4704 // the Lambda Invoke API and CloudFormation's DescribeStacks
	DefaultReconcilePort = 4705 // reconcile's Function URL
)

// Demo is an application's demo workload, which `fourlanes dev` runs once
// the stack is up (-demo=false skips it).
type Demo struct {
	// Flags adds the workload's own flags to dev's (sizes, say).
	Flags func(fs *flag.FlagSet)
	// Try are command lines dev prints for the user to try (emit, say).
	Try []string
	// Run drives the application on the twin; it tells the user what it
	// does through env.Note and stops when ctx ends.
	Run func(ctx context.Context, env DemoEnv)
}

// DemoEnv is what a demo workload gets from the running twin.
type DemoEnv struct {
	DynamoDB *dynamodb.Client
	// TableEnv are the environment variables the stack gives its functions:
	// the framework's tables and the application's own.
	TableEnv map[string]string
	// Logger writes to app.log beside the twin's logs.
	Logger *slog.Logger
	// Note prints one line on dev's output.
	Note func(format string, a ...any)
	// ChangeFeedDLQ is the logical ID of the change feed's on-failure queue;
	// QueueDepth counts the messages (visible and in flight) of a queue.
	ChangeFeedDLQ string
	QueueDepth    func(ctx context.Context, logicalID string) (int, error)
}

type devOptions struct {
	template string // a template file; empty: synthesize
	cdkOut   string // a cloud assembly to read; empty: synthesize
	// app is the CDK app's Go package and functions the folder of the
	// application's function mains, both relative to the module root.
	app, functions string
	demo           bool
	ports          devPorts
	every          time.Duration
	data           string // the DynamoDB's state folder; empty: in memory
}

// devPorts are dev's port flags.
type devPorts struct {
	dynamoDB, sqs, s3, kms, lambda, reconcile int
}

// byFlag lists the ports by the flag that sets each.
func (p *devPorts) byFlag() []portFlag {
	return []portFlag{
		{"dynamodb-port", "DynamoDB and DynamoDB Streams", &p.dynamoDB, DefaultDynamoDBPort},
		{"sqs-port", "SQS (the twin's endpoint in front of ElasticMQ)", &p.sqs, DefaultSQSPort},
		{"s3-port", "S3", &p.s3, DefaultS3Port},
		{"kms-port", "KMS", &p.kms, DefaultKMSPort},
		{"lambda-port", "the Lambda Invoke API and CloudFormation DescribeStacks", &p.lambda, DefaultLambdaPort},
		{"reconcile-port", "reconcile's Function URL", &p.reconcile, DefaultReconcilePort},
	}
}

type portFlag struct {
	flag, what string
	port       *int
	def        int
}

func runDev(ctx context.Context, d *Demo, args []string, stdout, stderr io.Writer) (int, error) {
	fs := cli.Flags("dev", devSynopsis, stderr)
	var o devOptions
	fs.StringVar(&o.cdkOut, "cdk-out", "", "run the stack of this cloud assembly (e.g. cdk.out from make synth) instead of synthesizing")
	fs.StringVar(&o.app, "app", "", "the CDK app's Go package, relative to the module root (default: the package of cdk.json's \"go run <package>\")")
	fs.StringVar(&o.functions, "functions", "", "the folder of the application's function mains (<fn>/main.go), relative to the module root (default: functions beside the CDK app's folder, e.g. examples/orders/functions for ./examples/orders/infra)")
	fs.StringVar(&o.template, "template", "", "run this template file (its assets beside it) instead of synthesizing")
	if d != nil {
		fs.BoolVar(&o.demo, "demo", true, "run the application's demo workload")
		if d.Flags != nil {
			d.Flags(fs)
		}
	}
	for _, p := range o.ports.byFlag() {
		fs.IntVar(p.port, p.flag, p.def, "serve "+p.what+" on this loopback port (0: a free port, another on every restart)")
	}
	fs.DurationVar(&o.every, "status-every", time.Second, "how often the status line refreshes")
	defaultData := ""
	if dir, err := cli.TwinDir(); err == nil {
		defaultData = filepath.Join(dir, "dynamodb")
	}
	fs.StringVar(&o.data, "data", defaultData, "keep the DynamoDB's tables, items and streams in this folder, so they survive a restart (\"\": in memory; remove the folder to start afresh)")
	if err := cli.Parse(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("%w: unexpected argument %q", cli.ErrUsage, fs.Arg(0))
	}
	if o.template != "" && o.cdkOut != "" {
		return 0, fmt.Errorf("%w: -template and -cdk-out: pick one", cli.ErrUsage)
	}
	// Before minutes of building: a port another process holds fails now.
	if err := checkPorts(o.ports.byFlag()); err != nil {
		return 0, err
	}
	return devMain(ctx, d, o, stdout, stderr)
}

// checkPorts refuses a port out of range or given to two endpoints, and one
// that another process listens on, naming the flag to change.
func checkPorts(ports []portFlag) error {
	taken := map[int]string{}
	for _, p := range ports {
		switch n := *p.port; {
		case n < 0 || n > 65535:
			return fmt.Errorf("%w: -%s %d: want a port, 1-65535, or 0 for a free one", cli.ErrUsage, p.flag, n)
		case n == 0:
			continue
		case taken[n] != "":
			return fmt.Errorf("%w: -%s and -%s are both %d: give each endpoint its own port", cli.ErrUsage, taken[n], p.flag, n)
		}
		taken[*p.port] = p.flag
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(*p.port))
		if err != nil {
			return fmt.Errorf("-%s %d: cannot listen on it for %s (%w): another 'fourlanes dev' may be running; "+
				"stop it, or pass -%s with a free port (0: any, another on every restart)", p.flag, *p.port, p.what, err, p.flag)
		}
		ln.Close()
	}
	return nil
}

func devMain(ctx context.Context, d *Demo, o devOptions, stdout, stderr io.Writer) (int, error) {
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	root, err := localaws.ModuleRoot()
	if err != nil {
		return 0, err
	}
	dir, err := cli.TwinDir()
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	hostBin := filepath.Join(dir, "bin")

	// 1. Functions for this machine, and the template.
	start := time.Now()
	if err := resolveApp(root, &o); err != nil {
		return 0, err
	}
	fns, err := twin.FunctionNames(root, o.functions)
	if err != nil {
		return 0, err
	}
	tty := isTerminal(stdout)
	err = step(stdout, tty, fmt.Sprintf("building %d functions for this machine into %s", len(fns), rel(root, hostBin)), func() error {
		return twin.BuildHost(ctx, root, o.functions, hostBin, fns)
	})
	if err != nil {
		return 0, err
	}
	tmpl, code, err := devTemplate(ctx, root, dir, hostBin, o, func(what string, f func() error) error { return step(stdout, tty, what, f) })
	if err != nil {
		return 0, err
	}
	say("dev: template ready (%d resources) after %v", len(tmpl.Resources), time.Since(start).Round(100*time.Millisecond))

	// 2. The local servers.
	twinLog, err := os.Create(filepath.Join(dir, "twin.log"))
	if err != nil {
		return 0, err
	}
	defer twinLog.Close()
	twinLogger := slog.New(slog.NewJSONHandler(twinLog, nil))
	where := "in memory"
	if o.data != "" {
		if err := os.MkdirAll(o.data, 0o755); err != nil {
			return 0, err
		}
		where = "state kept in " + rel(root, o.data)
	}
	say("dev: starting the DynamoDB (%s) and ElasticMQ", where)
	ddbSrv, err := localaws.ServeDynamoDB(ctx, "127.0.0.1:"+strconv.Itoa(o.ports.dynamoDB), ddb.Options{DataDir: o.data, Logger: twinLogger.With(obs.KeyServer, "dynamodb")})
	if err != nil {
		return 0, fmt.Errorf("%w (-dynamodb-port)", err)
	}
	defer ddbSrv.Stop()
	sqsSrv, err := localaws.StartElasticMQ(ctx)
	if err != nil {
		return 0, fmt.Errorf("%w (run `make deps`)", err)
	}
	defer sqsSrv.Stop()

	// 3. The stack.
	fnLog, err := os.Create(filepath.Join(dir, "functions.log"))
	if err != nil {
		return 0, err
	}
	defer fnLog.Close()
	urlPorts, err := reconcileURLPort(tmpl, code, o.ports.reconcile)
	if err != nil {
		return 0, err
	}
	tw, err := twin.Up(ctx, twin.Config{
		Template: tmpl, StackName: "fourlanes-dev",
		DynamoDBEndpoint: ddbSrv.Endpoint, SQSEndpoint: sqsSrv.Endpoint,
		Code:           code,
		Logger:         twinLogger,
		FunctionOutput: fnLog,
		URLPorts:       urlPorts,
		Ports:          twin.Ports{Lambda: o.ports.lambda, SQS: o.ports.sqs, S3: o.ports.s3, KMS: o.ports.kms},
		// The heartbeat runs at the template's rate, as in AWS, so the
		// stack's pulse (and its chain, ~fourlanes.heartbeat) is there to
		// watch on the twin too. Reconcile's and dlq-repair's schedules do
		// not run: they are run on demand (reconcile -local, repair -local).
		Schedules: map[string]time.Duration{keys.FnHeartbeat: 0},
	})
	if err != nil {
		return 0, fmt.Errorf("%w (the port flags: -lambda-port, -sqs-port, -s3-port, -kms-port, -reconcile-port)", err)
	}
	defer tw.Close()
	ids, err := findIDs(tw)
	if err != nil {
		return 0, err
	}
	repairName, _ := tw.FunctionName(ids.repair)
	env, _ := tw.FunctionEnv(ids.repair)
	outputs := tw.Outputs()
	st := cli.DevState{
		PID: os.Getpid(), StackName: tw.StackName(), CloudFormationEndpoint: tw.CloudFormationEndpoint(),
		ReconcileURL: tw.URLs()[ids.reconcile], RepairFunction: repairName, LambdaEndpoint: tw.InvokeEndpoint(),
		DynamoDBEndpoint: ddbSrv.Endpoint, SQSEndpoint: tw.SQSEndpoint(), S3Endpoint: tw.S3Endpoint(), KMSEndpoint: tw.KMSEndpoint(),
		Region: localaws.Region, EventsTable: env[keys.EnvEventsTable], Outputs: localOutputs(outputs), TableEnv: env,
	}
	if renv, err := tw.FunctionEnv(ids.reconcile); err == nil {
		st.CheckpointLog = renv[keys.EnvCheckpointLog]
	}
	statePath, err := cli.WriteDevState(st)
	if err != nil {
		return 0, err
	}
	defer cli.RemoveDevState()

	say("")
	say("dev: the stack is up on this machine (%d resources from the template; Ctrl-C stops it)", len(tmpl.Resources))
	say("  reconcile URL   %s   (AWS_IAM in AWS; unsigned here)", st.ReconcileURL)
	say("  Lambda API      %s   (AWS_ENDPOINT_URL_LAMBDA)", st.LambdaEndpoint)
	say("  CloudFormation  %s   (AWS_ENDPOINT_URL_CLOUDFORMATION: DescribeStacks of %s, for -stack %s)", st.CloudFormationEndpoint, st.StackName, st.StackName)
	// The twin's SQS endpoint, not ElasticMQ's own: it applies per-group deduplication for every
	// sender and gives receivers the deduplication ids as sent (twin/sqsfront.go).
	say("  DynamoDB        %s   (%s)   SQS %s   S3 %s   KMS %s", st.DynamoDBEndpoint, where, st.SQSEndpoint, st.S3Endpoint, st.KMSEndpoint)
	say("  logs            %s (the twin: invocations, deliveries, retries), %s (the functions)", rel(root, twinLog.Name()), rel(root, fnLog.Name()))
	say("  try             fourlanes reconcile -local")
	say("                  fourlanes repair -local")
	if d != nil {
		for _, l := range d.Try {
			say("                  %s", l)
		}
	}
	say("  endpoints for -local in %s; for any other process: eval \"$(fourlanes env -local)\"", rel(root, statePath))
	names := make([]string, 0, len(outputs))
	for k := range outputs {
		names = append(names, k)
	}
	sort.Strings(names)
	say("  stack outputs:")
	for _, k := range names {
		say("    %-26s %s", k, outputs[k])
	}
	say("")

	db := localaws.NewDynamoDB(ddbSrv.Endpoint)
	notes := make(chan string, 16)
	if o.demo && d != nil {
		appLog, err := os.Create(filepath.Join(dir, "app.log"))
		if err != nil {
			return 0, err
		}
		defer appLog.Close()
		denv := DemoEnv{
			DynamoDB: db, TableEnv: env, Logger: slog.New(slog.NewJSONHandler(appLog, nil)),
			Note: func(format string, a ...any) {
				select {
				case notes <- fmt.Sprintf(format, a...):
				case <-ctx.Done():
				}
			},
			ChangeFeedDLQ: ids.feedDLQ,
			QueueDepth: func(ctx context.Context, id string) (int, error) {
				v, f, err := tw.QueueDepth(ctx, id)
				return v + f, err
			},
		}
		go d.Run(ctx, denv)
	}

	// 4. The status line until Ctrl-C.
	tick := time.NewTicker(o.every)
	defer tick.Stop()
	var lastLine string
	var lastPrint time.Time
	for {
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(stdout)
			}
			say("dev: stopping (functions get SIGTERM, then the servers stop)")
			return cli.ExitOK, nil
		case n := <-notes:
			if tty {
				fmt.Fprint(stdout, "\r\033[K")
			}
			say("dev: %s", n)
		case <-tick.C:
			line := statusLine(ctx, tw, db, st.EventsTable, ids)
			switch {
			case tty:
				fmt.Fprintf(stdout, "\r\033[K%s %s", time.Now().Format("15:04:05"), line)
			case line != lastLine || time.Since(lastPrint) > 30*time.Second:
				// Not a terminal (a log file, CI): a line when something changed.
				say("%s %s", time.Now().Format("15:04:05"), line)
				lastPrint = time.Now()
			}
			lastLine = line
		}
	}
}

// localOutputs are the stack's outputs as -local reads them: the stack runs
// one backbone, whose outputs are there under their names in pkg/keys as
// well (a backbone with the id Backbone declares BackboneEventsTableName;
// -local reads EventsTableName), beside every output as the stack has it.
func localOutputs(outputs map[string]string) map[string]string {
	out := maps.Clone(outputs)
	if out == nil {
		out = map[string]string{}
	}
	if prefixes := keys.OutputBackbones(outputs); len(prefixes) == 1 {
		maps.Copy(out, keys.BackboneOutputs(outputs, prefixes[0]))
	}
	return out
}

// devTemplate synthesizes the stack, its code assets the host binaries in
// hostBin, through step (or reads the template it is given) and returns it
// with the resolver of each function's host binary.
func devTemplate(ctx context.Context, root, dir, hostBin string, o devOptions, step func(what string, f func() error) error) (*cfn.Template, twin.CodeResolver, error) {
	build := filepath.Join(root, "build")
	switch {
	case o.template != "":
		t, err := cfn.Load(o.template)
		return t, twin.CodeFromBuild(build, hostBin), err
	case o.cdkOut != "":
		p, err := cfn.StackTemplate(o.cdkOut, "")
		if err != nil {
			return nil, nil, err
		}
		t, err := cfn.Load(p)
		return t, twin.CodeFromBuild(build, hostBin), err
	}
	out := filepath.Join(dir, "cdk.out")
	var p string
	err := step(fmt.Sprintf("synthesizing the CDK app (go run %s) into %s", o.app, rel(root, out)), func() error {
		var err error
		p, err = twin.Synth(ctx, root, o.app, out, hostBin)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	t, err := cfn.Load(p)
	return t, twin.CodeFromBuild(hostBin, hostBin), err
}

// step says what it does, runs f, and while f runs says how long it has
// taken (a cold build compiles the AWS SDK and the CDK's bindings: minutes;
// f ends with the context its commands run under):
// on a terminal one line that counts the seconds, elsewhere a line every
// 15 seconds; then how long it took.
func step(w io.Writer, tty bool, what string, f func() error) error {
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- f() }()
	every := 15 * time.Second
	if tty {
		every = time.Second
		fmt.Fprintf(w, "dev: %s ...", what)
	} else {
		fmt.Fprintf(w, "dev: %s ...\n", what)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			took := time.Since(start).Round(100 * time.Millisecond)
			if tty {
				fmt.Fprint(w, "\r\033[K")
			}
			if err == nil {
				fmt.Fprintf(w, "dev: %s: done in %v\n", what, took)
			}
			return err
		case <-tick.C:
			took := time.Since(start).Round(time.Second)
			hint := ""
			if took >= 30*time.Second {
				hint = " (the first build compiles the AWS SDK and the CDK's Go bindings; later ones reuse Go's build cache)"
			}
			if tty {
				fmt.Fprintf(w, "\r\033[Kdev: %s ... %v%s", what, took, hint)
			} else {
				fmt.Fprintf(w, "dev: %s ... %v so far%s\n", what, took, hint)
			}
		}
	}
}

// reconcileURLPort pins the port of reconcile's Function URL, the one whose
// target is built from functions/reconcile; port 0 leaves it free.
func reconcileURLPort(t *cfn.Template, code twin.CodeResolver, port int) (map[string]int, error) {
	if port == 0 {
		return nil, nil
	}
	for _, u := range t.OfType(cfn.TypeURL) {
		target, _ := u.Prop("TargetFunctionArn")
		for _, id := range t.References(target) {
			fn, ok := t.Resources[id]
			if !ok || fn.Type != cfn.TypeFunction {
				continue
			}
			bin, err := code(t, fn)
			if err != nil {
				return nil, err
			}
			if filepath.Base(filepath.Dir(bin)) == keys.FnReconcile {
				return map[string]int{u.LogicalID: port}, nil
			}
		}
	}
	return nil, nil // a stack without reconcile's URL: nothing to pin
}

// resolveApp fills o.app from cdk.json and o.functions beside it, when not
// given.
func resolveApp(root string, o *devOptions) error {
	if o.app == "" {
		fromJSON, err := cdkjson.AppPackage(root)
		if err != nil {
			return fmt.Errorf("%w (or pass -app PACKAGE)", err)
		}
		o.app = fromJSON
	}
	if o.functions == "" {
		o.functions = filepath.Join(filepath.Dir(filepath.Clean(o.app)), "functions")
	}
	if fns, _ := twin.FunctionNames(root, o.functions); len(fns) == 0 {
		return fmt.Errorf("%w: no function mains in %s (<fn>/main.go): pass -functions DIR, the folder of the application's function mains",
			cli.ErrUsage, filepath.Join(root, o.functions))
	}
	return nil
}

// stackIDs are the logical IDs dev reports on, found in the template by what they are.
type stackIDs struct {
	reconcile, repair, streamFilter, durable, changefeed string
	pipe, durableMap, feedMap                            string
	durableDLQ, pipeDLQ, feedDLQ                         string
}

func findIDs(tw *twin.Twin) (stackIDs, error) {
	var ids stackIDs
	var err error
	for name, dst := range map[string]*string{
		keys.FnReconcile: &ids.reconcile, keys.FnDLQRepair: &ids.repair, keys.FnStreamFilter: &ids.streamFilter,
		keys.FnDurableConsumer: &ids.durable, keys.FnChangefeed: &ids.changefeed,
	} {
		if *dst, err = tw.FunctionByCode(name); err != nil {
			return ids, err
		}
	}
	t := tw.Template()
	for _, r := range t.OfType(cfn.TypePipe) {
		ids.pipe = r.LogicalID
	}
	for _, r := range t.OfType(cfn.TypeMapping) {
		ref, _ := r.Prop("FunctionName")
		for _, id := range t.References(ref) {
			switch id {
			case ids.durable:
				ids.durableMap = r.LogicalID
			case ids.changefeed:
				ids.feedMap = r.LogicalID
			}
		}
	}
	env, err := tw.FunctionEnv(ids.repair)
	if err != nil {
		return ids, err
	}
	for _, r := range t.OfType(cfn.TypeQueue) {
		u, _ := tw.QueueURL(r.LogicalID)
		switch u {
		case env[keys.EnvDurableDLQURL]:
			ids.durableDLQ = r.LogicalID
		case env[keys.EnvPipeDLQURL]:
			ids.pipeDLQ = r.LogicalID
		case env[keys.EnvChangeFeedDLQURL]:
			ids.feedDLQ = r.LogicalID
		}
	}
	return ids, nil
}

// statusLine is one line: events appended, delivered per lane, DLQ
// depths, iterator ages.
func statusLine(ctx context.Context, tw *twin.Twin, db *dynamodb.Client, events string, ids stackIDs) string {
	appended, err := countEvents(ctx, db, events)
	a := fmt.Sprint(appended)
	if err != nil {
		a = "?"
	}
	st := tw.Status(ctx)
	pipe, durable, feed := st.Pollers[ids.pipe], st.Pollers[ids.durableMap], st.Pollers[ids.feedMap]
	depth := func(id string) string {
		d, ok := st.DeadLetterQueues[id]
		if !ok || d.Err != nil {
			return "?"
		}
		return fmt.Sprint(d.Visible + d.InFlight)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "appended %s | delivered DURABLE %d, BEST_EFFORT %d", a, durable.Delivered, feed.Delivered)
	fmt.Fprintf(&b, " | DLQ durable %s, pipe %s, changefeed %s", depth(ids.durableDLQ), depth(ids.pipeDLQ), depth(ids.feedDLQ))
	fmt.Fprintf(&b, " | iterator age pipe %v, changefeed %v", pipe.IteratorAge.Round(time.Millisecond), feed.IteratorAge.Round(time.Millisecond))
	return b.String()
}

// countEvents counts the event rows of the log (head rows aside).
func countEvents(ctx context.Context, db *dynamodb.Client, table string) (int, error) {
	n := 0
	var start map[string]types.AttributeValue
	for {
		out, err := db.Scan(ctx, &dynamodb.ScanInput{
			TableName: aws.String(table), Select: types.SelectCount, ExclusiveStartKey: start,
			FilterExpression:          aws.String("#k = :event"),
			ExpressionAttributeNames:  map[string]string{"#k": keys.AttrKind},
			ExpressionAttributeValues: map[string]types.AttributeValue{":event": &types.AttributeValueMemberS{Value: keys.KindEvent}},
		})
		if err != nil {
			return n, err
		}
		n += int(out.Count)
		if out.LastEvaluatedKey == nil {
			return n, nil
		}
		start = out.LastEvaluatedKey
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func rel(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}
