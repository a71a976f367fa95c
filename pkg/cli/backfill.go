package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/fourlanes/fourlanes/pkg/repair"
)

const backfillSynopsis = "-subscription S [-tenant T] [-from SEQ|TIME] [-rate N] [-function NAME | -stack NAME [-backbone ID] | -local] [-json]"

// runBackfill invokes dlq-repair with a backfill request until the
// backfill is done: each invocation runs within its own budget and saves
// its position, the next resumes there. Progress goes to stderr after each
// invocation, the last report to stdout.
func runBackfill(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("backfill", backfillSynopsis, stderr)
	sub := fs.String("subscription", "", "the DURABLE subscription to deliver history to (required)")
	tenant := fs.String("tenant", "", "backfill this tenant only (default: every tenant of the log)")
	from := fs.String("from", "", "the first seq (5) or the earliest occurred_at (RFC 3339) to deliver (default: resume a saved backfill, or seq 1)")
	rate := fs.Float64("rate", repair.DefaultBackfillRate, fmt.Sprintf("events per second, at most %d", repair.MaxBackfillRate))
	name := fs.String("function", os.Getenv(EnvRepairFunction), "dlq-repair's name or ARN (the stack output RepairFunctionName; default $"+EnvRepairFunction+")")
	local := fs.Bool("local", false, "invoke the dlq-repair of the twin 'fourlanes dev' is running")
	stack := fs.String("stack", "", stackHelp+" (RepairFunctionName)")
	fs.String(backboneFlag, "", backboneHelp)
	timeout := fs.Duration("timeout", 24*time.Hour, "give up after this long (each invocation resumes where the last stopped, so running again continues)")
	asJSON := fs.Bool("json", false, "print the last report on one line instead of indented")
	addAWSFlags(fs)
	if err := Parse(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	req := repair.BackfillRequest{Subscription: *sub, From: *from, Rate: *rate}
	if *tenant != "" {
		req.Tenants = []string{*tenant}
	}
	if err := req.Validate(); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	payload, err := json.Marshal(repair.Request{Backfill: &req})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	client, err := repairClient(ctx, fs, name, *stack, *local)
	if err != nil {
		return 0, err
	}
	var last repair.Report
	var raw []byte
	for run := 1; ; run++ {
		out, err := client.Invoke(ctx, &lambda.InvokeInput{FunctionName: name, Payload: payload, InvocationType: lambdatypes.InvocationTypeRequestResponse})
		if err != nil {
			return 0, fmt.Errorf("invoke %s (run %d; running the same command again resumes): %w", *name, run, err)
		}
		if out.FunctionError != nil {
			fmt.Fprintln(stderr, string(out.Payload))
			return 0, fmt.Errorf("%s failed (%s) on run %d; running the same command again resumes", *name, aws.ToString(out.FunctionError), run)
		}
		raw = out.Payload
		last = repair.Report{}
		if err := json.Unmarshal(raw, &last); err != nil || last.Backfill == nil {
			return 0, fmt.Errorf("%s answered something that is not a backfill report (%v): %s", *name, err, raw)
		}
		for _, p := range last.Backfill.Tenants {
			fmt.Fprintf(stderr, "fourlanes backfill: run %d: %s %s: seq %d of %d..%d, delivered %d, quarantined skipped %d, already delivered %d, dead-lettered %d, %s",
				run, p.Tenant, last.Backfill.Subscription, p.Position, p.From, p.To, p.Delivered, p.Skipped, p.Already, p.Dead, p.Status)
			if p.Reason != "" {
				fmt.Fprintf(stderr, " (%s)", p.Reason)
			}
			fmt.Fprintln(stderr)
		}
		if last.Backfill.Done || last.Open > 0 || ctx.Err() != nil {
			break
		}
	}
	if err := printReport(stdout, raw, *asJSON); err != nil {
		return 0, err
	}
	if last.Open > 0 || !last.Backfill.Done {
		fmt.Fprintf(stderr, "fourlanes backfill: %d open; fix what the report names and run the same command again to resume\n", last.Open)
		return ExitFinding, nil
	}
	fmt.Fprintf(stderr, "fourlanes backfill: %s done\n", last.Backfill.Subscription)
	return ExitOK, nil
}

// printReport prints a JSON report indented, or on one line.
func printReport(w io.Writer, raw []byte, oneLine bool) error {
	var b bytes.Buffer
	var err error
	if oneLine {
		err = json.Compact(&b, raw)
	} else {
		err = json.Indent(&b, raw, "", "  ")
	}
	if err != nil {
		return fmt.Errorf("the report is not JSON: %w", err)
	}
	_, err = fmt.Fprintln(w, b.String())
	return err
}
