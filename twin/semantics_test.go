package twin_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/fourlanes/fourlanes/pkg/obs/obstest"
	"github.com/fourlanes/fourlanes/pkg/repair"
	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/lambdart"
	"github.com/fourlanes/fourlanes/twin/localaws"
	"github.com/fourlanes/fourlanes/twin/twintest"
)

var (
	fifoOnce sync.Once
	fifoBin  string
	fifoErr  error
)

// fifoFn builds testdata/fifofn once, beside fakefn (TestMain removes both).
func fifoFn(t *testing.T) string {
	t.Helper()
	fifoOnce.Do(func() {
		fifoBin = filepath.Join(filepath.Dir(filepath.Dir(fakeBin)), "fifofn", "bootstrap")
		if out, err := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", fifoBin, "./testdata/fifofn").CombinedOutput(); err != nil {
			fifoErr = fmt.Errorf("build testdata/fifofn: %v\n%s", err, out)
		}
	})
	if fifoErr != nil {
		t.Fatal(fifoErr)
	}
	return fifoBin
}

// fifoStack is a FIFO queue with per-group deduplication, as
// infra/backbone declares the DURABLE queue, consumed by fifofn.
const fifoStack = `{"Resources": {
  "Work": {"Type": "AWS::SQS::Queue", "Properties": {"FifoQueue": true, "ContentBasedDeduplication": false,
    "DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId", "VisibilityTimeout": 2}},
  "Consumer": {"Type": "AWS::Lambda::Function", "Properties": {"Runtime": "provided.al2023", "Handler": "bootstrap",
    "Timeout": 2, "Code": {"S3Key": "fifofn.zip"}}},
  "WorkMapping": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {"FunctionName": {"Ref": "Consumer"},
    "EventSourceArn": {"Fn::GetAtt": ["Work", "Arn"]}, "BatchSize": 10, "FunctionResponseTypes": ["ReportBatchItemFailures"]}}
}}`

type stack struct {
	tw    *twin.Twin
	log   *obstest.Buffer
	mu    sync.Mutex
	lines []string // what the functions printed
}

func (s *stack) printed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.lines)
}

