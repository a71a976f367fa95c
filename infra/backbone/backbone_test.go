package backbone

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestPinnedLogicalIDs: the stateful resources keep these logical IDs. If
// this fails, a deploy would replace a table or queue (and lose its data):
// restore the ID rather than update the test.
func TestPinnedLogicalIDs(t *testing.T) {
	s := synth(t)
	ids := func(typ string) []string {
		var out []string
		for id := range s.resources(typ) {
			out = append(out, id)
		}
		sort.Strings(out)
		return out
	}
	for typ, want := range map[string][]string{
		// The backbone's three, and the application's own two (their IDs are
		// the application's business).
		"AWS::DynamoDB::Table": sorted([]string{LogicalChangeFeedTable, LogicalEventsTable, LogicalStateTable, s.id(s.stack.Widgets), s.id(s.stack.Listing)}),
		"AWS::SQS::Queue":      {LogicalChangeFeedDLQ, LogicalDurableDLQ, LogicalDurableQueue, LogicalNotaryDLQ, LogicalPipeDLQ, LogicalTamperDLQ},
		"AWS::Pipes::Pipe":     {LogicalEventsPipe},
	} {
		if diff := cmp.Diff(want, ids(typ)); diff != "" {
			t.Errorf("%s logical IDs (-want +got):\n%s", typ, diff)
		}
	}
	// The exact strings, so renaming a constant is caught too.
	for id, typ := range map[string]string{
		"EventsTable": "AWS::DynamoDB::Table", "StateTable": "AWS::DynamoDB::Table",
		"ChangeFeedTable": "AWS::DynamoDB::Table", "DurableQueue": "AWS::SQS::Queue",
		"DurableDLQ": "AWS::SQS::Queue", "PipeDLQ": "AWS::SQS::Queue", "ChangeFeedDLQ": "AWS::SQS::Queue",
		// A tracked entity's mapping: "ChangeFeedMapping" + its name.
		"EventsPipe": "AWS::Pipes::Pipe", "ChangeFeedMappingWIDGET": "AWS::Lambda::EventSourceMapping",
		"TamperWatchStateMapping": "AWS::Lambda::EventSourceMapping", "AlarmTopic": "AWS::SNS::Topic",
		"NotaryMapping": "AWS::Lambda::EventSourceMapping", "NotaryDLQ": "AWS::SQS::Queue",
	} {
		if _, ok := s.resources(typ)[id]; !ok {
			t.Errorf("no %s with logical ID %s", typ, id)
		}
	}
}

// TestStatefulResourcesRetained: tables and queues survive a stack delete
// and a replacement, and their names are generated.
func TestStatefulResourcesRetained(t *testing.T) {
	s := synth(t)
	for _, typ := range []string{"AWS::DynamoDB::Table", "AWS::SQS::Queue"} {
		for id, r := range s.resources(typ) {
			if r["DeletionPolicy"] != "Retain" || r["UpdateReplacePolicy"] != "Retain" {
				t.Errorf("%s: DeletionPolicy %v, UpdateReplacePolicy %v; want Retain", id, r["DeletionPolicy"], r["UpdateReplacePolicy"])
			}
			for _, name := range []string{"TableName", "QueueName"} {
				if v, ok := props(r)[name]; ok {
					t.Errorf("%s has a fixed %s %v; names are generated", id, name, v)
				}
			}
		}
	}
}

