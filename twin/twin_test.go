package twin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/lambdart"
	"github.com/fourlanes/fourlanes/twin/localaws"
	"github.com/fourlanes/fourlanes/twin/twintest"
)

var fakeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "twin-test-")
	if err != nil {
		panic(err)
	}
	fakeBin = filepath.Join(dir, "fakefn", "bootstrap")
	if out, err := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", fakeBin, "./testdata/fakefn").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build testdata/fakefn: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := twintest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

type fixture struct {
	tw   *twin.Twin
	ddb  *dynamodb.Client
	sqs  *sqs.Client
	kill func(logicalID string, l lambdart.Line) // set by a test before it acts
	mu   sync.Mutex
}

func upFixture(t *testing.T, mutate func(*cfn.Template)) *fixture {
	t.Helper()
	ddbEP, sqsEP := twintest.Endpoints(t)
	tmpl, err := cfn.Load(filepath.Join("testdata", "fixture.template.json"))
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		tmpl = tmpl.Clone()
		mutate(tmpl)
	}
	f := &fixture{ddb: localaws.NewDynamoDB(ddbEP), sqs: localaws.NewSQS(sqsEP)}
	tw, err := twin.Up(t.Context(), twin.Config{
		Template:         tmpl,
		StackName:        fmt.Sprintf("fx%08x", rand.Uint32()),
		DynamoDBEndpoint: ddbEP, SQSEndpoint: sqsEP,
		Code:           func(*cfn.Template, *cfn.Resource) (string, error) { return fakeBin, nil },
		Logger:         twintest.Logger(t),
		FunctionOutput: twintest.Writer(t),
		PollInterval:   20 * time.Millisecond,
		RetryDelay:     func(int) time.Duration { return 10 * time.Millisecond },
		OnFunctionLine: func(id string, l lambdart.Line) {
			f.mu.Lock()
			k := f.kill
			f.mu.Unlock()
			if k != nil {
				k(id, l)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tw.Close)
	f.tw = tw
	return f
}

func (f *fixture) table(t *testing.T, id string) string {
	t.Helper()
	n, err := f.tw.TableName(id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *fixture) put(t *testing.T, table string, item map[string]ddbtypes.AttributeValue) {
	t.Helper()
	if _, err := f.ddb.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatalf("put: %v", err)
	}
}

func s(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
func n(v int) ddbtypes.AttributeValue    { return &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(v)} }

// event writes an event row and its head row, as Emit would.
func (f *fixture) event(t *testing.T, tenant string, seq int, id string, extra map[string]ddbtypes.AttributeValue) {
	t.Helper()
	tbl := f.table(t, "Events")
	row := map[string]ddbtypes.AttributeValue{"tenant_id": s(tenant), "seq": n(seq), "kind": s("event"), "id": s(id)}
	for k, v := range extra {
		row[k] = v
	}
	f.put(t, tbl, row)
	f.put(t, tbl, map[string]ddbtypes.AttributeValue{"tenant_id": s(tenant), "seq": n(0), "kind": s("head"), "last_seq": n(seq)})
}

// count reads how often the fake consumers applied key.
func (f *fixture) count(t *testing.T, key string) int {
	t.Helper()
	out, err := f.ddb.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.table(t, "Deliveries")), Key: map[string]ddbtypes.AttributeValue{"pk": s(key)}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if v, ok := out.Item["n"].(*ddbtypes.AttributeValueMemberN); ok {
		c, _ := strconv.Atoi(v.Value)
		return c
	}
	return 0
}

func (f *fixture) waitCounts(t *testing.T, want map[string]int) {
	t.Helper()
	twintest.Eventually(t, 30*time.Second, "deliveries", func() (bool, string) {
		for k, w := range want {
			if got := f.count(t, k); got != w {
				return false, fmt.Sprintf("%s applied %d times, want %d", k, got, w)
			}
		}
		return true, ""
	})
}

func (f *fixture) receiveAll(t *testing.T, queueID string) []string {
	t.Helper()
	url, err := f.tw.QueueURL(queueID)
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for {
		out, err := f.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return bodies
		}
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
			_, _ = f.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
		}
	}
}

