package backbone

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/infra/backbone/backbonetest"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// pinnedIDs are the logical IDs every backbone pins (after its prefix), by
// resource type; a tracked entity's mapping adds LogicalChangeFeedESM + its
// name.
var pinnedIDs = map[string]string{
	LogicalEventsTable: "AWS::DynamoDB::Table", LogicalStateTable: "AWS::DynamoDB::Table", LogicalChangeFeedTable: "AWS::DynamoDB::Table",
	LogicalDurableQueue: "AWS::SQS::Queue", LogicalDurableDLQ: "AWS::SQS::Queue", LogicalPipeDLQ: "AWS::SQS::Queue", LogicalChangeFeedDLQ: "AWS::SQS::Queue",
	LogicalEventsPipe: "AWS::Pipes::Pipe", LogicalNotaryESM: "AWS::Lambda::EventSourceMapping", LogicalTamperStateESM: "AWS::Lambda::EventSourceMapping", LogicalAlarmTopic: "AWS::SNS::Topic",
	LogicalCheckpointKey: "AWS::KMS::Key", LogicalCheckpointBucket: "AWS::S3::Bucket",
}

// errorsOf are a stack's error annotations (a synthesis error each).
func errorsOf(st awscdk.Stack) []string {
	var out []string
	for _, m := range *assertions.Annotations_FromStack(st).FindError(jsii.String("*"), assertions.Match_AnyValue()) {
		out = append(out, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data))
	}
	return out
}

// TestTwoBackbonesInOneStack: a team's stack holds two backbones, each
// running its own application over its own tables. It synthesizes; each
// backbone pins its stateful resources and names its outputs after its own
// prefix (its id), signs checkpoints of a log of its own, and notifies a
// topic of its own; the CLI tells the two apart by their outputs.
func TestTwoBackbonesInOneStack(t *testing.T) {
	code := t.TempDir()
	if err := backbonetest.WriteCode(code); err != nil {
		t.Fatal(err)
	}
	a := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	st := awscdk.NewStack(a, jsii.String("Shop"), nil)
	widgets := testTable(st, "Widgets", awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES)
	listing := testTable(st, "Listing", "")
	books := testTable(st, "Books", awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES)
	loans, shelf := testTable(st, "Loans", ""), testTable(st, "Shelf", "")
	bs := map[string]*Backbone{
		"Workshop": New(st, "Workshop", &Props{App: widgetApp, CodeRoot: code, AlarmEmail: testAlarmEmail,
			Tracked: map[string]awsdynamodb.ITable{widgetEntity: widgets}, Tables: map[string]awsdynamodb.ITable{envListingTable: listing}}),
		"Lending": New(st, "Lending", &Props{App: libraryApp, CodeRoot: code, AlarmEmail: testAlarmEmail,
			Tracked: map[string]awsdynamodb.ITable{"BOOK": books}, Tables: map[string]awsdynamodb.ITable{envLoans: loans, envShelf: shelf}}),
	}
	if errs := errorsOf(st); len(errs) > 0 {
		t.Fatalf("synthesis errors: %v", errs)
	}
	doc, err := backbonetest.FromStack(st)
	if err != nil {
		t.Fatalf("two backbones in one stack do not synthesize: %v", err)
	}
	entity := map[string]string{"Workshop": widgetEntity, "Lending": "BOOK"}
	outputs := map[string]string{}
	for name := range doc.Outputs() {
		outputs[name] = "x"
	}
	for prefix, b := range bs {
		t.Run(prefix, func(t *testing.T) {
			if b.Prefix() != prefix {
				t.Errorf("Prefix() = %q, want %q", b.Prefix(), prefix)
			}
			want := map[string]string{LogicalChangeFeedESM + entity[prefix]: "AWS::Lambda::EventSourceMapping"}
			for id, typ := range pinnedIDs {
				want[id] = typ
			}
			for id, typ := range want {
				if _, ok := doc.Resources(typ)[prefix+id]; !ok {
					t.Errorf("no %s with logical ID %s", typ, prefix+id)
				}
				if _, ok := doc.Resources(typ)[id]; ok {
					t.Errorf("a %s has the bare logical ID %s", typ, id)
				}
			}
			for _, name := range keys.OutputNames {
				if _, ok := doc.Outputs()[b.OutputName(name)]; !ok {
					t.Errorf("no output %s", b.OutputName(name))
				}
			}
			out, _ := doc.Outputs()[prefix+keys.OutputEventsTable].(map[string]any)
			if diff := cmp.Diff(ref(prefix+LogicalEventsTable), out["Value"]); diff != "" {
				t.Errorf("output %s (-want +got):\n%s", prefix+keys.OutputEventsTable, diff)
			}
			fn := backbonetest.Props(doc.Resources("AWS::Lambda::Function")[*st.GetLogicalId(b.Reconcile.Function.Fn.Node().DefaultChild().(awscdk.CfnElement))])
			log, _ := json.Marshal(fn["Environment"].(map[string]any)["Variables"].(map[string]any)[keys.EnvCheckpointLog])
			if want := `{"Fn::Join":["",["fourlanes/",{"Ref":"AWS::StackName"},"/` + prefix + `"]]}`; string(log) != want {
				t.Errorf("%s = %s, want %s", keys.EnvCheckpointLog, log, want)
			}
			// Every alarm of this backbone notifies its own topic.
			for name, al := range b.Alarms.ByName {
				p := backbonetest.Props(doc.Resources("AWS::CloudWatch::Alarm")[*st.GetLogicalId(al.Node().DefaultChild().(awscdk.CfnElement))])
				if diff := cmp.Diff([]any{ref(prefix + LogicalAlarmTopic)}, p["AlarmActions"]); diff != "" {
					t.Errorf("alarm %s's actions (-want +got):\n%s", name, diff)
				}
			}
		})
	}
	if diff := cmp.Diff([]string{"Lending", "Workshop"}, keys.OutputBackbones(outputs)); diff != "" {
		t.Errorf("the backbones the CLI finds among the outputs (-want +got):\n%s", diff)
	}
}

