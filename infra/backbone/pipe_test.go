package backbone

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/pkg/enrich"
	"github.com/fourlanes/fourlanes/pkg/envelope"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/twin/eventpattern"
)

// pipe returns the events Pipe's properties from the template.
func (s *synthesized) pipe(t *testing.T) map[string]any {
	t.Helper()
	r, ok := s.resources("AWS::Pipes::Pipe")[LogicalEventsPipe]
	if !ok {
		t.Fatalf("no AWS::Pipes::Pipe %s in the template", LogicalEventsPipe)
	}
	return props(r)
}

// streamRecord reads a sample stream record in the shape a Pipe delivers it.
func streamRecord(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "stream", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPipeFilterFromTemplate evaluates the filter the template really holds
// (not a copy of the Go constant) against sample records: only an inserted
// event row passes.
func TestPipeFilterFromTemplate(t *testing.T) {
	s := synth(t)
	src := s.pipe(t)["SourceParameters"].(map[string]any)
	filters := src["FilterCriteria"].(map[string]any)["Filters"].([]any)
	if len(filters) == 0 {
		t.Fatal("the Pipe has no filter: head rows would reach the FIFO queue")
	}
	var patterns []*eventpattern.Pattern
	for _, f := range filters {
		raw := f.(map[string]any)["Pattern"].(string)
		p, err := eventpattern.Compile([]byte(raw), eventpattern.ForPipes())
		if err != nil {
			t.Fatalf("Pipe filter %s: %v", raw, err)
		}
		patterns = append(patterns, p)
	}
	// Pipes pass a record if any filter matches.
	passes := func(record []byte) bool {
		for _, p := range patterns {
			ok, err := p.Match(record)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				return true
			}
		}
		return false
	}
	for name, want := range map[string]bool{
		"event-insert.json": true,
		"head-insert.json":  false, // the first event of a tenant creates the head
		"head-modify.json":  false, // every later event moves it
		"event-remove.json": false, // no NewImage
	} {
		if got := passes(streamRecord(t, name)); got != want {
			t.Errorf("filter passes %s = %v, want %v", name, got, want)
		}
	}
}

