package backbonetest

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// Synthesis is one synthesis of a stack: its cloud assembly, its template
// (for the assertions package and as plain JSON) and its annotations.
type Synthesis struct {
	Stack    awscdk.Stack
	OutDir   string // the cloud assembly (template, staged assets, nag report)
	Template assertions.Template
	Doc      Template
	// Errors are the stack's own error annotations (a synthesis error);
	// NagErrors cdk-nag's unsuppressed findings (AwsSolutions-*); Warnings
	// every warning.
	Errors, NagErrors, Warnings []string
	Took                        time.Duration
}

var (
	tmpMu   sync.Mutex
	tmpDirs []string
)

// Synthesize synthesizes the stack build returns, in an app with repoRoot's
// CDK context (NewApp) writing to a fresh folder, its functions' code staged
// from stand-ins (WriteCode) in another: build gets the app and that code
// root, and creates the stack (backbone.New adds cdk-nag's checks).
// Synthesis takes seconds: a test package runs it once (sync.Once) and
// removes the folders in TestMain through Main.
func Synthesize(repoRoot string, build func(app awscdk.App, codeRoot string) awscdk.Stack) (res *Synthesis, err error) {
	defer func() {
		if r := recover(); r != nil { // jsii reports JavaScript errors as Go panics
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	start := time.Now()
	codeRoot, err := tempDir("fourlanes-build-")
	if err != nil {
		return nil, err
	}
	outDir, err := tempDir("fourlanes-cdkout-")
	if err != nil {
		return nil, err
	}
	if err := WriteCode(codeRoot); err != nil {
		return nil, err
	}
	app, err := NewApp(outDir, repoRoot)
	if err != nil {
		return nil, err
	}
	st := build(app, codeRoot)
	doc, err := FromStack(st)
	if err != nil {
		return nil, err
	}
	res = &Synthesis{Stack: st, OutDir: outDir, Template: assertions.Template_FromStack(st, nil), Doc: doc}
	ann := assertions.Annotations_FromStack(st)
	for _, m := range *ann.FindError(jsii.String("*"), assertions.Match_AnyValue()) {
		msg := fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data)
		if strings.Contains(msg, "AwsSolutions-") {
			res.NagErrors = append(res.NagErrors, msg)
		} else {
			res.Errors = append(res.Errors, msg)
		}
	}
	for _, m := range *ann.FindWarning(jsii.String("*"), assertions.Match_AnyValue()) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data))
	}
	sort.Strings(res.Errors)
	sort.Strings(res.NagErrors)
	sort.Strings(res.Warnings)
	res.Took = time.Since(start)
	return res, nil
}

func tempDir(prefix string) (string, error) {
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	tmpMu.Lock()
	tmpDirs = append(tmpDirs, d)
	tmpMu.Unlock()
	return d, nil
}

// Shared returns the synthesis of the stack build makes (Synthesize),
// run once per test binary on first use and shared by every caller, with
// what build returned beside the stack (the caller's own handle on it). A
// failed synthesis fails every caller.
func Shared[S any](repoRoot string, build func(app awscdk.App, codeRoot string) (awscdk.Stack, S)) func(testing.TB) (*Synthesis, S) {
	var (
		once sync.Once
		syn  *Synthesis
		s    S
		err  error
	)
	return func(t testing.TB) (*Synthesis, S) {
		t.Helper()
		once.Do(func() {
			syn, err = Synthesize(repoRoot, func(app awscdk.App, codeRoot string) awscdk.Stack {
				st, v := build(app, codeRoot)
				s = v
				return st
			})
		})
		if err != nil {
			t.Fatalf("synth: %v", err)
		}
		return syn, s
	}
}

// Main runs a test package that synthesizes: its tests, then jsii's runtime
// closed and the folders Synthesize made removed.
func Main(m *testing.M) {
	code := m.Run()
	jsii.Close()
	tmpMu.Lock()
	for _, d := range tmpDirs {
		os.RemoveAll(d)
	}
	tmpMu.Unlock()
	os.Exit(code)
}

// NagRow is one row of cdk-nag's report.
type NagRow struct {
	Rule, Resource, Compliance, Reason, Level string
}

// NagReport reads cdk-nag's AwsSolutions report of the stack from the
// cloud assembly. It fails when the report is missing or too short for the
// pack to have run (an empty error list alone proves nothing).
func (s *Synthesis) NagReport() ([]NagRow, error) {
	p := filepath.Join(s.OutDir, "AwsSolutions--"+*s.Stack.StackName()+"-NagReport.csv")
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("nag report: %w", err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("nag report %s: %w", p, err)
	}
	if len(rows) < 50 {
		return nil, fmt.Errorf("nag report %s has %d rows; did the AwsSolutions pack run?", p, len(rows))
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	out := make([]NagRow, 0, len(rows)-1)
	for _, r := range rows[1:] {
		out = append(out, NagRow{Rule: r[col["Rule ID"]], Resource: r[col["Resource ID"]], Compliance: r[col["Compliance"]],
			Reason: r[col["Exception Reason"]], Level: r[col["Rule Level"]]})
	}
	return out, nil
}
