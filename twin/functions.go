package twin

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fourlanes/fourlanes/pkg/obs"
	"github.com/fourlanes/fourlanes/twin/cfn"
	"github.com/fourlanes/fourlanes/twin/lambdart"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

// function is a local Lambda function.
type function struct {
	id      string
	name    string
	arn     string
	timeout time.Duration
	env     map[string]string // the template's variables, resolved
	binary  string
	rt      *lambdart.Function
}

// createFunction prepares a function: its host binary, its environment (the
// template's variables with references resolved to local resources, plus
// what Lambda sets and the local endpoints), timeout and concurrency. No
// process starts until the first invocation.
func (tw *Twin) createFunction(ctx context.Context, res *cfn.Resource) (*resource, error) {
	var p cfn.FunctionProps
	if err := tw.rv.Decode(res, &p, "FunctionName", "Handler", "Runtime", "Environment", "Timeout", "MemorySize", "ReservedConcurrentExecutions", "LoggingConfig"); err != nil {
		return nil, err
	}
	if p.Runtime != "" && !strings.HasPrefix(p.Runtime, "provided") {
		return nil, fmt.Errorf("runtime %s: the twin runs OS-only runtimes (provided.al2023) with a bootstrap binary", p.Runtime)
	}
	binary, err := tw.cfg.Code(tw.t, res)
	if err != nil {
		return nil, fmt.Errorf("code: %w", err)
	}
	name := tw.name(res.LogicalID, 64)
	if p.FunctionName != "" {
		name = p.FunctionName
	}
	arn := arnOf("lambda", "function:"+name)
	f := &function{id: res.LogicalID, name: name, arn: arn, timeout: time.Duration(cfn.IntOr(p.Timeout, 3)) * time.Second, env: map[string]string{}, binary: binary}
	if p.Environment != nil {
		for k, v := range p.Environment.Variables {
			s, ok := v.(string)
			if !ok {
				s = fmt.Sprint(v)
			}
			f.env[k] = s
		}
	}
	memory := cfn.IntOr(p.MemorySize, 128)
	env := map[string]string{}
	for k, v := range f.env {
		env[k] = v
	}
	dir := filepath.Dir(binary)
	for k, v := range map[string]string{
		// What Lambda sets (docs: configuration-envvars, "Defined runtime environment variables").
		"AWS_REGION":                      localaws.Region,
		"AWS_DEFAULT_REGION":              localaws.Region,
		"AWS_LAMBDA_FUNCTION_NAME":        name,
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(memory),
		"AWS_LAMBDA_LOG_GROUP_NAME":       "/aws/lambda/" + name,
		"AWS_LAMBDA_INITIALIZATION_TYPE":  "on-demand",
		"LAMBDA_TASK_ROOT":                dir,
		"LAMBDA_RUNTIME_DIR":              dir,
		"_HANDLER":                        p.Handler,
		"TZ":                              ":UTC",
		"LANG":                            "en_US.UTF-8",
		"PATH":                            "/usr/local/bin:/usr/bin:/bin",
		"AWS_XRAY_DAEMON_ADDRESS":         "127.0.0.1:2000",
		"AWS_XRAY_CONTEXT_MISSING":        "LOG_ERROR",
		// Credentials: the local servers take any; none of the host's may leak in.
		"AWS_ACCESS_KEY_ID":           "fourlanes",
		"AWS_SECRET_ACCESS_KEY":       "local",
		"AWS_SESSION_TOKEN":           "local",
		"AWS_CONFIG_FILE":             "/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
		"AWS_EC2_METADATA_DISABLED":   "true",
		// The SDK's standard per-service endpoints: every client lands on the twin.
		"AWS_ENDPOINT_URL_DYNAMODB":         tw.cfg.DynamoDBEndpoint,
		"AWS_ENDPOINT_URL_DYNAMODB_STREAMS": tw.cfg.DynamoDBEndpoint,
		"AWS_ENDPOINT_URL_SQS":              tw.SQSEndpoint(), // the twin's front to ElasticMQ
		"AWS_ENDPOINT_URL_LAMBDA":           tw.InvokeEndpoint(),
		"AWS_ENDPOINT_URL_KMS":              tw.KMSEndpoint(),
		"AWS_ENDPOINT_URL_S3":               tw.S3Endpoint(),
	} {
		env[k] = v
	}
	// Advanced logging controls: Lambda tells the runtime the format and the
	// application's level through these two variables (docs: "Log-level
	// filtering", custom runtimes), and obs.Setup follows the level.
	if lc := p.LoggingConfig; lc != nil {
		if lc.LogFormat != "" {
			env["AWS_LAMBDA_LOG_FORMAT"] = strings.ToUpper(lc.LogFormat)
		}
		if lc.ApplicationLogLevel != "" && strings.EqualFold(lc.LogFormat, "JSON") {
			env["AWS_LAMBDA_LOG_LEVEL"] = strings.ToUpper(lc.ApplicationLogLevel)
		}
	}
	concurrency := tw.cfg.DefaultConcurrency
	if p.ReservedConcurrentExecutions != nil && int(*p.ReservedConcurrentExecutions) > 0 {
		concurrency = min(int(*p.ReservedConcurrentExecutions), concurrency)
	}
	id := res.LogicalID
	f.rt = lambdart.New(lambdart.Spec{
		Name: name, ARN: arn, Binary: binary, Env: env, Timeout: f.timeout, Concurrency: concurrency,
		Output: func(l lambdart.Line) {
			tw.lines.add(id, l)
			tw.metrics.observe(l.Text)
			if w := tw.cfg.FunctionOutput; w != nil {
				tw.outMu.Lock()
				fmt.Fprintf(w, "%s[%d] %s\n", id, l.Env, l.Text)
				tw.outMu.Unlock()
			}
			if tw.cfg.OnFunctionLine != nil {
				tw.cfg.OnFunctionLine(id, l)
			}
		},
	})
	tw.closers = append(tw.closers, f.rt.Close)
	tw.byName[name] = f
	tw.byName[arn] = f
	tw.log.Info("twin: function", obs.KeyLogicalID, id, obs.KeyName, name, obs.KeyBinary, binary, obs.KeyTimeout, f.timeout, obs.KeyConcurrency, concurrency)
	return &resource{id: id, typ: res.Type, ref: name, attrs: map[string]any{"Arn": arn}, function: f}, nil
}