// upStack brings a template up on real ElasticMQ (and DynamoDB), logging
// to the test and to a buffer the test can search.
func upStack(t *testing.T, template string, code string, mutate func(*cfn.Template)) *stack {
	t.Helper()
	tmpl, err := cfn.Parse([]byte(template))
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(tmpl)
	}
	ddbEP, sqsEP := twintest.Endpoints(t)
	s := &stack{log: &obstest.Buffer{}}
	tw, err := twin.Up(t.Context(), twin.Config{
		Template: tmpl, StackName: fmt.Sprintf("sem%08x", rand.Uint32()),
		DynamoDBEndpoint: ddbEP, SQSEndpoint: sqsEP,
		Code:           func(*cfn.Template, *cfn.Resource) (string, error) { return code, nil },
		Logger:         slog.New(slog.NewTextHandler(io.MultiWriter(twintest.Writer(t), s.log), nil)),
		FunctionOutput: twintest.Writer(t),
		PollInterval:   20 * time.Millisecond,
		OnFunctionLine: func(_ string, l lambdart.Line) {
			s.mu.Lock()
			s.lines = append(s.lines, l.Text)
			s.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tw.Close)
	s.tw = tw
	return s
}

// TestMaxRecordAgeBelowSixtyIsRefused: AWS takes MaximumRecordAgeInSeconds
// -1 or 60..604800 on a stream source and refuses 0..59 (see maxRecordAge
// in mapping.go for the pages); so does the twin, naming the resource and
// the value. The sources are streams of no stack (no server is needed), so
// an accepted value fails later, on the source.
func TestMaxRecordAgeBelowSixtyIsRefused(t *testing.T) {
	const pipe = `{"Resources": {"P": {"Type": "AWS::Pipes::Pipe", "Properties": {
	  "Source": "arn:aws:dynamodb:us-east-1:000000000000:table/x/stream/1", "Target": "arn:aws:sqs:us-east-1:000000000000:q",
	  "SourceParameters": {"DynamoDBStreamParameters": {"StartingPosition": "TRIM_HORIZON", "MaximumRecordAgeInSeconds": %d}}}}}}`
	const mapping = `{"Resources": {
	  "F": {"Type": "AWS::Lambda::Function", "Properties": {"Runtime": "provided.al2023", "Handler": "bootstrap", "Code": {"S3Key": "f.zip"}}},
	  "M": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {"FunctionName": {"Ref": "F"},
	    "EventSourceArn": "arn:aws:dynamodb:us-east-1:000000000000:table/x/stream/1", "StartingPosition": "TRIM_HORIZON",
	    "MaximumRecordAgeInSeconds": %d}}}}`
	for _, tc := range []struct {
		template, id, prop string
	}{
		{pipe, "P (AWS::Pipes::Pipe)", "SourceParameters.DynamoDBStreamParameters.MaximumRecordAgeInSeconds"},
		{mapping, "M (AWS::Lambda::EventSourceMapping)", "MaximumRecordAgeInSeconds"},
	} {
		for _, age := range []int{-2, 0, 1, 30, 59, 60, 3600, 604800, 604801} {
			t.Run(fmt.Sprintf("%s/%d", strings.Fields(tc.id)[0], age), func(t *testing.T) {
				tmpl, err := cfn.Parse(fmt.Appendf(nil, tc.template, age))
				if err != nil {
					t.Fatal(err)
				}
				_, err = twin.Up(t.Context(), twin.Config{
					Template: tmpl, StackName: "age", DynamoDBEndpoint: "http://127.0.0.1:9", SQSEndpoint: "http://127.0.0.1:9",
					Code: func(*cfn.Template, *cfn.Resource) (string, error) { return fakeBin, nil },
				})
				if err == nil {
					t.Fatal("Up succeeded; want an error")
				}
				refused := age != -1 && (age < 60 || age > 604800)
				want := fmt.Sprintf("%s: %s %d: must be -1 (forever) or between 60 and 604800 (inclusive)", tc.id, tc.prop, age)
				if got := strings.Contains(err.Error(), want); got != refused {
					t.Errorf("MaximumRecordAgeInSeconds %d: got %q; want refused=%v (%q)", age, err, refused, want)
				}
				if !refused && strings.Contains(err.Error(), "MaximumRecordAgeInSeconds") {
					t.Errorf("MaximumRecordAgeInSeconds %d is valid, got %q", age, err)
				}
			})
		}
	}
}

// TestGroupScopedDeduplicationForEverySender: on a FIFO queue with
// DeduplicationScope=messageGroup, SQS deduplicates per message group. A
// client of the twin's SQS endpoint (here the test; in the stack,
// dlq-repair and every other function, whose AWS_ENDPOINT_URL_SQS it is)
// sends one deduplication id in two groups: both are delivered; sent again
// in one group within five minutes, it is dropped (and journaled); and
// every receiver sees the id as sent, never the group-scoped one the twin
// gave ElasticMQ, whether it reads through the endpoint or is a function
// fed by the queue's mapping.
func TestGroupScopedDeduplicationForEverySender(t *testing.T) {
	s := upStack(t, fifoStack, fifoFn(t), func(tm *cfn.Template) {
		tm.Resources["WorkMapping"].SetProp(false, "Enabled") // the test receives first
	})
	fn, err := s.tw.Function("Consumer")
	if err != nil {
		t.Fatal(err)
	}
	if got := fn.Spec().Env["AWS_ENDPOINT_URL_SQS"]; got != s.tw.SQSEndpoint() {
		t.Fatalf("functions' AWS_ENDPOINT_URL_SQS: got %q, want the twin's endpoint %q", got, s.tw.SQSEndpoint())
	}
	url, err := s.tw.QueueURL("Work")
	if err != nil {
		t.Fatal(err)
	}
	q := localaws.NewSQS(s.tw.SQSEndpoint())
	ctx := context.Background()
	send := func(group, dedup, body string) string {
		t.Helper()
		out, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body),
			MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedup)})
		if err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
		return aws.ToString(out.MessageId)
	}
	first := send("tenant-a", "evt-1", "a1")
	send("tenant-b", "evt-1", "b1")
	if again := send("tenant-a", "evt-1", "a1 again"); again != first {
		t.Errorf("the duplicate's message id: got %s, want the first message's %s (SQS answers a duplicate with it)", again, first)
	}
	// A batch: the id once more in a third group, twice (the second dropped).
	out, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.SendMessageBatchRequestEntry{
		{Id: aws.String("0"), MessageBody: aws.String("c1"), MessageGroupId: aws.String("tenant-c"), MessageDeduplicationId: aws.String("evt-1")},
		{Id: aws.String("1"), MessageBody: aws.String("c1 again"), MessageGroupId: aws.String("tenant-c"), MessageDeduplicationId: aws.String("evt-1")},
	}})
	if err != nil || len(out.Successful) != 2 {
		t.Fatalf("send batch: %+v, %v; want both entries accepted", out, err)
	}

	got := map[string]string{} // body → deduplication id received
	for deadline := time.Now().Add(10 * time.Second); len(got) < 3 && time.Now().Before(deadline); {
		r, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			got[aws.ToString(m.Body)] = m.Attributes["MessageDeduplicationId"]
			if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := map[string]string{"a1": "evt-1", "b1": "evt-1", "c1": "evt-1"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("received (body → MessageDeduplicationId): got %v, want %v", got, want)
	}
	// Nothing else arrives: the duplicates were dropped, not delayed.
	r, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil || len(r.Messages) != 0 {
		t.Errorf("after the three: got %d more messages (err %v), want none", len(r.Messages), err)
	}
	dups := s.tw.Journal().Entries(func(e twin.Entry) bool { return e.Kind == twin.KindDuplicate })
	if len(dups) != 2 {
		t.Errorf("journaled duplicates: got %d, want 2:\n%s", len(dups), twin.FormatEntries(dups))
	}

	// ElasticMQ itself holds group-scoped ids, which the endpoint undid.
	send("tenant-a", "evt-2", "a2")
	_, sqsEP := twintest.Endpoints(t)
	peek, err := localaws.NewSQS(sqsEP).ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 1, VisibilityTimeout: 0,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
	if err != nil || len(peek.Messages) != 1 {
		t.Fatalf("peek at ElasticMQ: %d messages, %v; want 1", len(peek.Messages), err)
	}
	if w := peek.Messages[0].Attributes["MessageDeduplicationId"]; w == "evt-2" || !strings.HasSuffix(w, "~evt-2") {
		t.Errorf("ElasticMQ holds deduplication id %q; want a group-scoped form of evt-2", w)
	}
}