func TestTemplateResolution(t *testing.T) {
	f := upFixture(t, nil)
	out := f.tw.Outputs()
	if u := out["HelloUrl"]; !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.HasSuffix(u, "/") {
		t.Errorf("HelloUrl output: got %q, want a loopback URL", u)
	}
	if r := out["RoleArn"]; !strings.HasPrefix(r, "arn:aws:iam::000000000000:role/") {
		t.Errorf("RoleArn output (a resource the twin does not run): got %q", r)
	}
	work, _ := f.tw.QueueURL("Work")
	if out["WorkQueue"] != work || !strings.HasSuffix(work, ".fifo") {
		t.Errorf("WorkQueue output: got %q, want the FIFO queue URL %q", out["WorkQueue"], work)
	}
	if want := "us-east-1/" + f.table(t, "Items") + "/${Literal}"; out["Region"] != want {
		t.Errorf("Fn::Sub output: got %q, want %q", out["Region"], want)
	}
	env, err := f.tw.FunctionEnv("Feed")
	if err != nil {
		t.Fatal(err)
	}
	if want := "arn:aws:dynamodb:us-east-1:000000000000:table:x"; env["ITEMS_ARN"] != want {
		t.Errorf("Fn::Join/Select/Split in an environment variable: got %q, want %q", env["ITEMS_ARN"], want)
	}
	if env["DELIVERIES_TABLE"] != f.table(t, "Deliveries") {
		t.Errorf("Ref to a table: got %q, want %q", env["DELIVERIES_TABLE"], f.table(t, "Deliveries"))
	}
	if got := f.tw.DeadLetterQueues(); fmt.Sprint(got) != "[FeedFailures PipeDLQ WorkDLQ]" {
		t.Errorf("dead-letter queues: got %v", got)
	}
}

func TestFunctionURL(t *testing.T) {
	f := upFixture(t, nil)
	u, err := f.tw.URL("HelloUrl")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, u+"some/path?q=7", strings.NewReader("payload"))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/us-east-1/lambda/aws4_request, SignedHeaders=host, Signature=x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || resp.Header.Get("X-Twin") != "yes" || string(body) != "POST /some/path?7 key=AKIDEXAMPLE body=payload" {
		t.Errorf("URL response: got %d %q header %q", resp.StatusCode, body, resp.Header.Get("X-Twin"))
	}
}