func TestTables(t *testing.T) {
	s := synth(t)
	tmpl := s.Template
	keySchema := func(hash, rng string) []any {
		return []any{
			map[string]any{"AttributeName": hash, "KeyType": "HASH"},
			map[string]any{"AttributeName": rng, "KeyType": "RANGE"},
		}
	}
	attrs := func(nameType ...string) any {
		var defs []any
		for i := 0; i+1 < len(nameType); i += 2 {
			defs = append(defs, map[string]any{"AttributeName": nameType[i], "AttributeType": nameType[i+1]})
		}
		return assertions.Match_ArrayEquals(&defs)
	}
	sse := map[string]any{"SSEEnabled": true}
	pitr := map[string]any{"PointInTimeRecoveryEnabled": true}
	stream := map[string]any{"StreamViewType": "NEW_AND_OLD_IMAGES"}
	ttl := map[string]any{"AttributeName": keys.AttrExpiresAt, "Enabled": true}

	tests := []struct {
		id    string
		props map[string]any
	}{
		{LogicalEventsTable, map[string]any{
			"KeySchema":                        keySchema(keys.AttrTenant, keys.AttrSeq),
			"AttributeDefinitions":             attrs(keys.AttrTenant, "S", keys.AttrSeq, "N"),
			"StreamSpecification":              stream,
			"PointInTimeRecoverySpecification": pitr,
			"SSESpecification":                 sse,
			"BillingMode":                      "PAY_PER_REQUEST",
			"TimeToLiveSpecification":          assertions.Match_Absent(), // the log never expires
		}},
		{LogicalStateTable, map[string]any{
			"KeySchema":            keySchema(keys.AttrPK, keys.AttrSK),
			"AttributeDefinitions": attrs(keys.AttrPK, "S", keys.AttrSK, "S", keys.AttrDeadIndex, "S", keys.AttrTenant, "S"),
			// The sparse, keys-only dead-letter index dlq-repair queries
			// instead of scanning the table.
			"GlobalSecondaryIndexes": []any{map[string]any{
				"IndexName":  keys.IndexDeadTenants,
				"KeySchema":  keySchema(keys.AttrDeadIndex, keys.AttrTenant),
				"Projection": map[string]any{"ProjectionType": "KEYS_ONLY"},
			}},
			"TimeToLiveSpecification":          ttl,
			"PointInTimeRecoverySpecification": pitr,
			"SSESpecification":                 sse,
		}},
		{LogicalChangeFeedTable, map[string]any{
			"KeySchema":               keySchema(keys.AttrPK, keys.AttrSK),
			"AttributeDefinitions":    attrs(keys.AttrPK, "S", keys.AttrSK, "S"),
			"TimeToLiveSpecification": ttl,
			"SSESpecification":        sse,
		}},
	}
	for _, tt := range tests {
		// Every table refuses DeleteTable until a person turns this off.
		tt.props["DeletionProtectionEnabled"] = true
		t.Run(tt.id, func(t *testing.T) {
			got := tmpl.FindResources(jsii.String("AWS::DynamoDB::Table"), map[string]any{"Properties": tt.props})
			if _, ok := (*got)[tt.id]; !ok {
				t.Errorf("table %s does not have %v", tt.id, tt.props)
			}
		})
	}
}

