package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

const envSynopsis = "-local [-json]"

// runEnv prints the environment that lets any process (a team's own
// service, a script, the AWS CLI, this CLI without -local) reach the twin
// 'fourlanes dev' is running: eval "$(fourlanes env -local)".
func runEnv(_ context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := Flags("env", envSynopsis, stderr)
	local := fs.Bool("local", false, "the twin 'fourlanes dev' is running (required: the one stack env knows)")
	asJSON := fs.Bool("json", false, "print one JSON object of the variables instead of shell exports")
	if err := Parse(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	if !*local {
		return 0, fmt.Errorf("%w: pass -local: env prints the exports of the running twin of 'fourlanes dev'", ErrUsage)
	}
	st, err := readState()
	if err != nil {
		return 0, err
	}
	vars := localEnv(st)
	if *asJSON {
		m := make(map[string]string, len(vars))
		for _, v := range vars {
			m[v.Name] = v.Value
		}
		return ExitOK, json.NewEncoder(stdout).Encode(m)
	}
	names := make([]string, len(vars))
	for i, v := range vars {
		names[i] = v.Name
	}
	fmt.Fprintf(stdout, "# the twin of 'fourlanes dev' (pid %d, stack %s): eval \"$(fourlanes env -local)\"\n", st.PID, st.StackName)
	fmt.Fprintf(stdout, "# undo: unset %s\n", strings.Join(names, " "))
	for _, v := range vars {
		fmt.Fprintf(stdout, "export %s=%s\n", v.Name, shellQuote(v.Value))
	}
	return ExitOK, nil
}

// envVar is one variable of localEnv.
type envVar struct{ Name, Value string }

// localEnv is the environment that reaches the twin whose state is st: its
// region, credentials it accepts, the AWS SDKs' per-service endpoint
// variables (AWS_ENDPOINT_URL_<SERVICE>), and the stack's resources by the
// variables the framework reads (EVENTS_TABLE, STATE_TABLE, the
// application's own tables, the checkpoint bucket and key, reconcile's URL,
// dlq-repair's name). A value the state lacks (a twin of an older version)
// is left out.
func localEnv(st DevState) []envVar {
	region := st.Region
	if region == "" {
		region = localRegion
	}
	vars := []envVar{
		{"AWS_REGION", region},
		{"AWS_DEFAULT_REGION", region}, // older tools read only this one
		{"AWS_ACCESS_KEY_ID", localAccessKey},
		{"AWS_SECRET_ACCESS_KEY", localSecretKey},
		{"AWS_ENDPOINT_URL_DYNAMODB", st.DynamoDBEndpoint},
		{"AWS_ENDPOINT_URL_DYNAMODB_STREAMS", st.DynamoDBEndpoint}, // the same server serves both
		{"AWS_ENDPOINT_URL_SQS", st.SQSEndpoint},
		{"AWS_ENDPOINT_URL_S3", st.S3Endpoint},
		{"AWS_ENDPOINT_URL_KMS", st.KMSEndpoint},
		{"AWS_ENDPOINT_URL_LAMBDA", st.LambdaEndpoint},
		{"AWS_ENDPOINT_URL_CLOUDFORMATION", st.CloudFormationEndpoint},
		{keys.EnvEventsTable, st.EventsTable},
		{keys.EnvStateTable, st.Outputs[keys.OutputStateTable]},
	}
	// The application's own tables, by the names its functions read.
	var tables []string
	for name := range st.TableEnv {
		if strings.HasSuffix(name, "_TABLE") && name != keys.EnvEventsTable && name != keys.EnvStateTable {
			tables = append(tables, name)
		}
	}
	sort.Strings(tables)
	for _, name := range tables {
		vars = append(vars, envVar{name, st.TableEnv[name]})
	}
	vars = append(vars,
		envVar{keys.EnvCheckpointBucket, st.Outputs[keys.OutputCheckpointBucket]},
		envVar{keys.EnvCheckpointKey, st.Outputs[keys.OutputCheckpointKey]},
		envVar{keys.EnvCheckpointLog, st.CheckpointLog},
		envVar{EnvReconcileURL, st.ReconcileURL},
		envVar{EnvRepairFunction, st.RepairFunction},
	)
	out := vars[:0]
	for _, v := range vars {
		if v.Value != "" && !strings.HasPrefix(v.Value, "(unresolved") { // twin.Outputs' word for an output it could not resolve
			out = append(out, v)
		}
	}
	return out
}

// shellQuote quotes s for a POSIX shell: in single quotes, each quote in s
// closed, escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
