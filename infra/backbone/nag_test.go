package backbone

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/fourlanes/fourlanes/infra/backbone/backbonetest"
	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestNagAwsSolutions: cdk-nag's AwsSolutions pack finds no unsuppressed
// error on the backbone's resources, and every suppression carries a
// reason. The team's own resources beside it (the bench function with CDK's
// default role, and its AWS managed policy) are checked too, and their
// findings reported as warnings and Non-Compliant rows of the report, not
// as errors: the synthesis went through.
func TestNagAwsSolutions(t *testing.T) {
	s := synth(t)
	for _, e := range s.NagErrors {
		t.Errorf("unsuppressed: %s", e)
	}
	for _, w := range s.Warnings {
		t.Logf("warning: %s", w)
	}

	// The report proves the pack ran (an empty error list alone would not).
	rows, err := s.NagReport()
	if err != nil {
		t.Fatal(err)
	}
	backbone := *s.stack.Backbone.Node().Path() + "/"
	bench := *s.stack.Bench.Role().Node().DefaultChild().Node().Path()
	suppressed := map[string]bool{}
	var benchReported bool
	for _, r := range rows {
		rule, res, comp, reason, level := r.Rule, r.Resource, r.Compliance, r.Reason, r.Level
		switch comp {
		case "Non-Compliant":
			if level == "Error" && strings.HasPrefix(res, backbone) {
				t.Errorf("non-compliant: %s on %s", rule, res)
			}
			benchReported = benchReported || (rule == "AwsSolutions-IAM4" && res == bench)
		case "Suppressed":
			if len(strings.TrimSpace(reason)) < 40 {
				t.Errorf("suppression of %s on %s has no real reason: %q", rule, res, reason)
			}
			suppressed[rule+" "+res+": "+reason] = true
		}
	}
	if !benchReported {
		t.Errorf("the nag report has no Non-Compliant AwsSolutions-IAM4 row for the team's %s", bench)
	}
	if !hasWarning(s.Warnings, "/"+bench, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]", "outside the fourlanes backbone") {
		t.Errorf("no warning on %s for its AWS managed policy; warnings: %v", bench, s.Warnings)
	}
	var lines []string
	for l := range suppressed {
		lines = append(lines, l)
	}
	sort.Strings(lines)
	for _, l := range lines {
		t.Logf("suppressed %s", l)
	}
}

