package backbone

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/infra/backbone/backbonetest"
)

// testAlarmEmail is the address the test stack subscribes to its alarm topic.
const testAlarmEmail = "ops@example.com"

// synthesized is the one synthesis of the widget workshop's stack
// (widgets_test.go) that every test in this package shares: synthesis takes
// seconds, the assertions milliseconds.
type synthesized struct {
	stack    *widgetStack
	template assertions.Template
	// doc is the template as plain JSON, for checks the assertions package
	// cannot express (every policy, every statement).
	doc map[string]any
	// nagErrors and nagWarnings are cdk-nag's unsuppressed findings.
	nagErrors, nagWarnings []string
	// outDir is the cloud assembly (template, staged assets, nag report).
	outDir string
	took   time.Duration
}

var (
	synthOnce sync.Once
	synthRes  *synthesized
	synthErr  error
	tmpDirs   []string
)

func TestMain(m *testing.M) {
	code := m.Run()
	jsii.Close()
	for _, d := range tmpDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// synth returns the shared synthesis, running it on first use.
func synth(t *testing.T) *synthesized {
	t.Helper()
	synthOnce.Do(func() { synthRes, synthErr = doSynth() })
	if synthErr != nil {
		t.Fatalf("synth: %v", synthErr)
	}
	return synthRes
}

func doSynth() (res *synthesized, err error) {
	// jsii reports JavaScript errors as Go panics.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	start := time.Now()
	codeRoot, err := os.MkdirTemp("", "fourlanes-build-")
	if err != nil {
		return nil, err
	}
	outDir, err := os.MkdirTemp("", "fourlanes-cdkout-")
	if err != nil {
		return nil, err
	}
	tmpDirs = append(tmpDirs, codeRoot, outDir)
	// Synthesis must not depend on whether the binaries are built.
	if err := backbonetest.WriteCode(codeRoot); err != nil {
		return nil, err
	}
	app, err := backbonetest.NewApp(outDir, filepath.Join("..", ".."))
	if err != nil {
		return nil, err
	}
	stack := newWidgetStack(app, "Widgets", &Props{
		CodeRoot:           codeRoot,
		AlarmEmail:         testAlarmEmail,
		ReserveConcurrency: true,
	})
	AddChecks(app)

	tmpl := assertions.Template_FromStack(stack.Stack, nil)
	doc := map[string]any{}
	raw, err := json.Marshal(tmpl.ToJSON())
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	ann := assertions.Annotations_FromStack(stack.Stack)
	nagRe := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-"))
	res = &synthesized{stack: stack, template: tmpl, doc: doc, outDir: outDir}
	for _, m := range *ann.FindError(jsii.String("*"), nagRe) {
		res.nagErrors = append(res.nagErrors, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data))
	}
	for _, m := range *ann.FindWarning(jsii.String("*"), assertions.Match_AnyValue()) {
		res.nagWarnings = append(res.nagWarnings, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data))
	}
	sort.Strings(res.nagErrors)
	sort.Strings(res.nagWarnings)
	res.took = time.Since(start)
	return res, nil
}

// id returns the logical ID of a construct's CloudFormation resource.
func (s *synthesized) id(c constructs.IConstruct) string {
	return *s.stack.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
}

// The template helpers are backbonetest's, shared with the tests of the
// applications' stacks.
var (
	ref    = backbonetest.Ref    // {"Ref": id}
	getAtt = backbonetest.GetAtt // {"Fn::GetAtt": [id, attr]}
	props  = backbonetest.Props  // a resource's Properties
	list   = backbonetest.List
	strs   = backbonetest.Strings
	access = backbonetest.Access
)

// resources returns the template's resources of one type, by logical ID.
func (s *synthesized) resources(typ string) map[string]map[string]any {
	return backbonetest.Template(s.doc).Resources(typ)
}

// grant is one Allow statement of one identity policy, flattened.
type grant = backbonetest.Grant

// grants returns every identity-policy Allow statement in the template.
func grants(doc map[string]any) []grant { return backbonetest.Template(doc).Grants() }

// TestSynthTime reports how long the shared synthesis took.
func TestSynthTime(t *testing.T) {
	s := synth(t)
	t.Logf("synth + template + annotations: %v", s.took.Round(time.Millisecond))
}
