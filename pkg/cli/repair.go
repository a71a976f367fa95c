package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// EnvRepairFunction is the default for repair's -function.
const EnvRepairFunction = "FOURLANES_REPAIR_FUNCTION"

const repairSynopsis = "[-function NAME | -stack NAME [-backbone ID] | -local] [-payload JSON] [-logs] [-json]"

func runRepair(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("repair", repairSynopsis, stderr)
	name := fs.String("function", os.Getenv(EnvRepairFunction), "dlq-repair's name or ARN (the stack output RepairFunctionName; default $"+EnvRepairFunction+")")
	local := fs.Bool("local", false, "invoke the dlq-repair of the twin 'fourlanes dev' is running")
	stack := fs.String("stack", "", stackHelp+" (RepairFunctionName)")
	fs.String(backboneFlag, "", backboneHelp)
	payload := fs.String("payload", "{}", "the invocation's event (JSON)")
	logs := fs.Bool("logs", false, "print the end of the invocation's log to stderr")
	timeout := fs.Duration("timeout", 6*time.Minute, "give up after this long (dlq-repair runs up to 5 minutes)")
	asJSON := fs.Bool("json", false, "print dlq-repair's report on one line instead of indented; the members are the same")
	addAWSFlags(fs)
	if err := Parse(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	if !json.Valid([]byte(*payload)) {
		return 0, fmt.Errorf("%w: -payload is not JSON", ErrUsage)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	client, err := repairClient(ctx, fs, name, *stack, *local)
	if err != nil {
		return 0, err
	}
	in := &lambda.InvokeInput{FunctionName: name, Payload: []byte(*payload), InvocationType: lambdatypes.InvocationTypeRequestResponse}
	if *logs {
		in.LogType = lambdatypes.LogTypeTail
	}
	out, err := client.Invoke(ctx, in)
	if err != nil {
		return 0, fmt.Errorf("invoke %s: %w", *name, err)
	}
	if *logs && out.LogResult != nil {
		if b, err := base64.StdEncoding.DecodeString(*out.LogResult); err == nil {
			fmt.Fprintf(stderr, "--- end of %s's log ---\n%s\n", *name, b)
		}
	}
	var pretty bytes.Buffer
	if *asJSON {
		err = json.Compact(&pretty, out.Payload)
	} else {
		err = json.Indent(&pretty, out.Payload, "", "  ")
	}
	if err != nil {
		pretty.Reset()
		pretty.Write(bytes.TrimSpace(out.Payload))
	}
	if out.FunctionError != nil {
		fmt.Fprintln(stderr, pretty.String())
		return 0, fmt.Errorf("%s failed (%s)", *name, aws.ToString(out.FunctionError))
	}
	fmt.Fprintln(stdout, pretty.String())
	var report struct {
		Fixed    int  `json:"fixed"`
		Open     int  `json:"open"`
		Complete bool `json:"complete"`
	}
	if err := json.Unmarshal(out.Payload, &report); err != nil {
		return 0, fmt.Errorf("%s answered something that is not a report: %w", *name, err)
	}
	fmt.Fprintf(stderr, "fourlanes repair: %d fixed, %d open, complete: %v\n", report.Fixed, report.Open, report.Complete)
	if report.Open > 0 || !report.Complete {
		return ExitFinding, nil
	}
	return ExitOK, nil
}

// repairClient resolves dlq-repair's name (from -function, -stack or
// -local) into *name and returns a Lambda client that invokes it once per
// call (no retries: a retry would race the first run over the same work).
func repairClient(ctx context.Context, fs *flag.FlagSet, name *string, stack string, local bool) (*lambda.Client, error) {
	if err := checkLocal(fs, local); err != nil {
		return nil, err
	}
	so, err := openStack(ctx, fs, stack, local)
	if err != nil {
		return nil, err
	}
	if err := so.fill("function", name, keys.OutputRepairFunction); err != nil {
		return nil, err
	}
	var endpoint string
	if local {
		st, err := readState()
		if err != nil {
			return nil, err
		}
		*name, endpoint = st.RepairFunction, st.LambdaEndpoint
	}
	if *name == "" {
		return nil, fmt.Errorf("%w: no function: pass -function (the stack output RepairFunctionName), -stack NAME, set $%s, or -local for the twin", ErrUsage, EnvRepairFunction)
	}
	cfg, err := awsConfig(ctx, fs, endpoint != "")
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	return lambda.NewFromConfig(cfg, func(o *lambda.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.RetryMaxAttempts = 1
	}), nil
}