// The Pipe filters head rows, enriches, and sends to the FIFO queue with
// the group and dedup id from the template's paths; the consumer's mapping
// delivers each once. A poison record is isolated by bisect and only its
// metadata reaches the Pipe's DLQ.
func TestPipeToQueueWithPoison(t *testing.T) {
	f := upFixture(t, nil)
	want := map[string]int{}
	for i := 1; i <= 7; i++ {
		tenant := []string{"t1", "t2"}[i%2]
		id := fmt.Sprintf("e%d", i)
		var extra map[string]ddbtypes.AttributeValue
		if i == 4 {
			extra = map[string]ddbtypes.AttributeValue{"poison": s("yes")}
		} else {
			want["sqs#"+id] = 1
		}
		f.event(t, tenant, i, id, extra)
	}
	f.waitCounts(t, want)
	twintest.Eventually(t, 20*time.Second, "the poison record in the Pipe DLQ", func() (bool, string) {
		st, _ := f.tw.Poller("EventsPipe")
		return st.Failed == 1, fmt.Sprintf("pipe stats %+v", st)
	})
	bodies := f.receiveAll(t, "PipeDLQ")
	if len(bodies) != 1 {
		t.Fatalf("Pipe DLQ: got %d messages, want 1", len(bodies))
	}
	var doc struct {
		RequestContext struct {
			Condition string `json:"condition"`
		} `json:"requestContext"`
		Info struct {
			Start     string `json:"startSequenceNumber"`
			End       string `json:"endSequenceNumber"`
			BatchSize int    `json:"batchSize"`
			StreamArn string `json:"streamArn"`
		} `json:"DDBStreamBatchInfo"`
	}
	if err := json.Unmarshal([]byte(bodies[0]), &doc); err != nil {
		t.Fatal(err)
	}
	arn, _ := f.tw.StreamARN("Events")
	if doc.RequestContext.Condition != twin.CondRetriesExhausted || doc.Info.BatchSize != 1 || doc.Info.Start != doc.Info.End || doc.Info.StreamArn != arn {
		t.Errorf("Pipe DLQ message: got %s", bodies[0])
	}
	if strings.Contains(bodies[0], "NewImage") || strings.Contains(bodies[0], `"yes"`) {
		t.Errorf("the DLQ message carries the record; it must carry metadata only: %s", bodies[0])
	}
	es := twin.SourceEntries(f.tw.Journal(), "EventsPipe")
	t.Logf("what the Pipe did:\n%s", twin.FormatEntries(es))
	if err := twin.CheckBisectRule(es, 2); err != nil {
		t.Error(err)
	}
	if f.tw.Journal().Count(func(e twin.Entry) bool { return e.Kind == twin.KindFiltered && e.Source == "EventsPipe" }) == 0 {
		t.Error("no head row was filtered")
	}
}

// Without the filter, head rows reach the enrichment, which passes them on
// without an id: the dedup path does not resolve and the whole batch fails,
// loudly, then bisect isolates each head row.
func TestUnresolvablePathFailsTheBatch(t *testing.T) {
	f := upFixture(t, func(tm *cfn.Template) {
		if !tm.Resources["EventsPipe"].DeleteProp("SourceParameters", "FilterCriteria") {
			t.Fatal("fixture has no filter")
		}
		tm.Resources["EventsPipe"].SetProp(0, "SourceParameters", "DynamoDBStreamParameters", "MaximumRetryAttempts")
	})
	f.event(t, "t1", 1, "e1", nil)
	f.waitCounts(t, map[string]int{"sqs#e1": 1})
	twintest.Eventually(t, 20*time.Second, "the head row dead-lettered", func() (bool, string) {
		st, _ := f.tw.Poller("EventsPipe")
		return st.Failed == 1, fmt.Sprintf("pipe stats %+v", st)
	})
	failed := f.tw.Journal().Entries(func(e twin.Entry) bool { return e.Kind == twin.KindFailed && e.Source == "EventsPipe" })
	if len(failed) == 0 || !strings.Contains(failed[0].Detail, "MessageDeduplicationId path $.id does not resolve") {
		t.Fatalf("want a loud batch failure naming the path; got %+v", failed)
	}
}

// Two events that share an id: SQS accepts both sends and drops the second.
func TestSharedDedupIDIsDropped(t *testing.T) {
	f := upFixture(t, nil)
	f.event(t, "t1", 1, "same", nil)
	f.event(t, "t1", 2, "same", nil)
	f.event(t, "t1", 3, "other", nil)
	f.waitCounts(t, map[string]int{"sqs#other": 1})
	twintest.Eventually(t, 10*time.Second, "a duplicate reported", func() (bool, string) {
		n := f.tw.Journal().Count(func(e twin.Entry) bool { return e.Kind == twin.KindDuplicate })
		return n == 1, fmt.Sprintf("%d duplicates", n)
	})
	if c := f.count(t, "sqs#same"); c != 1 {
		t.Errorf("the shared id was consumed %d times, want 1", c)
	}
}