// TestBackboneIDsThatCollide: two ids that give one prefix (logical IDs
// take letters and digits only) fail the synthesis with an error that
// names both backbones and the fix, not with CloudFormation's duplicate
// logical ID.
func TestBackboneIDsThatCollide(t *testing.T) {
	var first string
	st := newLibraryStack(t, nil, func(b *Backbone) { first = *b.Node().Path() })
	books := testTable(st, "MoreBooks", awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES)
	code := t.TempDir()
	if err := backbonetest.WriteCode(code); err != nil {
		t.Fatal(err)
	}
	New(st, "---", &Props{App: libraryApp, CodeRoot: code, AlarmEmail: testAlarmEmail,
		Tracked: map[string]awsdynamodb.ITable{"BOOK": books}, Tables: map[string]awsdynamodb.ITable{envLoans: books, envShelf: books}})
	errs := errorsOf(st)
	want := regexp.MustCompile(`backbone Library/---: its id "---" gives the prefix "" of its logical IDs and outputs, as backbone ` +
		regexp.QuoteMeta(first) + `'s does in stack Library: give one of them another id`)
	if len(errs) != 1 || !want.MatchString(errs[0]) {
		t.Errorf("synthesis errors %q, want one matching %q", errs, want)
	}
}

// TestTracing: Props.Tracing sets every function's X-Ray mode; with
// Props.TraceEndpoint, the functions' OpenTelemetry spans go there
// (FOURLANES_TRACING=otel and the OTLP variables their code reads) and the
// trace layers ride along; without it, or with tracing DISABLED, the code
// records nothing (off). Off, no role gets X-Ray's actions. A mode CDK does
// not know, a bad endpoint, or an endpoint without X-Ray fails the
// synthesis, naming the prop.
func TestTracing(t *testing.T) {
	const endpoint = "http://localhost:4318/v1/traces"
	for _, tt := range []struct {
		name     string
		tracing  awslambda.Tracing
		endpoint string
		config   any // TracingConfig, nil for none
		env      string
		err      string
	}{
		{"default", "", "", map[string]any{"Mode": "Active"}, "off", ""},
		{"default+otel", "", endpoint, map[string]any{"Mode": "Active"}, "otel", ""},
		{"active+otel", awslambda.Tracing_ACTIVE, endpoint, map[string]any{"Mode": "Active"}, "otel", ""},
		{"passthrough+otel", awslambda.Tracing_PASS_THROUGH, endpoint, map[string]any{"Mode": "PassThrough"}, "otel", ""},
		{"disabled", awslambda.Tracing_DISABLED, "", nil, "off", ""},
		{"disabled+otel", awslambda.Tracing_DISABLED, endpoint, nil, "", "Props.TraceEndpoint is set but Props.Tracing is DISABLED"},
		{"bad endpoint", "", "localhost:4318", nil, "", `Props.TraceEndpoint "localhost:4318": give the OTLP/HTTP traces URL`},
		{"ON", "ON", "", nil, "", `Props.Tracing "ON": use awslambda.Tracing_ACTIVE, Tracing_PASS_THROUGH or Tracing_DISABLED`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ls := synthLibrary(t, func(stack awscdk.Stack, p *Props) {
				p.Tracing = tt.tracing
				p.TraceEndpoint = tt.endpoint
				if tt.endpoint != "" {
					p.TraceLayers = []awslambda.ILayerVersion{awslambda.LayerVersion_FromLayerVersionArn(stack, jsii.String("Collector"),
						jsii.String("arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1"))}
				}
			})
			if tt.err != "" {
				if len(ls.errors) != 1 || !strings.Contains(ls.errors[0], tt.err) {
					t.Errorf("synthesis errors %q, want one containing %q", ls.errors, tt.err)
				}
				return
			}
			if len(ls.errors) > 0 {
				t.Fatalf("synthesis errors: %v", ls.errors)
			}
			s := ls.synthesized()
			for id, fn := range s.resources("AWS::Lambda::Function") {
				if diff := cmp.Diff(tt.config, props(fn)["TracingConfig"]); diff != "" {
					t.Errorf("%s TracingConfig (-want +got):\n%s", id, diff)
				}
				env := backbonetest.Env(fn)
				if got := env[keys.EnvTracing]; got != tt.env {
					t.Errorf("%s %s = %v, want %s", id, keys.EnvTracing, got, tt.env)
				}
				wantEndpoint, wantLayers := any(nil), any(nil)
				if tt.env == "otel" {
					wantEndpoint = endpoint
					wantLayers = []any{"arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1"}
					if env[keys.EnvOTelServiceName] == nil {
						t.Errorf("%s has no %s", id, keys.EnvOTelServiceName)
					}
				}
				if got := env[keys.EnvOTLPTracesEndpoint]; got != wantEndpoint {
					t.Errorf("%s %s = %v, want %v", id, keys.EnvOTLPTracesEndpoint, got, wantEndpoint)
				}
				if diff := cmp.Diff(wantLayers, props(fn)["Layers"]); diff != "" {
					t.Errorf("%s Layers (-want +got):\n%s", id, diff)
				}
			}
			traced := map[string]bool{} // roles that may send X-Ray segments
			for _, g := range grants(s.Doc) {
				if slices.Contains(g.Actions, "xray:PutTraceSegments") {
					for _, r := range g.Roles {
						traced[r] = true
					}
				}
			}
			for _, f := range functionsOf(ls.stack) {
				if got, want := traced[ls.id(f.Role)], tt.config != nil; got != want {
					t.Errorf("%s's role may send X-Ray segments: %v, want %v", f.name, got, want)
				}
			}
		})
	}
}