// functionByRef finds a function by name, ARN (qualified or not) or
// partial ARN, as Lambda's APIs accept it.
func (tw *Twin) functionByRef(ref string) *function {
	if f, ok := tw.byName[ref]; ok {
		return f
	}
	// arn:aws:lambda:region:account:function:name[:qualifier], or account:function:name.
	parts := strings.Split(ref, ":")
	for i, p := range parts {
		if p == "function" && i+1 < len(parts) {
			if f, ok := tw.byName[parts[i+1]]; ok {
				return f
			}
		}
	}
	return nil
}

// Function returns the running function with logical ID id, for tests that
// kill its processes.
func (tw *Twin) Function(id string) (*lambdart.Function, error) {
	r, err := tw.lookup(id, cfn.TypeFunction)
	if err != nil {
		return nil, err
	}
	return r.function.rt, nil
}

// FunctionByCode returns the logical ID of the function whose bootstrap
// was built from functions/<folder> (the folder holding its binary).
func (tw *Twin) FunctionByCode(folder string) (string, error) {
	var found []string
	for id, r := range tw.resources {
		if r.function != nil && filepath.Base(filepath.Dir(r.function.binary)) == folder {
			found = append(found, id)
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("twin: %d functions built from %s, want 1", len(found), folder)
	}
	return found[0], nil
}

// FunctionEnv returns the environment variables the template gives the
// function with logical ID id, resolved to local resources.
func (tw *Twin) FunctionEnv(id string) (map[string]string, error) {
	r, err := tw.lookup(id, cfn.TypeFunction)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(r.function.env))
	for k, v := range r.function.env {
		out[k] = v
	}
	return out, nil
}

// FunctionName returns the local name of the function with logical ID id.
func (tw *Twin) FunctionName(id string) (string, error) {
	r, err := tw.lookup(id, cfn.TypeFunction)
	if err != nil {
		return "", err
	}
	return r.function.name, nil
}

// invoke runs one invocation and journals it. summary describes the input
// (items and keys) for the journal.
func (tw *Twin) invoke(ctx context.Context, f *function, source string, payload []byte, items, keys []string, attempt int) (lambdart.Result, error) {
	res, err := f.rt.Invoke(ctx, payload)
	if err != nil {
		return res, err
	}
	outcome := "ok"
	if res.Err != nil {
		outcome = res.Err.Error()
	}
	detail := fmt.Sprintf("%d bytes in, %v", len(payload), res.Duration.Round(time.Millisecond))
	if res.Cold {
		detail += ", cold start"
	}
	tw.journal.add(Entry{Kind: KindInvoke, Source: source, Function: f.id, RequestID: res.RequestID, Items: items, Keys: keys, Outcome: outcome, Attempt: attempt, Detail: detail})
	return res, nil
}