// hasWarning reports whether a warning at path contains every part.
func hasWarning(warnings []string, path string, parts ...string) bool {
	for _, w := range warnings {
		ok := strings.HasPrefix(w, path+": ")
		for _, p := range parts {
			ok = ok && strings.Contains(w, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// teamStack is a small team's stack: a table of its own without
// point-in-time recovery, an ordinary Lambda function with CDK's default
// role (an AWS managed policy) granted GrantEmit, and the library's backbone.
func teamStack(t *testing.T, failOnTeamFindings bool) (awscdk.Stack, awslambda.Function, awsdynamodb.Table) {
	t.Helper()
	var fn awslambda.Function
	var plain awsdynamodb.Table
	st := newLibraryStack(t, func(st awscdk.Stack, p *Props) {
		p.FailOnTeamFindings = failOnTeamFindings
		plain = testTable(st, "Plain", "")
		fn = awslambda.NewFunction(st, jsii.String("Service"), &awslambda.FunctionProps{
			Runtime: awslambda.Runtime_PROVIDED_AL2023(),
			Handler: jsii.String("bootstrap"),
			Code:    awslambda.Code_FromAsset(jsii.String(filepath.Join(p.CodeRoot, keys.FnStreamFilter)), nil),
		})
	}, func(b *Backbone) { b.GrantEmit(fn) })
	return st, fn, plain
}

// TestTeamFindingsReported: beside the backbone, a team's plain table and
// ordinary function synthesize; cdk-nag's findings on them are warnings,
// none an error.
func TestTeamFindingsReported(t *testing.T) {
	st, fn, table := teamStack(t, false)
	ann := assertions.Annotations_FromStack(st)
	for _, m := range *ann.FindError(jsii.String("*"), assertions.Match_AnyValue()) {
		t.Errorf("error at %s: %v", *m.Id, m.Entry.Data)
	}
	var warnings []string
	for _, m := range *ann.FindWarning(jsii.String("*"), assertions.Match_AnyValue()) {
		warnings = append(warnings, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data))
	}
	role := "/" + *fn.Role().Node().DefaultChild().Node().Path()
	if !hasWarning(warnings, role, "AwsSolutions-IAM4", "outside the fourlanes backbone") {
		t.Errorf("no warning for the function's managed policy at %s: %v", role, warnings)
	}
	tbl := "/" + *table.Node().DefaultChild().Node().Path()
	if !hasWarning(warnings, tbl, "AwsSolutions-DDB3") {
		t.Errorf("no warning for the table's missing point-in-time recovery at %s: %v", tbl, warnings)
	}
	if _, err := backbonetest.FromStack(st); err != nil {
		t.Errorf("the stack does not synthesize: %v", err)
	}
}

// TestFailOnTeamFindings: the team asks, and the same findings fail the
// synthesis as errors; a WARN rule's finding stays a warning.
func TestFailOnTeamFindings(t *testing.T) {
	st, fn, table := teamStack(t, true)
	ann := assertions.Annotations_FromStack(st)
	var errs []string
	for _, m := range *ann.FindError(jsii.String("*"), assertions.Match_AnyValue()) {
		errs = append(errs, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data))
	}
	role := "/" + *fn.Role().Node().DefaultChild().Node().Path()
	if !hasWarning(errs, role, "AwsSolutions-IAM4") {
		t.Errorf("no error for the function's managed policy at %s: %v", role, errs)
	}
	for _, e := range errs {
		if !strings.HasPrefix(e, role+": ") {
			t.Errorf("an error elsewhere than the team's function role: %s", e)
		}
	}
	var warnings []string
	for _, m := range *ann.FindWarning(jsii.String("*"), assertions.Match_AnyValue()) {
		warnings = append(warnings, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data))
	}
	if tbl := "/" + *table.Node().DefaultChild().Node().Path(); !hasWarning(warnings, tbl, "AwsSolutions-DDB3") {
		t.Errorf("the table's missing point-in-time recovery (a WARN rule) is not a warning at %s: %v", tbl, warnings)
	}
}

// TestAddChecks: the explicit call makes findings errors in every stack of
// the app, one without a backbone too; NewBackbone is New with
// UnprefixedID.
func TestAddChecks(t *testing.T) {
	st, fn, _ := teamStack(t, false)
	app := awscdk.Stage_Of(st)
	other := awscdk.NewStack(app, jsii.String("Plain"), nil)
	lone := awslambda.NewFunction(other, jsii.String("Lone"), &awslambda.FunctionProps{
		Runtime: awslambda.Runtime_PROVIDED_AL2023(),
		Handler: jsii.String("bootstrap"),
		Code:    awslambda.Code_FromAsset(jsii.String(t.TempDir()), nil),
	})
	AddChecks(app)
	for _, c := range []struct {
		st   awscdk.Stack
		role awslambda.Function
	}{{st, fn}, {other, lone}} {
		var errs []string
		for _, m := range *assertions.Annotations_FromStack(c.st).FindError(jsii.String("*"), assertions.Match_AnyValue()) {
			errs = append(errs, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data))
		}
		role := "/" + *c.role.Role().Node().DefaultChild().Node().Path()
		if !hasWarning(errs, role, "AwsSolutions-IAM4") {
			t.Errorf("stack %s: no error for %s's managed policy: %v", *c.st.StackName(), role, errs)
		}
	}

	b := NewBackbone(awscdk.NewStack(app, jsii.String("Old"), nil), &Props{App: libraryApp})
	if b.Prefix() != "" || *b.Node().Id() != UnprefixedID {
		t.Errorf("NewBackbone: id %q, prefix %q; want %q and none", *b.Node().Id(), b.Prefix(), UnprefixedID)
	}
}