// TestAlarmTopic: with Props.AlarmTopic, every alarm notifies the team's
// topic, the backbone creates none, AlarmEmail subscribes there, and the
// AlarmTopicArn output names it.
func TestAlarmTopic(t *testing.T) {
	var topic awssns.Topic
	ls := synthLibrary(t, func(st awscdk.Stack, p *Props) {
		topic = awssns.NewTopic(st, jsii.String("OnCall"), &awssns.TopicProps{EnforceSSL: jsii.Bool(true)})
		p.AlarmTopic = topic
		p.AlarmEmail = testAlarmEmail
	})
	if len(ls.errors) > 0 {
		t.Fatalf("synthesis errors: %v", ls.errors)
	}
	s := ls.synthesized()
	id := ls.id(topic)
	if topics := s.resources("AWS::SNS::Topic"); len(topics) != 1 || topics[id] == nil {
		t.Errorf("topics %v, want the team's %s only", topics, id)
	}
	alarms := s.resources("AWS::CloudWatch::Alarm")
	if len(alarms) < 20 {
		t.Fatalf("%d alarms", len(alarms))
	}
	for aid, al := range alarms {
		for _, k := range []string{"AlarmActions", "OKActions"} {
			if diff := cmp.Diff([]any{ref(id)}, props(al)[k]); diff != "" {
				t.Errorf("%s %s (-want +got):\n%s", aid, k, diff)
			}
		}
	}
	var subscribed bool
	for _, sub := range s.resources("AWS::SNS::Subscription") {
		p := props(sub)
		subscribed = subscribed || (p["Protocol"] == "email" && p["Endpoint"] == testAlarmEmail && cmp.Equal(p["TopicArn"], ref(id)))
	}
	if !subscribed {
		t.Errorf("%s is not subscribed to the team's topic: %v", testAlarmEmail, s.resources("AWS::SNS::Subscription"))
	}
	out, _ := backbonetest.Template(s.Doc).Outputs()[keys.OutputAlarmTopic].(map[string]any)
	if diff := cmp.Diff(ref(id), out["Value"]); diff != "" {
		t.Errorf("output %s (-want +got):\n%s", keys.OutputAlarmTopic, diff)
	}
}