// TestFIFOPartialResponseGapIsWarned: a FIFO consumer that reports a
// message failed must also report the later messages of its group ("stop
// processing messages after the first failure and return all failed and
// unprocessed messages"); fifofn does not, and the twin says so at WARN,
// naming the function, queue, group and messages. fifofn prints the
// deduplication ids it gets: the ones sent, though the two groups share one.
func TestFIFOPartialResponseGapIsWarned(t *testing.T) {
	s := upStack(t, fifoStack, fifoFn(t), nil)
	url, err := s.tw.QueueURL("Work")
	if err != nil {
		t.Fatal(err)
	}
	q := localaws.NewSQS(s.tw.SQSEndpoint())
	out, err := q.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.SendMessageBatchRequestEntry{
		{Id: aws.String("0"), MessageBody: aws.String("fail"), MessageGroupId: aws.String("tenant-a"), MessageDeduplicationId: aws.String("evt-1")},
		{Id: aws.String("1"), MessageBody: aws.String("ok"), MessageGroupId: aws.String("tenant-a"), MessageDeduplicationId: aws.String("evt-2")},
		{Id: aws.String("2"), MessageBody: aws.String("other"), MessageGroupId: aws.String("tenant-b"), MessageDeduplicationId: aws.String("evt-1")},
	}})
	if err != nil || len(out.Successful) != 3 {
		t.Fatalf("send: %+v, %v", out, err)
	}
	ids := map[string]string{}
	for _, e := range out.Successful {
		ids[aws.ToString(e.Id)] = aws.ToString(e.MessageId)
	}
	var warning string
	twintest.Eventually(t, 30*time.Second, "the WARN line", func() (bool, string) {
		for _, l := range s.log.Lines() {
			if strings.Contains(l, "level=WARN") && strings.Contains(l, "batchItemFailures") {
				warning = l
				return true, ""
			}
		}
		return false, fmt.Sprintf("function printed %q", s.printed())
	})
	t.Logf("warning: %s", warning)
	for _, want := range []string{"function=Consumer", "queue=Work", "group=tenant-a", "failed_message_id=" + ids["0"], "unreported_message_ids=" + ids["1"]} {
		if !strings.Contains(warning, want) {
			t.Errorf("the warning lacks %q", want)
		}
	}
	printed := strings.Join(s.printed(), "\n")
	for _, want := range []string{
		"fifofn: got " + ids["0"] + " group=tenant-a dedup=evt-1 body=fail",
		"fifofn: got " + ids["2"] + " group=tenant-b dedup=evt-1 body=other",
	} {
		if !strings.Contains(printed, want) {
			t.Errorf("fifofn did not print %q; it printed:\n%s", want, printed)
		}
	}
}

