package stack

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/infra/backbone"
	"github.com/fourlanes/fourlanes/internal/cdkjson"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestPinnedLogicalIDs: the example's stateful resources keep the logical
// IDs an existing deployment has (the tables, the ORDER mapping on the
// orders stream) and its output keeps its name; a new ID would make
// CloudFormation replace the table. (infra/backbone's tests check the rest of
// the stack, on a copy of it: they cannot import this package.)
func TestPinnedLogicalIDs(t *testing.T) {
	defer func() {
		if r := recover(); r != nil { // jsii reports JavaScript errors as panics
			t.Fatalf("synth: %v", r)
		}
	}()
	codeRoot := t.TempDir()
	for _, fn := range keys.Functions {
		if err := os.MkdirAll(filepath.Join(codeRoot, fn), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(codeRoot, fn, "bootstrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	flags, err := cdkjson.Context(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx := make(map[string]any, len(flags))
	for k, v := range flags {
		ctx[k] = v
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &ctx})
	st := NewStack(app, "Fourlanes", &backbone.Props{CodeRoot: codeRoot, ReserveConcurrency: true})
	var doc struct {
		Resources map[string]struct {
			Type       string
			Properties map[string]any
		}
		Outputs map[string]struct{ Value any }
	}
	raw, err := json.Marshal(assertions.Template_FromStack(st.Stack, nil).ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for id, typ := range map[string]string{
		LogicalOrdersTable: "AWS::DynamoDB::Table",
		LogicalSearchTable: "AWS::DynamoDB::Table",
		logicalOrderESM:    "AWS::Lambda::EventSourceMapping",
	} {
		if got := doc.Resources[id].Type; got != typ {
			t.Errorf("resource %s: type %q, want %q", id, got, typ)
		}
	}
	src, _ := json.Marshal(doc.Resources[logicalOrderESM].Properties["EventSourceArn"])
	if want := `{"Fn::GetAtt":["` + LogicalOrdersTable + `","StreamArn"]}`; string(src) != want {
		t.Errorf("%s's EventSourceArn: got %s, want %s", logicalOrderESM, src, want)
	}
	out, _ := json.Marshal(doc.Outputs[OutputOrdersTable].Value)
	if want := `{"Ref":"` + LogicalOrdersTable + `"}`; string(out) != want {
		t.Errorf("output %s: got %s, want %s", OutputOrdersTable, out, want)
	}
}
