package twin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/lambdart"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// CodeResolver returns the host-architecture bootstrap to run for a
// function resource of t.
type CodeResolver func(t *cfn.Template, fn *cfn.Resource) (string, error)

// DefaultPollInterval is how often the twin reads an idle stream shard
// unless Config.PollInterval says otherwise. AWS documents that Lambda reads
// a DynamoDB stream shard 4 times a second (every 250 ms). 100 ms is the
// longest period at which the twin's commit → handler p50, on both lanes, is
// no more than AWS's would be (the mean wait for that poll plus the twin's
// own work), as `make bench` measures it (its latency section): so `fourlanes
// dev` is not slower than AWS, and reads each idle shard 10 times a second,
// not 40. Tests poll at 25 ms (twin/testkit).
const DefaultPollInterval = 100 * time.Millisecond

// Config brings a stack up locally.
type Config struct {
	// Template is the synthesized stack template. The twin never changes it.
	Template *cfn.Template
	// StackName names the stack (AWS::StackName) and prefixes every local
	// resource name; give each twin sharing servers its own.
	StackName string
	// DynamoDBEndpoint and SQSEndpoint are the local servers
	// (internal/localaws); the DynamoDB endpoint serves the Streams API
	// too, as twin/ddb does.
	DynamoDBEndpoint, SQSEndpoint string
	// Code finds each function's host bootstrap.
	Code CodeResolver
	// Logger receives the twin's own log: every journal entry, resource
	// creation, warnings. Nil discards it.
	Logger *slog.Logger
	// FunctionOutput receives every line the functions print, prefixed with
	// the function's logical ID. Nil discards them.
	FunctionOutput io.Writer
	// OnFunctionLine, if set, is called for every line a function prints
	// (after FunctionOutput); tests use it to act at a precise moment, such
	// as killing a process mid-batch. It must not block.
	OnFunctionLine func(logicalID string, l lambdart.Line)
	// PollInterval is how often an idle stream shard is read (queues are
	// read with a long poll, as Lambda reads them); zero means
	// DefaultPollInterval.
	PollInterval time.Duration
	// RetryDelay is the wait before retrying a failed stream batch (n
	// counts the failures of that batch, from 1); nil means exponential
	// from 100 ms up to 2 s. AWS backs off too; the twin keeps it short.
	RetryDelay func(n int) time.Duration
	// DefaultConcurrency caps the execution environments of a function
	// that reserves none; zero means 2 (two cores).
	DefaultConcurrency int
	// URLPorts pins the port of a Function URL by the URL resource's
	// logical ID; others get a free port.
	URLPorts map[string]int
	// Ports pins the loopback ports of the twin's own endpoints, so that
	// their URLs stay the same across restarts ('fourlanes dev' does);
	// zero: a free port.
	Ports Ports
	// Now is the clock the pollers read record ages with; nil means time.Now.
	Now func() time.Time
	// Schedules runs the template's EventBridge Scheduler schedules whose
	// target is the function built from the named folder (keys.Fn*, e.g.
	// "heartbeat"), every given period; zero takes the schedule's own
	// rate(). Schedules whose target is not named do not run, so a test
	// invokes reconcile and dlq-repair when it chooses.
	Schedules map[string]time.Duration
}

// Ports are the loopback ports of a twin's own endpoints (Config.Ports).
type Ports struct {
	// Lambda serves the Invoke API and CloudFormation's DescribeStacks
	// (InvokeEndpoint, CloudFormationEndpoint).
	Lambda int
	// SQS is the twin's SQS endpoint in front of ElasticMQ (SQSEndpoint).
	SQS int
	S3  int
	KMS int
}

// listen listens on the loopback port (0: a free one) for the endpoint
// what, and says which endpoint and port when it cannot.
func listen(what string, port int) (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return nil, fmt.Errorf("%s endpoint on port %d: %w", what, port, err)
	}
	return ln, nil
}

// Twin is a stack running locally.
type Twin struct {
	cfg     Config
	t       *cfn.Template
	rv      *cfn.Resolver
	log     *slog.Logger
	journal *Journal

	ddb     *dynamodb.Client
	streams *dynamodbstreams.Client
	sqs     *sqs.Client

	resources map[string]*resource
	creating  map[string]bool
	byName    map[string]*function // function name and ARN → function

	invokeLn  net.Listener
	invokeSrv *http.Server
	lines     lineRing
	metrics   metricStore // the functions' EMF metrics, the alarms' states (alarms.go)
	// failureQueues are the Pipe DLQs and on-failure destinations.
	failureQueues []string
	outMu         sync.Mutex // FunctionOutput is written from many processes' readers

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closers []func()
	front   sqsFront // the SQS endpoint functions get (sqsfront.go)
	// schedules are the schedules running (schedule.go), by logical ID.
	schedules map[string]*schedule
	local     localAWS // KMS and S3 (kms.go, s3.go)
}