func TestDurableQueues(t *testing.T) {
	s := synth(t)
	fifo := map[string]any{
		"FifoQueue":                 true,
		"ContentBasedDeduplication": false,
		"DeduplicationScope":        "messageGroup",
		"FifoThroughputLimit":       "perMessageGroupId",
		"SqsManagedSseEnabled":      true,
	}
	s.Template.HasResourceProperties(jsii.String("AWS::SQS::Queue"), merge(fifo, map[string]any{
		"RedrivePolicy": map[string]any{"deadLetterTargetArn": getAtt(LogicalDurableDLQ, "Arn"), "maxReceiveCount": float64(durableMaxReceiveCount)},
	}))
	queues := s.resources("AWS::SQS::Queue")
	if got := props(queues[LogicalDurableDLQ])["FifoQueue"]; got != true {
		t.Errorf("DurableDLQ FifoQueue = %v; a FIFO queue's DLQ must be FIFO", got)
	}
	for _, id := range []string{LogicalPipeDLQ, LogicalChangeFeedDLQ} {
		if got, ok := props(queues[id])["FifoQueue"]; ok && got != false {
			t.Errorf("%s FifoQueue = %v; stream on-failure destinations must be standard queues", id, got)
		}
	}

	// Visibility ≥ 6 × the consumer's timeout, both read from the template.
	mapping := s.mappingFor(t, getAtt(LogicalDurableQueue, "Arn"))
	fnID := mapping["FunctionName"].(map[string]any)["Ref"].(string)
	timeout := props(s.resources("AWS::Lambda::Function")[fnID])["Timeout"].(float64)
	visibility := props(queues[LogicalDurableQueue])["VisibilityTimeout"].(float64)
	if visibility < 6*timeout {
		t.Errorf("DurableQueue VisibilityTimeout = %vs, want ≥ 6 × %vs", visibility, timeout)
	}
	if fnID != s.id(s.stack.Durable.DurableConsumer.Fn) {
		t.Errorf("DurableQueue is consumed by %s, want durable-consumer", fnID)
	}
	if b := mapping["BatchSize"].(float64); b < 1 || b > 10 {
		t.Errorf("durable-consumer BatchSize = %v, want 1–10", b)
	}
	if diff := cmp.Diff([]any{"ReportBatchItemFailures"}, mapping["FunctionResponseTypes"]); diff != "" {
		t.Errorf("durable-consumer FunctionResponseTypes (-want +got):\n%s", diff)
	}
	if c, _ := mapping["ScalingConfig"].(map[string]any)["MaximumConcurrency"].(float64); c < 2 {
		t.Errorf("durable-consumer ScalingConfig.MaximumConcurrency = %v, want a bound (2–1000)", c)
	}
}

// TestQueuesEncryptedTLSOnly: every queue is encrypted and its policy denies
// requests without TLS.
func TestQueuesEncryptedTLSOnly(t *testing.T) {
	s := synth(t)
	tlsOnly := map[string]bool{}
	for _, qp := range s.resources("AWS::SQS::QueuePolicy") {
		p := props(qp)
		for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := st.(map[string]any)
			cond, _ := st["Condition"].(map[string]any)["Bool"].(map[string]any)
			if st["Effect"] == "Deny" && cond["aws:SecureTransport"] == "false" {
				for _, q := range p["Queues"].([]any) {
					tlsOnly[q.(map[string]any)["Ref"].(string)] = true
				}
			}
		}
	}
	for id, q := range s.resources("AWS::SQS::Queue") {
		p := props(q)
		if p["SqsManagedSseEnabled"] != true && p["KmsMasterKeyId"] == nil {
			t.Errorf("%s is not encrypted", id)
		}
		if !tlsOnly[id] {
			t.Errorf("%s has no policy denying aws:SecureTransport=false", id)
		}
	}
}

func TestChangeFeedMapping(t *testing.T) {
	s := synth(t)
	// The tracked entity's mapping, pinned as LogicalChangeFeedESM + its name.
	esm := LogicalChangeFeedESM + widgetEntity
	m := props(s.resources("AWS::Lambda::EventSourceMapping")[esm])
	if m == nil {
		t.Fatalf("no event source mapping %s", esm)
	}
	want := map[string]any{
		"EventSourceArn":             getAtt(s.id(s.stack.Widgets), "StreamArn"),
		"FunctionName":               ref(s.id(s.stack.ChangeFeed.Changefeed.Fn)),
		"StartingPosition":           "TRIM_HORIZON",
		"BisectBatchOnFunctionError": true,
		"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
		"DestinationConfig":          map[string]any{"OnFailure": map[string]any{"Destination": getAtt(LogicalChangeFeedDLQ, "Arn")}},
	}
	for k, v := range want {
		if diff := cmp.Diff(v, m[k]); diff != "" {
			t.Errorf("%s.%s (-want +got):\n%s", esm, k, diff)
		}
	}
	if r, ok := m["MaximumRetryAttempts"].(float64); !ok || r < 0 || r > 100 {
		t.Errorf("MaximumRetryAttempts = %v, want a small finite limit", m["MaximumRetryAttempts"])
	}
	if a, ok := m["MaximumRecordAgeInSeconds"].(float64); !ok || a < 60 || a > 12*3600 {
		t.Errorf("MaximumRecordAgeInSeconds = %v, want well under the stream's 24 h", m["MaximumRecordAgeInSeconds"])
	}
	if p, ok := m["ParallelizationFactor"].(float64); ok && p != 1 {
		t.Errorf("ParallelizationFactor = %v, want 1 (bounded, ordered per shard)", p)
	}
}

