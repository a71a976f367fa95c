package backbone

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"

	"github.com/fourlanes/fourlanes/infra/backbone/backbonetest"
)

// testAlarmEmail is the address the test stack subscribes to its alarm topic.
const testAlarmEmail = "ops@example.com"

// synthesized is the one synthesis of the widget workshop's stack
// (widgets_test.go) that every test in this package shares: synthesis takes
// seconds, the assertions milliseconds.
type synthesized struct {
	*backbonetest.Synthesis
	stack *widgetStack
}

func TestMain(m *testing.M) { backbonetest.Main(m) }

var shared = backbonetest.Shared(filepath.Join("..", ".."), func(app awscdk.App, codeRoot string) (awscdk.Stack, *widgetStack) {
	stack := newWidgetStack(app, "Widgets", &Props{
		CodeRoot:           codeRoot,
		AlarmEmail:         testAlarmEmail,
		ReserveConcurrency: true,
		AuditTrail:         true,
	})
	return stack.Stack, stack
})

// synth returns the shared synthesis, running it on first use.
func synth(t *testing.T) *synthesized {
	t.Helper()
	syn, stack := shared(t)
	return &synthesized{Synthesis: syn, stack: stack}
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
	return backbonetest.Template(s.Doc).Resources(typ)
}

// grant is one Allow statement of one identity policy, flattened.
type grant = backbonetest.Grant

// grants returns every identity-policy Allow statement in the template.
func grants(doc map[string]any) []grant { return backbonetest.Template(doc).Grants() }

// TestSynthTime reports how long the shared synthesis took.
func TestSynthTime(t *testing.T) {
	s := synth(t)
	t.Logf("synth + template + annotations: %v", s.Took.Round(time.Millisecond))
}