// metricKeys are an alarm's properties that say what it watches.
var metricKeys = []string{"Namespace", "MetricName", "Dimensions", "Statistic", "ExtendedStatistic", "Period", "Unit", "Metrics"}

func watched(alarm map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range metricKeys {
		if v, ok := props(alarm)[k]; ok {
			out[k] = v
		}
	}
	return out
}

// TestMetrics: a team's alarm on a backbone's Metric method watches exactly
// what the backbone's own alarm watches; options change what they say;
// the DLQ depth adds the three dead-letter queues, and unsettled events
// are reconcile's EMF UnsettledEvents.
func TestMetrics(t *testing.T) {
	type pair struct {
		metric awscloudwatch.IMetric
		alarm  string // the backbone's alarm on the same metric ("": none)
	}
	team := map[string]pair{}
	var b *Backbone
	st := newLibraryStack(t, nil, func(bb *Backbone) {
		b = bb
		for name, p := range map[string]pair{
			"IteratorAge":            {b.MetricIteratorAge(nil), "ChangeFeedIteratorAge"},
			"TamperWatchIteratorAge": {b.MetricTamperWatchIteratorAge(nil), "TamperWatchIteratorAge"},
			"PipeRecordAge":          {b.MetricPipeRecordAge(nil), "PipeRecordAge"},
			"PipeExecutionFailed":    {b.MetricPipeExecutionFailed(nil), "PipeExecutionFailed"},
			"OldestMessage":          {b.MetricOldestMessage(nil), "DurableOldestMessage"},
			"UnsettledAge":           {b.MetricUnsettledAge(nil), "DeliveryWatermarkStalled"},
			"DeadLettered":           {b.MetricDeadLettered(nil), "DeadLettered"},
			"UndeclaredEvents":       {b.MetricUndeclaredEvents(nil), "UndeclaredEvents"},
			"ChainBreaks":            {b.MetricChainBreaks(nil), "ChainBreaks"},
			"TamperDetected":         {b.MetricTamperDetected(nil), "TamperDetected"},
			"DLQDepth":               {b.MetricDLQDepth(nil), ""},
			"UnsettledEvents":        {b.MetricUnsettledEvents(nil), ""},
			"IteratorAgeAverage": {b.MetricIteratorAge(&awscloudwatch.MetricOptions{
				Statistic: jsii.String("Average"), Period: awscdk.Duration_Minutes(jsii.Number(5)),
			}), ""},
			"PipeRecordAgeHourly": {b.MetricPipeRecordAge(&awscloudwatch.MathExpressionOptions{Period: awscdk.Duration_Hours(jsii.Number(1))}), ""},
		} {
			team[name] = p
		}
	})
	alarmIDs := map[string]string{}
	for name, p := range team {
		al := awscloudwatch.NewAlarm(st, jsii.String("Team"+name), &awscloudwatch.AlarmProps{
			Metric: p.metric, Threshold: jsii.Number(1), EvaluationPeriods: jsii.Number(1),
		})
		alarmIDs[name] = *st.GetLogicalId(al.Node().DefaultChild().(awscdk.CfnElement))
	}
	if errs := errorsOf(st); len(errs) > 0 {
		t.Fatalf("synthesis errors: %v", errs)
	}
	doc, err := backbonetest.FromStack(st)
	if err != nil {
		t.Fatal(err)
	}
	alarms := doc.Resources("AWS::CloudWatch::Alarm")
	for name, p := range team {
		if p.alarm == "" {
			continue
		}
		own := alarms[*st.GetLogicalId(b.Alarms.ByName[p.alarm].Node().DefaultChild().(awscdk.CfnElement))]
		if diff := cmp.Diff(watched(own), watched(alarms[alarmIDs[name]])); diff != "" {
			t.Errorf("Metric%s watches other than the %s alarm (-alarm +metric):\n%s", name, p.alarm, diff)
		}
	}
	got := func(name string) map[string]any { return watched(alarms[alarmIDs[name]]) }
	if g := got("IteratorAgeAverage"); g["Statistic"] != "Average" || g["Period"] != 300.0 || g["MetricName"] != "IteratorAge" {
		t.Errorf("MetricIteratorAge with options: %v, want Average over 300 s", g)
	}
	if g := list(got("PipeRecordAgeHourly")["Metrics"]); len(g) != 1 || g[0].(map[string]any)["Period"] != 3600.0 {
		t.Errorf("MetricPipeRecordAge with a period of an hour: %v", g)
	}
	if g := list(got("UnsettledEvents")["Metrics"]); len(g) != 1 || g[0].(map[string]any)["Expression"] != EMFQuery("SUM", keys.MetricUnsettledEvents) {
		t.Errorf("MetricUnsettledEvents: %v, want %s", g, EMFQuery("SUM", keys.MetricUnsettledEvents))
	}
	depth, _ := json.Marshal(got("DLQDepth")["Metrics"])
	for _, q := range []string{LogicalDurableDLQ, LogicalPipeDLQ, LogicalChangeFeedDLQ} {
		if !strings.Contains(string(depth), `{"Fn::GetAtt":["`+q+`","QueueName"]}`) {
			t.Errorf("MetricDLQDepth does not read %s: %s", q, depth)
		}
	}
	if !strings.Contains(string(depth), `"Expression":"FILL(durable, 0) + FILL(pipe, 0) + FILL(changefeed, 0)"`) {
		t.Errorf("MetricDLQDepth does not add the three queues: %s", depth)
	}
}

