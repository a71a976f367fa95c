// Command fourlanes is the operator's tool for a fourlanes stack:
//
//	fourlanes dev                    run the whole stack on this machine (the local twin)
//	fourlanes dynamodb -listen ADDR  serve the twin's own DynamoDB (and Streams) on ADDR
//	fourlanes reconcile [-tenant T]  ask the reconcile Function URL whether the chains hold
//	fourlanes repair                 invoke dlq-repair and print its report
//	fourlanes export -tenant T       write a tenant's chain as an export (JSON Lines)
//	fourlanes verify FILE            re-verify an exported chain (JSON Lines) offline
//	fourlanes emit -tenant T -type TYPE -payload JSON|@FILE   append one event
//	fourlanes watermarks [-set-to-head -tenant T|-all -yes]  delivery watermarks against the heads
//
// -stack NAME reads the resources (ReconcileUrl, RepairFunctionName,
// EventsTableName, …) from the stack's outputs through CloudFormation
// DescribeStacks. Against AWS, reconcile signs with SigV4 and repair invokes through the
// Lambda API, both with the default AWS credentials. Against `fourlanes
// dev`, -local reads the running twin's endpoints from .cache/twin/dev.json.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed
	exitUsage = 2
	// exitFinding: the command worked and found something wrong (a broken
	// chain, repairs left open).
	exitFinding = 3
)

const usage = `fourlanes: operate a fourlanes stack (AWS, or the local twin of 'fourlanes dev')

Usage:
  fourlanes dev        [flags]              run the stack locally from the synthesized template, with a demo workload
  fourlanes dynamodb   -listen ADDR [-data DIR] [-conflicts] [-partition-wcu N] [-stream-retention D] [-shard-records N]
                                            serve the twin's own DynamoDB and DynamoDB Streams (in memory unless -data)
  fourlanes reconcile  [-url URL | -stack NAME | -local] [-tenant T] [-full] [-limit N] [-max-events N] [-cursor C]
                                            verify tenants' hash chains through the reconcile Function URL
  fourlanes repair     [-function NAME | -stack NAME | -local]
                                            invoke dlq-repair and print its report
  fourlanes export     -tenant T [-o FILE] [-table NAME | -stack NAME | -local]
                                            write a tenant's chain from the events table as an export (JSON Lines)
  fourlanes verify     [-tenant T] [-checkpoint F -key K] [-json] FILE
                                            re-verify an exported chain (JSON Lines; "-" reads stdin) offline
  fourlanes emit       -tenant T -type TYPE -payload (JSON | @FILE | @-) [-table NAME | -stack NAME | -local]
                                            append one event to the log
  fourlanes watermarks [-table NAME -state-table NAME | -stack NAME | -local] [-tenant T] [-set-to-head (-tenant T | -all) -yes]
                                            list DURABLE subscriptions' delivery watermarks against each head, or set them to it

-stack NAME reads a command's resources from the stack's outputs (CloudFormation DescribeStacks);
a flag given explicitly wins. -local: the twin 'fourlanes dev' is running.
Run 'fourlanes <command> -h' for a command's flags.
Exit status: 0 ok, 1 error, 2 usage, 3 the command found a problem (broken chain, repairs left open).
`

// errUsage marks an error the user fixes by changing the command line;
// errUsageShown, one the flag package has already printed with the usage.
var (
	errUsage      = errors.New("usage")
	errUsageShown = errors.New("usage shown")
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type command func(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error)

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	cmds := map[string]command{
		"dev":        runDev,
		"dynamodb":   runDynamoDB,
		"reconcile":  runReconcile,
		"repair":     runRepair,
		"verify":     runVerify,
		"export":     runExport,
		"emit":       runEmit,
		"watermarks": runWatermarks,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "fourlanes: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	code, err := cmd(ctx, args[1:], stdout, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsageShown):
		return exitUsage
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "fourlanes %s: %v\n", args[0], err)
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "fourlanes %s: %v\n", args[0], err)
		return exitError
	}
	return code
}

// flags returns a flag set for a command that reports errors through run.
func flags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: fourlanes %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args, turning a flag error into a usage error.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsageShown
	}
	return nil
}
