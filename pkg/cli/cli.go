// Package cli is the operator's tool for a fourlanes stack, as a library an
// application's own command wraps in one line, so that the commands that
// need the application's catalog (emit, watermarks) have it:
//
//	func main() { os.Exit(cli.Main(myapp.App)) }
//
// cmd/fourlanes is the framework's build of it (no application: emit and
// watermarks then ask for one), plus dev and dynamodb; examples/orders/cmd/orders
// is the orders example's. The commands:
//
//	fourlanes init DIR -module PATH  write a new application that runs on the twin and passes its tests
//	fourlanes dev                    run the whole stack on this machine (the local twin)
//	fourlanes dynamodb -listen ADDR  serve the twin's own DynamoDB (and Streams) on ADDR
//	fourlanes reconcile [-tenant T]  ask the reconcile Function URL whether the chains hold
//	fourlanes repair                 invoke dlq-repair and print its report
//	fourlanes export -tenant T       write a tenant's chain as an export (JSON Lines)
//	fourlanes verify FILE            re-verify an exported chain (JSON Lines) offline
//	fourlanes gate ./...             check module declarations against the code (pkg/catalog/gate)
//	fourlanes emit -tenant T -type TYPE -payload JSON|@FILE   append one event
//	fourlanes watermarks [-set-to-head -tenant T|-all -yes]  delivery watermarks against the heads
//	fourlanes effects [-tenant T] [-redo KEY | -done KEY]    effects of unknown outcome, and the decision on one
//	fourlanes restore-state -from TABLE [-yes]             merge a restored copy of the state table into the live one
//	fourlanes env -local             the shell exports that reach the running twin
//	fourlanes version                the CLI's version
//
// -stack NAME reads the resources (ReconcileUrl, RepairFunctionName,
// EventsTableName, …) from the stack's outputs through CloudFormation
// DescribeStacks. Against AWS, reconcile signs with SigV4 and repair invokes
// through the Lambda API, both with the default AWS credentials, or those of
// --profile and --region (aws.go). Against 'fourlanes dev', -local reads the
// running twin's endpoints from .cache/twin/dev.json. docs/cli.md is the
// reference: every command, its flags, its JSON and its exit status.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
)

// Exit codes. docs/cli.md says how to keep them: run a built binary (go
// build, go install) or go tool, not go run, which exits 1 for any failure.
const (
	ExitOK    = 0
	ExitError = 1 // the command failed
	ExitUsage = 2
	// ExitFinding: the command worked and found something wrong (a broken
	// chain, dead letters, unsettled events, repairs left open, effects of
	// unknown outcome, a violation of the catalog gate).
	ExitFinding = 3
)

const usageHead = `fourlanes: operate a fourlanes stack (AWS, or the local twin of 'fourlanes dev')

Usage:
`

const usageTail = `
Commands that talk to AWS take --profile NAME and --region NAME, before or after the command
name, as the AWS CLI does: a flag wins over $AWS_PROFILE and $AWS_REGION, which win over the
shared config files. -stack NAME reads a command's resources from the stack's outputs
(CloudFormation DescribeStacks); a flag given explicitly wins. -local: the twin 'fourlanes dev'
is running. -json: machine-readable output, one JSON object per line.
Run 'fourlanes <command> -h' for a command's flags.
Exit status: 0 ok, 1 error, 2 usage, 3 the command found a problem (a broken chain, dead letters,
unsettled events, effects of unknown outcome, repairs left open, a gate violation).
Run a built binary (go install, go build) or go tool to keep it: go run turns every failure into 1.
`

// ErrUsage marks an error the user fixes by changing the command line;
// errUsageShown, one the flag package has already printed with the usage.
var (
	ErrUsage      = errors.New("usage")
	errUsageShown = errors.New("usage shown")
)

// Command is a command a build of the CLI adds (cmd/fourlanes adds dev and
// dynamodb, which run the local twin).
type Command struct {
	Name string
	// Usage is the command's lines in the usage text: "  fourlanes NAME
	// FLAGS", then what it does, indented as the others are (UsageLines
	// formats them).
	Usage string
	// Run runs the command with its arguments. It returns the exit status,
	// or an error: one wrapping ErrUsage is printed with exit status 2.
	Run func(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error)
}

// UsageLines formats a command's lines in the usage text: its name and
// synopsis, then what it does.
func UsageLines(name, synopsis, summary string) string {
	return fmt.Sprintf("  fourlanes %-10s %s\n%44s%s\n", name, synopsis, "", summary)
}

// Main runs the CLI on os.Args for application a (nil: a build without an
// application, whose emit and watermarks ask for one) with the extra
// commands, until SIGINT or SIGTERM, and returns the exit status.
func Main(a *app.Application, extra ...Command) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, a, os.Args[1:], os.Stdout, os.Stderr, extra...)
}

type command func(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error)

// builtin is one of the CLI's own commands.
type builtin struct {
	name, synopsis, summary string
	// aws: the command talks to AWS, so it takes --profile and --region
	// (addAWSFlags).
	aws bool
	run command
}

