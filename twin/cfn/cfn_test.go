package cfn_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fourlanes/fourlanes/twin/cfn"
)

// ids answers Ref and Fn::GetAtt from maps, like the twin does.
type ids struct{}

func (ids) Ref(id string) (string, error) { return "name-of-" + id, nil }
func (ids) GetAtt(id, attr string) (any, error) {
	if attr == "Missing" {
		return nil, errors.New("no such attribute")
	}
	return fmt.Sprintf("arn:aws:x:us-east-1:000000000000:%s/%s", id, attr), nil
}

const tmpl = `{
  "Parameters": {"Stage": {"Type": "String", "Default": "dev"}},
  "Mappings": {"Sizes": {"dev": {"Memory": 256}}},
  "Conditions": {
    "IsDev": {"Fn::Equals": [{"Ref": "Stage"}, "dev"]},
    "IsProd": {"Fn::Not": [{"Condition": "IsDev"}]},
    "Either": {"Fn::Or": [{"Condition": "IsDev"}, {"Condition": "IsProd"}]}
  },
  "Resources": {
    "Table": {"Type": "AWS::DynamoDB::Table", "Properties": {"KeySchema": []}},
    "Fn": {"Type": "AWS::Lambda::Function", "Properties": {
      "Role": {"Fn::GetAtt": ["Role", "Arn"]},
      "MemorySize": {"Fn::FindInMap": ["Sizes", {"Ref": "Stage"}, "Memory"]},
      "Environment": {"Variables": {"TABLE": {"Ref": "Table"}, "OPTIONAL": {"Ref": "AWS::NoValue"}}}
    }},
    "Role": {"Type": "AWS::IAM::Role"}
  },
  "Outputs": {"TableName": {"Value": {"Ref": "Table"}}}
}`

func resolver(t *testing.T) (*cfn.Template, *cfn.Resolver) {
	t.Helper()
	tm, err := cfn.Parse([]byte(tmpl))
	if err != nil {
		t.Fatal(err)
	}
	return tm, &cfn.Resolver{T: tm, IDs: ids{}, Pseudo: cfn.Pseudo{Region: "us-east-1", AccountID: "000000000000", StackName: "S"}}
}