// TestOnFailureMetadataSpansTheBatch: AWS's on-failure record for a stream
// mapping describes a batch (DDBStreamBatchInfo: first and last sequence
// number, batchSize), not one record. Without bisect, a batch that fails
// until its retries run out goes to the destination as one message that
// spans every record of it; pkg/repair reads it, and the range it names is
// exactly the batch's records on the stream.
func TestOnFailureMetadataSpansTheBatch(t *testing.T) {
	f := upFixture(t, func(tm *cfn.Template) {
		m := tm.Resources["FeedMapping"]
		m.SetProp(false, "BisectBatchOnFunctionError")
		m.SetProp(1, "MaximumRetryAttempts")
		m.SetProp(2, "MaximumBatchingWindowInSeconds") // the four writes make one batch
	})
	items := f.table(t, "Items")
	for i := 1; i <= 4; i++ {
		it := map[string]ddbtypes.AttributeValue{"pk": s(fmt.Sprintf("o%d", i))}
		if i == 2 {
			it["poison"] = s("bad address")
		}
		f.put(t, items, it)
	}
	twintest.Eventually(t, 30*time.Second, "the batch given up", func() (bool, string) {
		st, _ := f.tw.Poller("FeedMapping")
		n := f.tw.Journal().Count(func(e twin.Entry) bool { return e.Source == "FeedMapping" && e.Kind == twin.KindDestination })
		return st.Failed == 4 && n > 0, fmt.Sprintf("mapping stats %+v, %d destination entries", st, n)
	})
	es := twin.SourceEntries(f.tw.Journal(), "FeedMapping")
	t.Logf("what the mapping did:\n%s", twin.FormatEntries(es))
	var seqs []string
	for _, e := range es {
		if e.Kind == twin.KindDestination {
			seqs = append(seqs, e.Items...)
		}
	}
	bodies := f.receiveAll(t, "FeedFailures")
	if len(bodies) != 1 || len(seqs) != 4 {
		t.Fatalf("on-failure queue: got %d messages for %d records %v, want 1 for the batch of 4", len(bodies), len(seqs), seqs)
	}
	bi, err := repair.ParseBatchInfo([]byte(bodies[0]))
	if err != nil {
		t.Fatalf("pkg/repair cannot read the twin's on-failure record: %v\n%s", err, bodies[0])
	}
	arn, _ := f.tw.StreamARN("Items")
	if bi.BatchSize != 4 || bi.StartSequenceNumber != seqs[0] || bi.EndSequenceNumber != seqs[3] || bi.StreamARN != arn {
		t.Errorf("DDBStreamBatchInfo: got %+v, want batchSize 4 from %s to %s on %s", bi, seqs[0], seqs[3], arn)
	}
	if from, to, ok := bi.Window(); !ok || to.Before(from) {
		t.Errorf("arrival window: %v..%v (%v)", from, to, ok)
	}
	// What dlq-repair reads for the range: the batch's records, all of them.
	ddbEP, _ := twintest.Endpoints(t)
	st := localaws.NewDynamoDBStreams(ddbEP)
	it, err := st.GetShardIterator(context.Background(), &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(bi.StreamARN), ShardId: aws.String(bi.ShardID),
		ShardIteratorType: streamtypes.ShardIteratorTypeAtSequenceNumber, SequenceNumber: aws.String(bi.StartSequenceNumber)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := st.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range out.Records {
		if seq := aws.ToString(r.Dynamodb.SequenceNumber); len(got) < bi.BatchSize {
			got = append(got, seq)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(seqs) {
		t.Errorf("the stream from startSequenceNumber: got %v, want the batch %v", got, seqs)
	}
}

// TestPipeDedupIsPerGroup: the Pipe's own sends are scoped too. Two events
// that share an id in two tenants (the Pipe's message groups) are both
// delivered; within one tenant the second is dropped.
func TestPipeDedupIsPerGroup(t *testing.T) {
	f := upFixture(t, nil)
	var mu sync.Mutex
	var got []string
	f.mu.Lock()
	f.kill = func(id string, l lambdart.Line) {
		if id == "Consumer" && strings.HasPrefix(l.Text, "consumer: got shared ") {
			mu.Lock()
			got = append(got, l.Text)
			mu.Unlock()
		}
	}
	f.mu.Unlock()
	f.event(t, "t1", 1, "shared", nil)
	f.event(t, "t2", 2, "shared", nil)
	f.event(t, "t2", 3, "shared", nil) // dropped: t2 sent it already
	f.event(t, "t2", 4, "last", nil)
	f.waitCounts(t, map[string]int{"sqs#shared": 2, "sqs#last": 1})
	twintest.Eventually(t, 10*time.Second, "the duplicate journaled", func() (bool, string) {
		n := f.tw.Journal().Count(func(e twin.Entry) bool { return e.Kind == twin.KindDuplicate })
		return n == 1, fmt.Sprintf("%d duplicates", n)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Errorf("the consumer got the shared id %d times, want 2 (one per tenant): %q", len(got), got)
	}
}