// A process killed mid-batch fails the invocation; the messages come back
// after the visibility timeout and are applied once.
func TestKillMidBatch(t *testing.T) {
	f := upFixture(t, nil)
	var once sync.Once
	killed := make(chan bool, 1)
	f.mu.Lock()
	f.kill = func(id string, l lambdart.Line) {
		if id == "Consumer" && strings.Contains(l.Text, "consumer: got k2") {
			once.Do(func() {
				fn, _ := f.tw.Function("Consumer")
				killed <- fn.KillRequest(l.RequestID)
			})
		}
	}
	f.mu.Unlock()
	f.event(t, "slow", 1, "k1", nil)
	f.event(t, "slow", 2, "k2", nil)
	f.event(t, "slow", 3, "k3", nil)
	f.waitCounts(t, map[string]int{"sqs#k1": 1, "sqs#k2": 1, "sqs#k3": 1})
	select {
	case ok := <-killed:
		if !ok {
			t.Fatal("the kill found no process")
		}
	default:
		t.Fatal("the process was never killed")
	}
	exits := f.tw.Journal().Count(func(e twin.Entry) bool {
		return e.Kind == twin.KindInvoke && strings.Contains(e.Outcome, lambdart.ErrTypeExit)
	})
	if exits != 1 {
		t.Errorf("invocations that ended in Runtime.ExitError: got %d, want 1", exits)
	}
}

// A message the consumer reports as failed comes back until maxReceiveCount,
// then SQS's redrive moves it to the DLQ.
func TestPartialFailureRedrives(t *testing.T) {
	f := upFixture(t, nil)
	f.event(t, "bad", 1, "b1", nil)
	f.event(t, "t1", 2, "g1", nil)
	f.waitCounts(t, map[string]int{"sqs#g1": 1})
	twintest.Eventually(t, 30*time.Second, "the failed message in the FIFO DLQ", func() (bool, string) {
		v, inflight, err := f.tw.QueueDepth(context.Background(), "WorkDLQ")
		return err == nil && v+inflight == 1, fmt.Sprintf("DLQ depth %d+%d err %v", v, inflight, err)
	})
}

// The stream mapping bisects around a poison item, sends its metadata to
// the on-failure queue and delivers the rest.
func TestStreamMappingPoison(t *testing.T) {
	f := upFixture(t, nil)
	items := f.table(t, "Items")
	want := map[string]int{}
	for i := 1; i <= 6; i++ {
		it := map[string]ddbtypes.AttributeValue{"pk": s(fmt.Sprintf("o%d", i))}
		if i == 3 {
			it["poison"] = s("bad address")
		} else {
			want[fmt.Sprintf("feed#o%d", i)] = 1
		}
		f.put(t, items, it)
	}
	twintest.Eventually(t, 30*time.Second, "the poison item on the on-failure queue", func() (bool, string) {
		st, _ := f.tw.Poller("FeedMapping")
		return st.Failed == 1 && st.Delivered == 5, fmt.Sprintf("mapping stats %+v", st)
	})
	for k := range want {
		if f.count(t, k) < 1 {
			t.Errorf("%s never applied", k)
		}
	}
	es := twin.SourceEntries(f.tw.Journal(), "FeedMapping")
	t.Logf("what the mapping did:\n%s", twin.FormatEntries(es))
	if err := twin.CheckBisectRule(es, 2); err != nil {
		t.Error(err)
	}
	bodies := f.receiveAll(t, "FeedFailures")
	if len(bodies) != 1 || !strings.Contains(bodies[0], `"condition":"RetryAttemptsExhausted"`) || !strings.Contains(bodies[0], `"functionError":"Unhandled"`) || !strings.Contains(bodies[0], `"batchSize":1`) {
		t.Fatalf("on-failure queue: got %v", bodies)
	}
}