func TestResolveIntrinsics(t *testing.T) {
	_, rv := resolver(t)
	for _, tc := range []struct {
		in   string
		want any
	}{
		{`{"Ref": "Table"}`, "name-of-Table"},
		{`{"Ref": "Stage"}`, "dev"},
		{`{"Ref": "AWS::Region"}`, "us-east-1"},
		{`{"Ref": "AWS::AccountId"}`, "000000000000"},
		{`{"Fn::GetAtt": ["Table", "StreamArn"]}`, "arn:aws:x:us-east-1:000000000000:Table/StreamArn"},
		{`{"Fn::GetAtt": "Table.Arn"}`, "arn:aws:x:us-east-1:000000000000:Table/Arn"},
		{`{"Fn::Join": ["-", ["a", {"Ref": "Stage"}, "c"]]}`, "a-dev-c"},
		{`{"Fn::Select": [1, {"Fn::Split": [":", "a:b:c"]}]}`, "b"},
		{`{"Fn::Sub": "${AWS::StackName}-${Table}-${Table.Arn}-${!Literal}"}`, "S-name-of-Table-arn:aws:x:us-east-1:000000000000:Table/Arn-${Literal}"},
		{`{"Fn::Sub": ["${A}/${Stage}", {"A": {"Ref": "Table"}}]}`, "name-of-Table/dev"},
		{`{"Fn::If": ["IsDev", "yes", "no"]}`, "yes"},
		{`{"Fn::If": ["IsProd", "yes", "no"]}`, "no"},
		{`{"Fn::FindInMap": ["Sizes", "dev", "Memory"]}`, float64(256)},
		{`{"Fn::Base64": "hi"}`, "aGk="},
		{`{"a": {"Ref": "AWS::NoValue"}, "b": 1}`, map[string]any{"b": float64(1)}},
		{`[{"Ref": "AWS::NoValue"}, "x"]`, []any{"x"}},
	} {
		v, err := rv.Resolve(mustJSON(t, tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(v, tc.want) {
			t.Errorf("%s: got %#v, want %#v", tc.in, v, tc.want)
		}
	}
	if ok, err := rv.Condition("Either"); err != nil || !ok {
		t.Errorf("Either: got %v %v, want true", ok, err)
	}
}

func TestResolveErrorsNameTheProblem(t *testing.T) {
	tm, rv := resolver(t)
	for in, want := range map[string]string{
		`{"Ref": "Nope"}`:                       "no resource or parameter Nope",
		`{"Fn::GetAtt": ["Table", "Missing"]}`:  "Fn::GetAtt Table.Missing: no such attribute",
		`{"Fn::GetAtt": ["Nope", "Arn"]}`:       "no resource Nope",
		`{"Fn::Select": [5, ["a"]]}`:            "out of range",
		`{"Fn::ImportValue": "x"}`:              "Fn::ImportValue: unsupported",
		`{"Fn::Join": ["-", [{"a": 1}]]}`:       "is not a string",
		`{"Fn::Sub": "${Table"}`:                "unclosed",
		`{"Fn::If": ["NoSuchCondition", 1, 2]}`: "no condition NoSuchCondition",
	} {
		_, err := rv.Resolve(mustJSON(t, in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", in, err, want)
		}
	}
	// A property path in the message.
	_, _, err := rv.Prop(&cfn.Resource{LogicalID: "X", Properties: map[string]any{"A": map[string]any{"Ref": "Nope"}}}, "A")
	if err == nil || !strings.HasPrefix(err.Error(), "X.A: ") {
		t.Errorf("Prop error: got %v, want it prefixed X.A", err)
	}
	_ = tm
}

func TestDecodeResolvesOnlyWhatItIsAsked(t *testing.T) {
	tm, rv := resolver(t)
	var p struct {
		MemorySize  cfn.Int
		Environment struct{ Variables map[string]any }
	}
	// Role is never resolved: it is not asked for.
	if err := rv.Decode(tm.Resources["Fn"], &p, "MemorySize", "Environment"); err != nil {
		t.Fatal(err)
	}
	if p.MemorySize != 256 || p.Environment.Variables["TABLE"] != "name-of-Table" {
		t.Errorf("decoded %+v", p)
	}
	if _, ok := p.Environment.Variables["OPTIONAL"]; ok {
		t.Error("AWS::NoValue left a key behind")
	}
}

func TestBoolAndIntAcceptStrings(t *testing.T) {
	tm, err := cfn.Parse([]byte(`{"Resources":{"Q":{"Type":"AWS::SQS::Queue","Properties":{"FifoQueue":"true","VisibilityTimeout":"30","RedrivePolicy":"{\"deadLetterTargetArn\":\"arn\",\"maxReceiveCount\":\"5\"}"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var p cfn.QueueProps
	if err := (&cfn.Resolver{T: tm, IDs: ids{}}).Decode(tm.Resources["Q"], &p); err != nil {
		t.Fatal(err)
	}
	if !p.FifoQueue || cfn.IntOr(p.VisibilityTimeout, 0) != 30 || p.RedrivePolicy == nil || p.RedrivePolicy.MaxReceiveCount != 5 {
		t.Errorf("decoded %+v (redrive %+v)", p, p.RedrivePolicy)
	}
}

func TestReferences(t *testing.T) {
	tm, _ := resolver(t)
	v := mustJSON(t, `{"a": {"Ref": "Table"}, "b": {"Fn::GetAtt": ["Role", "Arn"]}, "c": {"Fn::Sub": "${Fn.Arn}/${AWS::Region}"}, "d": {"Ref": "Stage"}}`)
	if got := tm.References(v); !reflect.DeepEqual(got, []string{"Fn", "Role", "Table"}) {
		t.Errorf("References: got %v", got)
	}
}

func TestCloneAndMutate(t *testing.T) {
	tm, _ := resolver(t)
	c := tm.Clone()
	if !c.Resources["Fn"].DeleteProp("Environment", "Variables", "TABLE") {
		t.Fatal("DeleteProp found nothing")
	}
	c.Resources["Fn"].SetProp(9, "Timeout")
	if _, ok := tm.Resources["Fn"].Prop("Environment", "Variables", "TABLE"); !ok {
		t.Error("mutating the clone changed the original")
	}
	if v, _ := c.Resources["Fn"].Prop("Timeout"); v != 9 {
		t.Errorf("SetProp: got %v", v)
	}
}

func TestStackTemplateAndAssets(t *testing.T) {
	dir := t.TempDir()
	if _, err := cfn.StackTemplate(dir, ""); err == nil || !strings.Contains(err.Error(), "synthesize first") {
		t.Errorf("empty assembly: got %v", err)
	}
	write := func(name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("S.template.json", `{"Resources":{
		"A":{"Type":"AWS::Lambda::Function","Properties":{"Code":{"S3Bucket":"b","S3Key":"abc123.zip"}}},
		"B":{"Type":"AWS::Lambda::Function","Properties":{"Code":{"S3Key":"def456.zip"}}},
		"C":{"Type":"AWS::Lambda::Function","Metadata":{"aws:asset:path":"asset.meta"},"Properties":{}},
		"D":{"Type":"AWS::Lambda::Function","Properties":{"Code":{"ZipFile":"inline"}}}}}`)
	write("asset.abc123/bootstrap", "a")
	write("custom-dir/bootstrap", "b")
	write("S.assets.json", `{"files":{"def456":{"source":{"path":"custom-dir","packaging":"zip"}}}}`)
	write("asset.meta/bootstrap", "c")
	p, err := cfn.StackTemplate(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	tm, err := cfn.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"A": "asset.abc123", "B": "custom-dir", "C": "asset.meta"} {
		got, err := tm.AssetDir(tm.Resources[id])
		if err != nil || got != filepath.Join(dir, want) {
			t.Errorf("AssetDir(%s): got %q %v, want %s", id, got, err, want)
		}
	}
	if _, err := tm.AssetDir(tm.Resources["D"]); err == nil || !strings.Contains(err.Error(), "inline or image code") {
		t.Errorf("inline code: got %v", err)
	}
	write("T.template.json", `{"Resources":{"X":{"Type":"AWS::SNS::Topic"}}}`)
	if _, err := cfn.StackTemplate(dir, ""); err == nil || !strings.Contains(err.Error(), "S, T") {
		t.Errorf("two stacks: got %v, want both named", err)
	}
}

func mustJSON(t *testing.T, s string) any {
	t.Helper()
	tm, err := cfn.Parse([]byte(`{"Resources":{"X":{"Type":"T","Properties":{"v":` + s + `}}}}`))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return tm.Resources["X"].Properties["v"]
}