// resource is one local resource and the identities its Ref and
// Fn::GetAtt resolve to.
type resource struct {
	id    string
	typ   string
	ref   string
	attrs map[string]any

	table    *table
	queue    *queue
	function *function
	url      *functionURL
	poller   poller
}

// poller is a Pipe or an event source mapping.
type poller interface {
	start(ctx context.Context, wg *sync.WaitGroup)
	stats() PollerStats
}

// Up creates every resource of cfg.Template that the twin reproduces on
// the local servers, starts the functions' Runtime API, the pollers and the
// Function URLs, and returns the running twin. Close stops it.
func Up(ctx context.Context, cfg Config) (*Twin, error) {
	if cfg.Template == nil {
		return nil, errors.New("twin: no template")
	}
	if cfg.StackName == "" {
		return nil, errors.New("twin: no stack name")
	}
	if cfg.DynamoDBEndpoint == "" || cfg.SQSEndpoint == "" {
		return nil, errors.New("twin: DynamoDB and SQS endpoints are required")
	}
	if cfg.Code == nil {
		return nil, errors.New("twin: no code resolver")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.RetryDelay == nil {
		cfg.RetryDelay = func(n int) time.Duration {
			d := 100 * time.Millisecond << min(n-1, 5)
			return min(d, 2*time.Second)
		}
	}
	if cfg.DefaultConcurrency <= 0 {
		cfg.DefaultConcurrency = 2
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	tw := &Twin{
		cfg: cfg, t: cfg.Template, log: log, journal: newJournal(log),
		ddb:       localaws.NewDynamoDB(cfg.DynamoDBEndpoint),
		streams:   localaws.NewDynamoDBStreams(cfg.DynamoDBEndpoint),
		sqs:       localaws.NewSQS(cfg.SQSEndpoint),
		resources: map[string]*resource{}, creating: map[string]bool{}, byName: map[string]*function{},
		schedules: map[string]*schedule{},
	}
	tw.rv = &cfn.Resolver{T: cfg.Template, IDs: tw, Pseudo: cfn.Pseudo{
		Region: localaws.Region, AccountID: localaws.AccountID, StackName: cfg.StackName,
		StackID: "arn:aws:cloudformation:" + localaws.Region + ":" + localaws.AccountID + ":stack/" + cfg.StackName + "/local",
	}}
	tw.ctx, tw.cancel = context.WithCancel(context.Background())
	if err := tw.up(ctx); err != nil {
		tw.Close()
		return nil, err
	}
	return tw, nil
}

func (tw *Twin) up(ctx context.Context) error {
	// The Invoke API first: functions get its endpoint in their environment.
	if err := tw.startInvokeAPI(); err != nil {
		return err
	}
	// A pinned port is taken now or fails Up, rather than on first use,
	// where a stack without queues, keys or buckets would never see it.
	if tw.cfg.Ports.SQS != 0 {
		if err := tw.startFront(); err != nil {
			return err
		}
	}
	if tw.cfg.Ports.S3 != 0 || tw.cfg.Ports.KMS != 0 {
		if tw.startLocalAWS(); tw.local.err != nil {
			return tw.local.err
		}
	}
	// Data resources and functions in dependency order (ensure follows the
	// references), then the pollers, which only consume.
	order := []string{cfn.TypeTable, cfn.TypeGlobalTable, cfn.TypeQueue, cfn.TypeFunction, cfn.TypeURL, cfn.TypePipe, cfn.TypeMapping}
	for _, typ := range order {
		for _, r := range tw.t.OfType(typ) {
			if _, err := tw.ensure(ctx, r.LogicalID); err != nil {
				return err
			}
		}
	}
	// Everything else gets a placeholder identity now, so the resource map
	// is never written once Up returns (handlers read it unlocked).
	for _, id := range tw.t.LogicalIDs() {
		if _, err := tw.ensure(ctx, id); err != nil {
			return err
		}
	}
	for _, id := range tw.t.LogicalIDs() {
		r := tw.resources[id]
		if r != nil && r.poller != nil {
			r.poller.start(tw.ctx, &tw.wg)
		}
	}
	return tw.startSchedules()
}

// Close stops the pollers, the servers and every function process. It
// leaves the tables and queues on the local servers (they are in memory and
// die with them).
func (tw *Twin) Close() {
	tw.cancel()
	tw.wg.Wait()
	// Servers and functions stop together: each function's processes get
	// their shutdown grace at the same time, not one function after another.
	var wg sync.WaitGroup
	for _, c := range tw.closers {
		wg.Add(1)
		go func() { defer wg.Done(); c() }()
	}
	wg.Wait()
	tw.closers = nil
}

// Journal returns the record of what the twin did.
func (tw *Twin) Journal() *Journal { return tw.journal }

// Template returns the template the twin runs.
func (tw *Twin) Template() *cfn.Template { return tw.t }

// ensure creates the resource id if it is one the twin reproduces, after
// the resources its properties refer to.
func (tw *Twin) ensure(ctx context.Context, id string) (*resource, error) {
	if r, ok := tw.resources[id]; ok {
		return r, nil
	}
	res, ok := tw.t.Resources[id]
	if !ok {
		return nil, fmt.Errorf("no resource %s", id)
	}
	if tw.creating[id] {
		return nil, fmt.Errorf("%s: circular reference", id)
	}
	tw.creating[id] = true
	defer delete(tw.creating, id)

	if res.Condition != "" {
		on, err := tw.rv.Condition(res.Condition)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		if !on {
			r := tw.placeholder(res)
			tw.resources[id] = r
			return r, nil
		}
	}
	var r *resource
	var err error
	switch res.Type {
	case cfn.TypeTable, cfn.TypeGlobalTable:
		r, err = tw.createTable(ctx, res)
	case cfn.TypeQueue:
		r, err = tw.createQueue(ctx, res)
	case cfn.TypeFunction:
		r, err = tw.createFunction(ctx, res)
	case cfn.TypeURL:
		r, err = tw.createURL(ctx, res)
	case cfn.TypePipe:
		r, err = tw.createPipe(ctx, res)
	case cfn.TypeMapping:
		r, err = tw.createMapping(ctx, res)
	case "AWS::KMS::Key":
		r, err = tw.createKey(ctx, res)
	case "AWS::S3::Bucket":
		r, err = tw.createBucket(ctx, res)
	default:
		r = tw.placeholder(res)
	}
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", id, res.Type, err)
	}
	tw.resources[id] = r
	return r, nil
}

// placeholder stands for a resource the twin does not reproduce (IAM,
// logs, alarms…): Ref and Arn resolve to names and ARNs of the usual shape
// (an SNS topic's Ref to its ARN, as CloudFormation's), so outputs that
// mention them still print. Alarms are evaluated and topics receive their
// notifications all the same (alarms.go).
func (tw *Twin) placeholder(res *cfn.Resource) *resource {
	service := "cloudformation"
	if parts := strings.Split(res.Type, "::"); len(parts) == 3 {
		service = strings.ToLower(parts[1])
	}
	name := tw.name(res.LogicalID, 64)
	arn := fmt.Sprintf("arn:aws:%s:%s:%s:%s", service, localaws.Region, localaws.AccountID, name)
	if service == "iam" {
		arn = fmt.Sprintf("arn:aws:iam::%s:%s/%s", localaws.AccountID, strings.ToLower(strings.Split(res.Type, "::")[2]), name)
	}
	r := &resource{id: res.LogicalID, typ: res.Type, ref: name, attrs: map[string]any{"Arn": arn}}
	if res.Type == "AWS::SNS::Topic" { // its Ref is its ARN (alarm actions name it so)
		r.ref, r.attrs["TopicArn"], r.attrs["TopicName"] = arn, arn, name
	}
	return r
}

// Ref answers cfn.Identities.
func (tw *Twin) Ref(id string) (string, error) {
	r, err := tw.ensure(tw.ctx, id)
	if err != nil {
		return "", err
	}
	return r.ref, nil
}

// GetAtt answers cfn.Identities.
func (tw *Twin) GetAtt(id, attr string) (any, error) {
	r, err := tw.ensure(tw.ctx, id)
	if err != nil {
		return nil, err
	}
	v, ok := r.attrs[attr]
	if !ok {
		names := make([]string, 0, len(r.attrs))
		for k := range r.attrs {
			names = append(names, k)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("the twin's %s has no attribute %s (it has %s)", r.typ, attr, strings.Join(names, ", "))
	}
	return v, nil
}

// name is the local physical name of a resource: stack name and logical
// ID, cut to max characters.
func (tw *Twin) name(logicalID string, max int) string {
	n := tw.cfg.StackName + "-" + logicalID
	if len(n) > max {
		n = n[:max]
	}
	return n
}

func arnOf(service, resource string) string {
	return "arn:aws:" + service + ":" + localaws.Region + ":" + localaws.AccountID + ":" + resource
}

// Outputs returns the template's outputs resolved against the local stack;
// an output that cannot be resolved reads "(unresolved: reason)".
func (tw *Twin) Outputs() map[string]string {
	out := map[string]string{}
	for name, o := range tw.t.Outputs {
		v, err := tw.rv.Resolve(o.Value)
		if err != nil {
			out[name] = "(unresolved: " + err.Error() + ")"
			continue
		}
		switch x := v.(type) {
		case string:
			out[name] = x
		case float64:
			out[name] = strconv.FormatFloat(x, 'f', -1, 64)
		default:
			out[name] = fmt.Sprint(x)
		}
	}
	return out
}

// lookup returns the resource with logical ID id of one of the given types.
func (tw *Twin) lookup(id string, types ...string) (*resource, error) {
	r, ok := tw.resources[id]
	if !ok {
		return nil, fmt.Errorf("twin: no resource %s", id)
	}
	for _, t := range types {
		if r.typ == t {
			return r, nil
		}
	}
	return nil, fmt.Errorf("twin: %s is a %s, not a %s", id, r.typ, strings.Join(types, " or "))
}

func itoa(n int) string { return strconv.Itoa(n) }