// functionsOf are a backbone's functions.
func functionsOf(b *Backbone) []Function {
	return []Function{
		b.Durable.StreamFilter, b.Durable.DurableConsumer, b.ChangeFeed.Changefeed,
		b.Reconcile.Function, b.Repair.Function, b.Tamper.Function,
	}
}

// TestPropsMissing: New without props fails the synthesis, not the
// program: one error names Props.App, and one per function names its
// missing bootstrap and Props.CodeRoot.
func TestPropsMissing(t *testing.T) {
	a := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	st := awscdk.NewStack(a, jsii.String("Empty"), nil)
	New(st, "Orders", nil)
	errs := errorsOf(st)
	want := []string{
		"Props.App is empty: give the application the backbone runs",
		"the alarms reach no one: give Props.AlarmEmail (an address to subscribe), Props.AlarmTopic or Props.AlarmTopicArn (an existing SNS topic)",
	}
	for _, fn := range keys.Functions {
		want = append(want, "function "+fn+": "+fn+"/bootstrap is missing: give Props.CodeRoot the folder that holds <function>/bootstrap")
	}
	for _, w := range want {
		if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, w) }) {
			t.Errorf("no synthesis error containing %q in %q", w, errs)
		}
	}
	if len(errs) != len(want) {
		t.Errorf("%d synthesis errors, want %d: %q", len(errs), len(want), errs)
	}
}