// fnSpec is what the template must hold for one function.
type fnSpec struct {
	env      map[string]any
	reserved any // float64, or nil for unreserved
}

func TestFunctions(t *testing.T) {
	s := synth(t)
	st := s.stack
	table := func(id string) map[string]any { return ref(id) }
	queueURL := func(id string) map[string]any { return ref(id) }
	fns := map[string]struct {
		Function
		fnSpec
	}{
		keys.FnStreamFilter: {st.Durable.StreamFilter, fnSpec{env: map[string]any{}}},
		keys.FnDurableConsumer: {st.Durable.DurableConsumer, fnSpec{env: map[string]any{
			keys.EnvEventsTable:   table(LogicalEventsTable),
			keys.EnvStateTable:    table(LogicalStateTable),
			keys.EnvDurableDLQURL: queueURL(LogicalDurableDLQ), // a poison message goes there at once
		}}},
		keys.FnChangefeed: {st.ChangeFeed.Changefeed, fnSpec{env: map[string]any{
			keys.EnvChangeFeedTable: table(LogicalChangeFeedTable),
			envListingTable:         table(s.id(st.Listing)),
			keys.EnvStateTable:      table(LogicalStateTable),
			envWidgetsTable:         table(s.id(st.Widgets)),
		}}},
		keys.FnReconcile: {st.Reconcile.Function, fnSpec{reserved: 2.0, env: map[string]any{
			keys.EnvEventsTable: table(LogicalEventsTable),
			keys.EnvStateTable:  table(LogicalStateTable),
			// Signed checkpoints: the Object Lock bucket, the signing key, and the log's
			// name (fourlanes/<stack name>) that every note's origin line carries.
			keys.EnvCheckpointBucket: ref("CheckpointBucket"),
			keys.EnvCheckpointKey:    getAtt("CheckpointSigningKey", "Arn"),
			keys.EnvCheckpointLog:    map[string]any{"Fn::Join": []any{"", []any{"fourlanes/", ref("AWS::StackName")}}},
		}}},
		keys.FnTamperWatch: {st.Tamper.Function, fnSpec{env: map[string]any{keys.EnvStateTable: ref(LogicalStateTable)}}},
		// One beat at a time, appended to the log: the events table only.
		keys.FnHeartbeat: {st.Heartbeat.Function, fnSpec{reserved: 1.0, env: map[string]any{keys.EnvEventsTable: table(LogicalEventsTable)}}},
		keys.FnNotary: {st.Notary.Function, fnSpec{env: map[string]any{
			keys.EnvEventsTable: table(LogicalEventsTable),
			keys.EnvStateTable:  table(LogicalStateTable),
			// It alone signs: the same bucket, key and log name as reconcile reads.
			keys.EnvCheckpointBucket: ref("CheckpointBucket"),
			keys.EnvCheckpointKey:    getAtt("CheckpointSigningKey", "Arn"),
			keys.EnvCheckpointLog:    map[string]any{"Fn::Join": []any{"", []any{"fourlanes/", ref("AWS::StackName")}}},
		}}},
		keys.FnDLQRepair: {st.Repair.Function, fnSpec{reserved: 1.0, env: map[string]any{
			keys.EnvDurableDLQURL:    queueURL(LogicalDurableDLQ),
			keys.EnvPipeDLQURL:       queueURL(LogicalPipeDLQ),
			keys.EnvChangeFeedDLQURL: queueURL(LogicalChangeFeedDLQ),
			keys.EnvEventsTable:      table(LogicalEventsTable),
			envWidgetsTable:          table(s.id(st.Widgets)),
			keys.EnvStateTable:       table(LogicalStateTable),
			keys.EnvChangeFeedTable:  table(LogicalChangeFeedTable),
			envListingTable:          table(s.id(st.Listing)),
		}}},
	}
	// The backbone's, and the team's bench beside them.
	if n := len(s.resources("AWS::Lambda::Function")); n != len(keys.Functions)+1 || len(fns) != len(keys.Functions) {
		t.Fatalf("%d functions in the template, %d specified here, want %d (keys.Functions) and the bench", n, len(fns), len(keys.Functions))
	}
	logGroups := s.resources("AWS::Logs::LogGroup")
	for _, name := range keys.Functions {
		f := fns[name]
		t.Run(name, func(t *testing.T) {
			id := s.id(f.Fn)
			r := s.resources("AWS::Lambda::Function")[id]
			p := props(r)
			for k, want := range map[string]any{
				"Runtime":       "provided.al2023",
				"Architectures": []any{"arm64"},
				"Handler":       "bootstrap",
				"TracingConfig": map[string]any{"Mode": "Active"},
				"Role":          getAtt(s.id(f.Role), "Arn"),
				// JSON, so Lambda filters by level; the application level
				// reaches obs.Setup as AWS_LAMBDA_LOG_LEVEL, and INFO keeps
				// the EMF lines (Lambda reads a line without a level as INFO).
				"LoggingConfig": map[string]any{
					"LogGroup": ref(s.id(f.Logs)), "LogFormat": "JSON", "ApplicationLogLevel": "INFO", "SystemLogLevel": "INFO",
				},
			} {
				if diff := cmp.Diff(want, p[k]); diff != "" {
					t.Errorf("%s (-want +got):\n%s", k, diff)
				}
			}
			if _, ok := p["FunctionName"]; ok {
				t.Errorf("fixed FunctionName %v; names are generated", p["FunctionName"])
			}
			wantEnv := map[string]any{keys.EnvTracing: "off"} // no Props.TraceEndpoint
			for k, v := range f.env {
				wantEnv[k] = v
			}
			gotEnv, _ := p["Environment"].(map[string]any)["Variables"].(map[string]any)
			if diff := cmp.Diff(wantEnv, gotEnv); diff != "" {
				t.Errorf("Environment (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(f.reserved, p["ReservedConcurrentExecutions"]); diff != "" {
				t.Errorf("ReservedConcurrentExecutions (-want +got):\n%s", diff)
			}
			if days, _ := props(logGroups[s.id(f.Logs)])["RetentionInDays"].(float64); days < 1 {
				t.Errorf("log group %s has no retention", s.id(f.Logs))
			}
			// The code comes from <CodeRoot>/<function>/bootstrap: the staged
			// asset holds the dummy binary written for this function.
			key, _ := p["Code"].(map[string]any)["S3Key"].(string)
			b, err := os.ReadFile(filepath.Join(s.OutDir, "asset."+strings.TrimSuffix(key, ".zip"), "bootstrap"))
			if err != nil {
				t.Fatalf("staged code: %v", err)
			}
			if !strings.Contains(string(b), "# "+name+"\n") {
				t.Errorf("staged bootstrap %q is not build/%s/bootstrap", b, name)
			}
		})
	}
}

func TestReconcileURL(t *testing.T) {
	s := synth(t)
	fnID := s.id(s.stack.Reconcile.Function.Fn)
	urlID := s.id(s.stack.Reconcile.URL)
	s.Template.HasResourceProperties(jsii.String("AWS::Lambda::Url"), map[string]any{
		"AuthType":          "AWS_IAM",
		"TargetFunctionArn": getAtt(fnID, "Arn"),
	})
	if n := len(s.resources("AWS::Lambda::Url")); n != 1 {
		t.Errorf("%d Function URLs, want 1 (reconcile)", n)
	}
	s.Template.HasOutput(jsii.String(OutputReconcileURL), map[string]any{"Value": getAtt(urlID, "FunctionUrl")})
	// No resource policy opens the URL to everyone.
	for id, perm := range s.resources("AWS::Lambda::Permission") {
		if p := props(perm); p["Principal"] == "*" {
			t.Errorf("Lambda permission %s grants %v to *", id, p["Action"])
		}
	}
}

func TestOutputs(t *testing.T) {
	s := synth(t)
	for name, value := range map[string]any{
		OutputEmitterPolicy:         ref(s.id(s.stack.Log.EmitterPolicy)),
		OutputReconcileCallerPolicy: ref(s.id(s.stack.Reconcile.CallerPolicy)),
		OutputRepairFunction:        ref(s.id(s.stack.Repair.Function.Fn)),
		OutputEventsTable:           ref(LogicalEventsTable),
		OutputStateTable:            ref(LogicalStateTable),
		OutputDurableDLQ:            ref(LogicalDurableDLQ),
		OutputPipeDLQ:               ref(LogicalPipeDLQ),
		OutputChangeFeedDLQ:         ref(LogicalChangeFeedDLQ),
		OutputDashboard:             ref(s.id(s.stack.Alarms.Dashboard)),
		OutputAlarmTopic:            ref(LogicalAlarmTopic),
	} {
		s.Template.HasOutput(jsii.String(name), map[string]any{"Value": value})
	}
}

// mappingFor returns the properties of the event source mapping reading arn.
func (s *synthesized) mappingFor(t *testing.T, arn any) map[string]any {
	t.Helper()
	return s.mappingOf(t, arn, nil)
}

// mappingOf is the mapping that reads arn and runs fn (any function when
// fn is nil).
func (s *synthesized) mappingOf(t *testing.T, arn any, fn awslambda.Function) map[string]any {
	t.Helper()
	for _, m := range s.resources("AWS::Lambda::EventSourceMapping") {
		if cmp.Equal(props(m)["EventSourceArn"], arn) && (fn == nil || cmp.Equal(props(m)["FunctionName"], ref(s.id(fn)))) {
			return props(m)
		}
	}
	t.Fatalf("no event source mapping reads %v", arn)
	return nil
}

func merge(ms ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestLogLevelAboveInfoFailsSynthesis: a function whose application log
// level would make Lambda drop the EMF lines (and blind the alarms) fails
// the synthesis with an error that says so; INFO and DEBUG do not.
func TestLogLevelAboveInfoFailsSynthesis(t *testing.T) {
	code := t.TempDir()
	if err := os.MkdirAll(filepath.Join(code, keys.FnTamperWatch), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(code, keys.FnTamperWatch, "bootstrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for level, wantErr := range map[awslambda.ApplicationLogLevel]bool{
		awslambda.ApplicationLogLevel_WARN:  true,
		awslambda.ApplicationLogLevel_ERROR: true,
		awslambda.ApplicationLogLevel_INFO:  false,
		awslambda.ApplicationLogLevel_DEBUG: false,
	} {
		app := awscdk.NewApp(nil)
		st := awscdk.NewStack(app, jsii.String("LogLevel"), nil)
		newFunction(st, "Fn", FunctionOptions{CodeRoot: code, ApplicationLogLevel: level},
			functionSpec{name: keys.FnTamperWatch, description: "test", timeout: awscdk.Duration_Seconds(jsii.Number(10)), memoryMB: 128})
		errs := *assertions.Annotations_FromStack(st).FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("drop the EMF metric lines")))
		if got := len(errs) > 0; got != wantErr {
			t.Errorf("ApplicationLogLevel %s: synthesis error %v, want %v", level, got, wantErr)
		}
	}
}