// builtins are the CLI's own commands, in the order the usage lists them.
func builtins(a *app.Application) []builtin {
	return []builtin{
		{"init", initSynopsis, "write a new application (a module, a DURABLE and a BEST_EFFORT subscription, its CDK app, tests) into DIR", false, runInit},
		{"reconcile", reconcileSynopsis, "verify tenants' hash chains and deliveries through the reconcile Function URL", true, runReconcile},
		{"repair", repairSynopsis, "invoke dlq-repair and print its report", true, runRepair},
		{"backfill", backfillSynopsis, "deliver a DURABLE subscription's history before its start, rate-limited and resumable, through dlq-repair", true, runBackfill},
		{"export", exportSynopsis, "write a tenant's chain from the events table as an export (JSON Lines)", true, runExport},
		{"verify", verifySynopsis, "re-verify an exported chain (JSON Lines; \"-\" reads stdin) offline", false, runVerify},
		{"schema", schemaSynopsis, "export the JSON Schema of every declared (type, version), for consumers in other languages", false, runSchema},
		{"gate", gateSynopsis, "check the application's module declarations against its code (the catalog gate)", false, runGate},
		{"emit", emitSynopsis, "append one event to the log", true, func(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
			return runEmit(ctx, a, args, stdout, stderr)
		}},
		{"watermarks", watermarksSynopsis, "list DURABLE subscriptions' delivery watermarks against each head, or set them to it", true,
			func(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
				return runWatermarks(ctx, a, args, stdout, stderr)
			}},
		{"deadletters", deadlettersSynopsis, "list open dead letters (from the dead-letter index), or resolved ones with who, when and how", true, runDeadLetters},
		{"effects", effectsSynopsis, "list the handlers' at-most-once effects of unknown outcome, or decide one", true, runEffects},
		{"restore-state", restoreStateSynopsis, "copy, from a state table restored to an earlier time, every claim, effect, dead letter and watermark the live one lacks (dry run without -yes)", true, runRestoreState},
		{"erase", eraseSynopsis, "erase a data subject's personal fields (crypto-shredding: the log and its chain stay intact), or show its state", true, runErase},
		{"env", envSynopsis, "print the shell exports that let any process reach the running twin of 'fourlanes dev'", false, runEnv},
		{"version", versionSynopsis, "print the CLI's version", false, runVersion},
	}
}

// Run runs one command line (args without the program name) and returns
// the exit status.
func Run(ctx context.Context, a *app.Application, args []string, stdout, stderr io.Writer, extra ...Command) int {
	usage := usageHead
	for _, c := range extra {
		usage += c.Usage
	}
	cmds := map[string]command{}
	takesAWS := map[string]bool{}
	var awsNames []string
	for _, b := range builtins(a) {
		usage += UsageLines(b.name, b.synopsis, b.summary)
		cmds[b.name] = b.run
		if b.aws {
			takesAWS[b.name] = true
			awsNames = append(awsNames, b.name)
		}
	}
	usage += usageTail
	for _, c := range extra {
		cmds[c.Name] = c.Run
	}
	global, args, err := globalFlags(args)
	if err != nil {
		fmt.Fprintf(stderr, "fourlanes: %v\n\n%s", err, usage)
		return ExitUsage
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "fourlanes: unknown command %q\n\n%s", args[0], usage)
		return ExitUsage
	}
	if len(global) > 0 && !takesAWS[args[0]] {
		name, _, _ := strings.Cut(global[0], "=")
		fmt.Fprintf(stderr, "fourlanes %s: -%s applies to the commands that talk to AWS (%s); %s does not\n",
			args[0], name, strings.Join(awsNames, ", "), args[0])
		return ExitUsage
	}
	code, err := cmd(ctx, append(global, args[1:]...), stdout, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.Is(err, errUsageShown):
		return ExitUsage
	case errors.Is(err, ErrUsage):
		fmt.Fprintf(stderr, "fourlanes %s: %v\n", args[0], err)
		return ExitUsage
	case err != nil:
		fmt.Fprintf(stderr, "fourlanes %s: %v\n", args[0], err)
		return ExitError
	}
	return code
}

// globalFlags takes --profile and --region (or -profile, -region, either
// with =VALUE) from before the command name, as the AWS CLI takes them,
// and returns them as flags for the command, and the rest of args.
func globalFlags(args []string) (global, rest []string, err error) {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "--help" {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		if name != "profile" && name != "region" {
			return nil, nil, fmt.Errorf("%s before the command: only --profile and --region go there; a command's own flags follow its name", args[0])
		}
		if !hasValue {
			if len(args) < 2 {
				return nil, nil, fmt.Errorf("%s needs a value: --%s NAME", args[0], name)
			}
			value, args = args[1], args[1:]
		}
		global = append(global, "-"+name+"="+value)
		args = args[1:]
	}
	return global, args, nil
}

// catalogOf is a's catalog, or an error that says how to give the CLI an
// application.
func catalogOf(a *app.Application, command string) (*catalog.Catalog, error) {
	if a == nil {
		return nil, fmt.Errorf("%w: %s needs the application's catalog, and this build of the CLI has none: "+
			"run your application's own CLI, a main that calls cli.Main(yourapp.App) (the orders example's is `go run ./examples/orders/cmd/orders`)", ErrUsage, command)
	}
	return a.Catalog()
}

// Flags returns a flag set for the command name, whose usage reads
// "Usage: fourlanes NAME SYNOPSIS" and then the flags, for a command that
// reports errors through Run. A back-quoted word in a flag's usage is the
// name of its argument (flag.UnquoteUsage): quote anything else with '.
func Flags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: fourlanes %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses args, turning a flag error into a usage error.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsageShown
	}
	return nil
}