// The Invoke API answers like Lambda's, with X-Amz-Function-Error on a
// failed invocation.
func TestInvokeAPI(t *testing.T) {
	f := upFixture(t, nil)
	name, _ := f.tw.FunctionName("Feed")
	post := func(fn, body string) (*http.Response, string) {
		resp, err := http.Post(f.tw.InvokeEndpoint()+"/2015-03-31/functions/"+fn+"/invocations", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, body := post(name, `{"Records":[]}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-Amz-Function-Error") != "" || body != "null" {
		t.Errorf("invoke: got %d %q error header %q", resp.StatusCode, body, resp.Header.Get("X-Amz-Function-Error"))
	}
	resp, body = post(name, `{"Records":[{"dynamodb":{"Keys":{"pk":{"S":"x"}},"NewImage":{"poison":{"S":"y"}}}}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-Amz-Function-Error") != "Unhandled" || !strings.Contains(body, "cannot apply x") {
		t.Errorf("failed invoke: got %d %q error header %q", resp.StatusCode, body, resp.Header.Get("X-Amz-Function-Error"))
	}
	if resp, _ := post("nope", `{}`); resp.StatusCode != 404 {
		t.Errorf("unknown function: got %d, want 404", resp.StatusCode)
	}
}

// AWS refuses an SQS mapping whose function can outlive the visibility
// timeout; so does the twin.
func TestVisibilityShorterThanTimeoutIsRefused(t *testing.T) {
	ddbEP, sqsEP := twintest.Endpoints(t)
	tmpl, err := cfn.Load(filepath.Join("testdata", "fixture.template.json"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.Resources["Consumer"].SetProp(30, "Timeout")
	_, err = twin.Up(t.Context(), twin.Config{
		Template: tmpl, StackName: fmt.Sprintf("fx%08x", rand.Uint32()), DynamoDBEndpoint: ddbEP, SQSEndpoint: sqsEP,
		Code: func(*cfn.Template, *cfn.Resource) (string, error) { return fakeBin, nil },
	})
	if err == nil || !strings.Contains(err.Error(), "visibility timeout 2s is less than function Consumer timeout 30s") {
		t.Fatalf("got %v, want the visibility check", err)
	}
}

// SQS keeps FIFO order per message group however many pollers run: while
// a group has a batch in flight, no other message of it is received.
func TestFIFOGroupOrder(t *testing.T) {
	f := upFixture(t, nil)
	url, err := f.tw.QueueURL("Work")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var mu sync.Mutex
	f.mu.Lock()
	f.kill = func(id string, l lambdart.Line) {
		if id == "Consumer" && strings.HasPrefix(l.Text, "consumer: got ") {
			mu.Lock()
			got = append(got, strings.Fields(l.Text)[2]+"@"+strings.TrimPrefix(strings.Fields(l.Text)[3], "group="))
			mu.Unlock()
		}
	}
	f.mu.Unlock()
	want := map[string][]string{}
	for i := 1; i <= 4; i++ {
		for _, g := range []string{"slow", "t2"} {
			id := fmt.Sprintf("%s-%d", g, i)
			body := fmt.Sprintf(`{"tenant_id":%q,"id":%q}`, g, id)
			if _, err := f.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{
				QueueUrl: aws.String(url), MessageBody: aws.String(body), MessageGroupId: aws.String(g), MessageDeduplicationId: aws.String(id),
			}); err != nil {
				t.Fatal(err)
			}
			want[g] = append(want[g], id)
		}
	}
	counts := map[string]int{}
	for _, ids := range want {
		for _, id := range ids {
			counts["sqs#"+id] = 1
		}
	}
	f.waitCounts(t, counts)
	mu.Lock()
	defer mu.Unlock()
	per := map[string][]string{}
	for _, x := range got {
		id, g, _ := strings.Cut(x, "@")
		per[g] = append(per[g], id)
	}
	for g, ids := range want {
		if fmt.Sprint(per[g]) != fmt.Sprint(ids) {
			t.Errorf("group %s handled in order %v, want %v", g, per[g], ids)
		}
	}
}
