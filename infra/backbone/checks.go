package backbone

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// checks is cdk-nag's AwsSolutions pack on one stack, shared by the
// backbones there: the first New in a stack adds it to the stack's aspects,
// the others find it there. It checks the backbones' own resources strictly
// (an unsuppressed finding is an error, which fails the synthesis: the
// backbone suppresses what it must, each with its reason) and every other
// resource of the stack, the team's, as a report: a finding there is a
// warning and a row of the stack's nag report, and the synthesis goes on,
// unless a backbone's Props.FailOnTeamFindings asks for errors there too.
// One report logger serves both packs: each pack's own would start the
// stack's report file afresh and drop the other's rows. A team finding's row
// keeps its rule's level (Error or Warning) and reads Non-Compliant.
type checks struct {
	strict, report cdknag.NagPack
	failTeam       bool
	backbones      []checked
}

// checked is one backbone of the stack: its construct path and prefix.
type checked struct {
	path, prefix string
}

var _ awscdk.IAspect = (*checks)(nil)

// stackChecks returns stack's checks, adding them on first use.
func stackChecks(stack awscdk.Stack) *checks {
	aspects := awscdk.Aspects_Of(stack)
	for _, a := range *aspects.All() {
		if c, ok := a.(*checks); ok {
			return c
		}
	}
	logger := cdknag.NewNagReportLogger(&cdknag.NagReportLoggerProps{Formats: &[]cdknag.NagReportFormat{cdknag.NagReportFormat_CSV}})
	props := func() *cdknag.NagPackProps {
		return &cdknag.NagPackProps{Verbose: jsii.Bool(true), Reports: jsii.Bool(false), AdditionalLoggers: &[]cdknag.INagLogger{logger}}
	}
	team := &teamAnnotations{}
	cdknag.NewAnnotationLogger_Override(team, &cdknag.AnnotationLoggerProps{Verbose: jsii.Bool(true)})
	report := cdknag.NewAwsSolutionsChecks(props())
	report.SetLoggers(&[]cdknag.INagLogger{team, logger})
	c := &checks{strict: cdknag.NewAwsSolutionsChecks(props()), report: report}
	aspects.Add(c, nil)
	return c
}

// add registers a backbone; it returns the path of another backbone of the
// stack with the same prefix, if there is one.
func (c *checks) add(path, prefix string, failTeam bool) (taken string) {
	for _, b := range c.backbones {
		if b.prefix == prefix {
			return b.path
		}
	}
	c.backbones = append(c.backbones, checked{path: path, prefix: prefix})
	c.failTeam = c.failTeam || failTeam
	return ""
}

// Visit checks one CloudFormation resource with the pack its owner calls
// for.
func (c *checks) Visit(node constructs.IConstruct) {
	if !*awscdk.CfnResource_IsCfnResource(node) {
		return
	}
	path := *node.Node().Path()
	for _, b := range c.backbones {
		if strings.HasPrefix(path, b.path+"/") {
			c.strict.Visit(node)
			return
		}
	}
	if c.failTeam {
		c.strict.Visit(node)
		return
	}
	c.report.Visit(node)
}

// teamAnnotations is cdk-nag's AnnotationLogger with one change: a finding
// on a team's resource is a warning whatever the rule's level (with the
// rule's id and the finding as the warning's id, so a team can acknowledge
// it), never an error. The pack calls into Go only for findings: the other
// callbacks (compliant, not applicable, suppressed) stay the logger's own.
type teamAnnotations struct {
	cdknag.AnnotationLogger
}

// OnNonCompliance reports one finding as a warning.
func (l *teamAnnotations) OnNonCompliance(data *cdknag.NagLoggerNonComplianceData) {
	id := *data.RuleId
	if data.FindingId != nil && *data.FindingId != "" {
		id += "[" + *data.FindingId + "]"
	}
	awscdk.Annotations_Of(data.Resource).AddWarningV2(jsii.String(id), jsii.String(fmt.Sprintf(
		"%s: %s %s (a resource outside the fourlanes backbone: reported, not enforced; backbone.Props.FailOnTeamFindings makes it an error. Fix it, or suppress it with cdknag.NagSuppressions and a reason.)",
		id, *data.RuleInfo, *data.RuleExplanation)), nil)
}

// AddChecks makes cdk-nag's findings on every resource of the stacks under
// scope (an app, a stage or a stack) errors that fail the synthesis: what
// Props.FailOnTeamFindings asks for one backbone's stack, asked for all of
// them, and a stack without a backbone gets the AwsSolutions pack too. It
// finds the stacks when it is called: call it once they exist.
func AddChecks(scope constructs.IConstruct) {
	for _, n := range *scope.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		if *awscdk.Stack_IsStack(n) {
			stackChecks(awscdk.Stack_Of(n)).failTeam = true
		}
	}
}