// TestPipeTargetPathsResolve reads MessageGroupId and MessageDeduplicationId
// from the template and resolves them on what stream-filter returns for the
// sample records: its real handler runs on the event row and head row as the
// Pipe hands them over, and its output (a JSON array of envelopes) is what the
// paths must resolve on.
func TestPipeTargetPathsResolve(t *testing.T) {
	s := synth(t)
	sqs := s.pipe(t)["TargetParameters"].(map[string]any)["SqsQueueParameters"].(map[string]any)
	groupPath, _ := sqs["MessageGroupId"].(string)
	dedupPath, _ := sqs["MessageDeduplicationId"].(string)
	for name, p := range map[string]string{"MessageGroupId": groupPath, "MessageDeduplicationId": dedupPath} {
		if !eventpattern.IsDynamic(p) {
			t.Fatalf("%s = %q, want a JSON path", name, p)
		}
	}

	// testdata/stream/event-insert.json is a widget.made event, sealed on
	// acme's chain: stream-filter passes only what the catalog declares.
	cat, err := widgetApp.Catalog()
	if err != nil {
		t.Fatal(err)
	}
	h, err := enrich.New(enrich.Config{Catalog: cat, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), EMF: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	envs, err := h.Handle(context.Background(), []json.RawMessage{streamRecord(t, "event-insert.json"), streamRecord(t, "head-insert.json")})
	if err != nil {
		t.Fatalf("stream-filter on an event row and its head row: %v", err)
	}
	if len(envs) != 1 {
		t.Fatalf("stream-filter returned %d envelopes, want 1 (the head row is dropped)", len(envs))
	}
	env := envs[0]
	out, err := json.Marshal(envs)
	if err != nil {
		t.Fatal(err)
	}
	var batch []any
	if err := json.Unmarshal(out, &batch); err != nil {
		t.Fatal(err)
	}
	for i, elem := range batch {
		group, ok := eventpattern.Resolve(elem, groupPath)
		if !ok {
			t.Fatalf("MessageGroupId %s does not resolve on stream-filter output %s", groupPath, out)
		}
		dedup, ok := eventpattern.Resolve(elem, dedupPath)
		if !ok {
			t.Fatalf("MessageDeduplicationId %s does not resolve on stream-filter output %s", dedupPath, out)
		}
		if group != env.TenantID {
			t.Errorf("element %d: MessageGroupId = %v, want the tenant %q", i, group, env.TenantID)
		}
		if dedup != env.ID {
			t.Errorf("element %d: MessageDeduplicationId = %v, want the event id %q", i, dedup, env.ID)
		}
		// SQS limits: group id ≤ 128 characters, dedup id ≤ 128.
		if g, d := group.(string), dedup.(string); g == "" || len(g) > 128 || d == "" || len(d) > 128 {
			t.Errorf("element %d: group %q / dedup %q outside SQS's 1–128 characters", i, g, d)
		}
	}

	// A head row never becomes an envelope, so it could not take these paths.
	var head struct {
		Dynamodb struct {
			NewImage json.RawMessage `json:"NewImage"`
		} `json:"dynamodb"`
	}
	if err := json.Unmarshal(streamRecord(t, "head-modify.json"), &head); err != nil {
		t.Fatal(err)
	}
	if _, err := envelope.FromStreamJSON(head.Dynamodb.NewImage); !errors.Is(err, envelope.ErrNotEventRow) {
		t.Errorf("FromStreamJSON(head row) error = %v, want ErrNotEventRow", err)
	}
}

// TestPipeSettings: source, enrichment and target of the events Pipe.
func TestPipeSettings(t *testing.T) {
	s := synth(t)
	st := s.stack
	s.Template.HasResourceProperties(jsii.String("AWS::Pipes::Pipe"), map[string]any{
		"Source":     getAtt(LogicalEventsTable, "StreamArn"),
		"Enrichment": getAtt(s.id(st.Durable.StreamFilter.Fn), "Arn"),
		"Target":     getAtt(LogicalDurableQueue, "Arn"),
		"RoleArn":    getAtt(s.id(st.Durable.PipeRole), "Arn"),
		"SourceParameters": map[string]any{
			"DynamoDBStreamParameters": map[string]any{
				"StartingPosition":          "TRIM_HORIZON",
				"OnPartialBatchItemFailure": "AUTOMATIC_BISECT",
				"DeadLetterConfig":          map[string]any{"Arn": getAtt(LogicalPipeDLQ, "Arn")},
			},
		},
		"TargetParameters": map[string]any{
			"SqsQueueParameters": map[string]any{
				"MessageGroupId":         "$." + keys.AttrTenant,
				"MessageDeduplicationId": "$." + keys.AttrID,
			},
		},
		"LogConfiguration": map[string]any{
			"Level":                        "ERROR",
			"IncludeExecutionData":         assertions.Match_Absent(),
			"CloudwatchLogsLogDestination": assertions.Match_AnyValue(),
		},
	})

	ddb := s.pipe(t)["SourceParameters"].(map[string]any)["DynamoDBStreamParameters"].(map[string]any)
	num := func(k string) float64 {
		t.Helper()
		v, ok := ddb[k].(float64)
		if !ok {
			t.Fatalf("DynamoDBStreamParameters.%s = %v, want a number (the default is unbounded)", k, ddb[k])
		}
		return v
	}
	if b := num("BatchSize"); b < 1 || b > 10 {
		t.Errorf("BatchSize = %v, want 1–10 (the SQS target takes at most 10)", b)
	}
	if r := num("MaximumRetryAttempts"); r < 0 || r > 100 {
		t.Errorf("MaximumRetryAttempts = %v, want a small finite limit", r)
	}
	if a := num("MaximumRecordAgeInSeconds"); a < 60 || a > 12*3600 {
		t.Errorf("MaximumRecordAgeInSeconds = %v, want well under the stream's 24 h (≤ 12 h)", a)
	}
}
