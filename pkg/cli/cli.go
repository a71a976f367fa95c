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
//
// -stack NAME reads the resources (ReconcileUrl, RepairFunctionName,
// EventsTableName, …) from the stack's outputs through CloudFormation
// DescribeStacks. Against AWS, reconcile signs with SigV4 and repair invokes through the
// Lambda API, both with the default AWS credentials. Against `fourlanes
// dev`, -local reads the running twin's endpoints from .cache/twin/dev.json.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/fourlanes/fourlanes/pkg/app"
	"github.com/fourlanes/fourlanes/pkg/catalog"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1 // the command failed
	ExitUsage = 2
	// ExitFinding: the command worked and found something wrong (a broken
	// chain, repairs left open).
	ExitFinding = 3
)

// usageHead, the usage of each extra command (Command.Usage), usageBody and
// usageTail make the usage text.
const usageHead = `fourlanes: operate a fourlanes stack (AWS, or the local twin of 'fourlanes dev')

Usage:
`

const usageBody = `  fourlanes init       DIR -module PATH [-name NAME] [-fourlanes CHECKOUT] [-no-tidy]
                                            write a new application (a module, a DURABLE and a BEST_EFFORT subscription, its CDK app, tests) into DIR
  fourlanes reconcile  [-url URL | -stack NAME | -local] [-tenant T] [-full] [-limit N] [-max-events N] [-cursor C]
                                            verify tenants' hash chains through the reconcile Function URL
  fourlanes repair     [-function NAME | -stack NAME | -local]
                                            invoke dlq-repair and print its report
  fourlanes export     -tenant T [-o FILE] [-table NAME | -stack NAME | -local]
                                            write a tenant's chain from the events table as an export (JSON Lines)
  fourlanes verify     [-tenant T] [-checkpoint F -key K] [-json] FILE
                                            re-verify an exported chain (JSON Lines; "-" reads stdin) offline
  fourlanes gate       [-C DIR] [-allow TYPE=REASON]... [-catalog FILE | -check-catalog FILE] [-schemas DIR [-write-schemas]] [PACKAGES (default ./...)]
                                            check the application's module declarations against its code (the catalog gate)
  fourlanes schema     [-C DIR] [-type GLOB] [-o DIR] [PACKAGES (default ./...)]
                                            export the JSON Schema of every declared (type, version), for consumers in other languages
  fourlanes emit       -tenant T -type TYPE -payload (JSON | @FILE | @-) [-table NAME | -stack NAME | -local]
                                            append one event to the log
  fourlanes watermarks [-table NAME -state-table NAME | -stack NAME | -local] [-tenant T] [-set-to-head (-tenant T | -all) -yes]
                                            list DURABLE subscriptions' delivery watermarks against each head, or set them to it
  fourlanes effects    [-table NAME -state-table NAME | -stack NAME | -local] [-tenant T] [-json] [-redo KEY | -done KEY]
                                            list the handlers' at-most-once effects of unknown outcome, or decide one
`

const usageTail = `
-stack NAME reads a command's resources from the stack's outputs (CloudFormation DescribeStacks);
a flag given explicitly wins. -local: the twin 'fourlanes dev' is running.
Run 'fourlanes <command> -h' for a command's flags.
Exit status: 0 ok, 1 error, 2 usage, 3 the command found a problem (broken chain, repairs left open, effects of unknown outcome).
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
	// FLAGS", then what it does, indented as the others are.
	Usage string
	// Run runs the command with its arguments. It returns the exit status,
	// or an error: one wrapping ErrUsage is printed with exit status 2.
	Run func(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error)
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

// Run runs one command line (args without the program name) and returns
// the exit status.
func Run(ctx context.Context, a *app.Application, args []string, stdout, stderr io.Writer, extra ...Command) int {
	usage := usageHead
	for _, c := range extra {
		usage += c.Usage
	}
	usage += usageBody + usageTail
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	cmds := map[string]command{
		"reconcile": runReconcile,
		"repair":    runRepair,
		"verify":    runVerify,
		"export":    runExport,
		"gate":      runGate,
		"schema":    runSchema,
		"effects":   runEffects,
		"init":      runInit,
		"emit": func(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
			return runEmit(ctx, a, args, stdout, stderr)
		},
		"watermarks": func(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
			return runWatermarks(ctx, a, args, stdout, stderr)
		},
	}
	for _, c := range extra {
		cmds[c.Name] = c.Run
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "fourlanes: unknown command %q\n\n%s", args[0], usage)
		return ExitUsage
	}
	code, err := cmd(ctx, args[1:], stdout, stderr)
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

// catalogOf is a's catalog, or an error that says how to give the CLI an
// application.
func catalogOf(a *app.Application, command string) (*catalog.Catalog, error) {
	if a == nil {
		return nil, fmt.Errorf("%w: %s needs the application's catalog, and this build of the CLI has none: "+
			"run your application's own CLI, a main that calls cli.Main(yourapp.App) (the orders example's is `go run ./examples/orders/cmd/orders`)", ErrUsage, command)
	}
	return a.Catalog()
}

// Flags returns a flag set for a command that reports errors through Run.
func Flags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: fourlanes %s\n\nFlags:\n", synopsis)
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
