package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fourlanes/fourlanes/pkg/keys"
)

// TestVersionOf: the version is the runtime module's as the build recorded
// it, in the framework's binary and in an application's own build of the
// CLI; a build from source (a workspace, a replace directive to a folder)
// reports the Version constant and says it is not recorded.
func TestVersionOf(t *testing.T) {
	dep := func(path, version string, replace *debug.Module) *debug.Module {
		return &debug.Module{Path: path, Version: version, Replace: replace}
	}
	for _, tc := range []struct {
		name     string
		bi       *debug.BuildInfo
		version  string
		recorded bool
	}{
		{"go install .../cmd/fourlanes@v0.2.0", &debug.BuildInfo{
			Main: debug.Module{Path: runtimeModule + "/cmd/fourlanes", Version: "v0.2.0"},
			Deps: []*debug.Module{dep(runtimeModule, "v0.2.0", nil)}}, "v0.2.0", true},
		{"an application's CLI requiring v0.3.1", &debug.BuildInfo{
			Main: debug.Module{Path: "example.com/shop", Version: "(devel)"},
			Deps: []*debug.Module{dep("example.com/other", "v1.0.0", nil), dep(runtimeModule, "v0.3.1", nil)}}, "v0.3.1", true},
		{"the runtime module itself", &debug.BuildInfo{Main: debug.Module{Path: runtimeModule, Version: "v0.4.0"}}, "v0.4.0", true},
		{"a workspace", &debug.BuildInfo{
			Main: debug.Module{Path: runtimeModule + "/cmd/fourlanes", Version: "(devel)"},
			Deps: []*debug.Module{dep(runtimeModule, "(devel)", nil)}}, Version, false},
		{"replaced by a folder", &debug.BuildInfo{
			Main: debug.Module{Path: "example.com/shop", Version: "(devel)"},
			Deps: []*debug.Module{dep(runtimeModule, "v0.1.0", &debug.Module{Path: "../fourlanes"})}}, Version, false},
		{"replaced by a fork's version", &debug.BuildInfo{
			Main: debug.Module{Path: "example.com/shop", Version: "(devel)"},
			Deps: []*debug.Module{dep(runtimeModule, "v0.1.0", &debug.Module{Path: "example.com/fork", Version: "v0.1.1"})}}, "v0.1.1", true},
		{"no build information", nil, Version, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := versionOf(tc.bi)
			if v.Version != tc.version || v.Recorded != tc.recorded || v.Go == "" || v.OS == "" || v.Arch == "" {
				t.Errorf("got %+v; want version %s, recorded %v, and the Go version, OS and architecture", v, tc.version, tc.recorded)
			}
			if tc.bi != nil && v.Main.Path != tc.bi.Main.Path {
				t.Errorf("main %q, want %q", v.Main.Path, tc.bi.Main.Path)
			}
		})
	}
	// runtimeModule is this module: the test binary's main module.
	if bi, ok := debug.ReadBuildInfo(); !ok || bi.Main.Path != runtimeModule {
		t.Errorf("the test binary's main module is %q; runtimeModule says %q", bi.Main.Path, runtimeModule)
	}
}

func TestVersionCommand(t *testing.T) {
	code, out, stderr := runCLI(t, "version")
	if code != ExitOK || !strings.HasPrefix(out, "fourlanes v") {
		t.Fatalf("version: exit %d, %q %q; want a line starting fourlanes v", code, out, stderr)
	}
	code, out, _ = runCLI(t, "version", "-json")
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != ExitOK || !strings.HasPrefix(v.Version, "v") || v.Go == "" || strings.Count(out, "\n") != 1 {
		t.Fatalf("version -json: exit %d, %q (%v); want one JSON line with version and go", code, out, err)
	}
	if code, _, stderr := runCLI(t, "version", "extra"); code != ExitUsage || !strings.Contains(stderr, `unexpected argument "extra"`) {
		t.Errorf("version extra: exit %d, %q; want a usage error", code, stderr)
	}
}

// fakeLambda answers Invoke as Lambda does with report, and records the
// SigV4 credential scope of each call: access key and region.
func fakeLambda(t *testing.T, report string) (endpoint string, scopes func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		_, cred, _ := strings.Cut(auth, "Credential=")
		parts := strings.Split(strings.Split(cred, ",")[0], "/") // AKID/date/region/service/aws4_request
		mu.Lock()
		if len(parts) == 5 {
			seen = append(seen, parts[0]+" "+parts[2])
		} else {
			seen = append(seen, "unsigned: "+auth)
		}
		mu.Unlock()
		if !strings.HasSuffix(r.URL.Path, "/invocations") {
			http.Error(w, "not an invocation: "+r.URL.Path, http.StatusNotFound)
			return
		}
		fmt.Fprint(w, report)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
}

// awsFiles writes a shared config and credentials file with a default
// profile and a profile "p", and points the SDK at them.
func awsFiles(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	config := "[default]\nregion = us-west-2\n\n[profile p]\nregion = eu-west-3\n"
	creds := "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s\n\n[p]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = s\n"
	for name, body := range map[string]string{"config": config, "credentials": creds} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	for _, v := range []string{"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
}

// TestProfileAndRegion: --profile and --region choose the credentials and
// region a command signs with, with the AWS CLI's precedence (a flag over
// the environment over the shared config files), given before or after the
// command name, in any of the forms the flag package reads.
func TestProfileAndRegion(t *testing.T) {
	endpoint, scopes := fakeLambda(t, `{"fixed":0,"open":0,"complete":true}`)
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string // access key and region signed with
	}{
		{"the shared config's default profile", nil, []string{"repair"}, "AKIDDEFAULT us-west-2"},
		{"$AWS_PROFILE", map[string]string{"AWS_PROFILE": "p"}, []string{"repair"}, "AKIDPROFILE eu-west-3"},
		{"the environment over the files", map[string]string{"AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "s", "AWS_REGION": "eu-central-1"},
			[]string{"repair"}, "AKIDENV eu-central-1"},
		{"--profile over credentials in the environment; $AWS_REGION over the profile's region",
			map[string]string{"AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "s", "AWS_REGION": "eu-central-1"},
			[]string{"repair", "--profile", "p"}, "AKIDPROFILE eu-central-1"},
		{"--profile over $AWS_PROFILE", map[string]string{"AWS_PROFILE": "default"}, []string{"repair", "-profile=p"}, "AKIDPROFILE eu-west-3"},
		{"--region over $AWS_REGION", map[string]string{"AWS_REGION": "eu-central-1"}, []string{"repair", "--region", "ap-south-1"}, "AKIDDEFAULT ap-south-1"},
		{"before the command name", map[string]string{"AWS_REGION": "eu-central-1"},
			[]string{"--profile", "p", "--region=sa-east-1", "repair"}, "AKIDPROFILE sa-east-1"},
		{"after the command name, the later wins", nil, []string{"--region", "sa-east-1", "repair", "--region", "ca-central-1"}, "AKIDDEFAULT ca-central-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			awsFiles(t)
			t.Setenv("AWS_ENDPOINT_URL_LAMBDA", endpoint)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, _, stderr := runCLI(t, append(tc.args, "-function", "dlq-repair")...)
			if got := scopes(); code != ExitOK || len(got) != 1 || got[0] != tc.want {
				t.Errorf("fourlanes %v: exit %d, signed as %q; want %q\n%s", tc.args, code, got, tc.want, stderr)
			}
		})
	}
}

// TestProfileAndRegionRefused: --profile and --region are usage errors
// where they would be ignored (a command that does not talk to AWS,
// -local), and an unknown flag before the command name is one too.
func TestProfileAndRegionRefused(t *testing.T) {
	t.Setenv(EnvTwinDir, t.TempDir())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--profile", "p", "verify", "f.jsonl"}, "--profile applies to the commands that talk to AWS"},
		{[]string{"--region=eu-west-1", "version"}, "version does not"},
		{[]string{"repair", "-local", "--profile", "p"}, "--profile and -local"},
		{[]string{"--region", "eu-west-1", "reconcile", "-local"}, "--region and -local"},
		{[]string{"--tenant", "t1", "reconcile"}, "only --profile and --region go there"},
		{[]string{"--profile"}, "--profile needs a value"},
		{[]string{"verify", "--profile", "p", "f.jsonl"}, "flag provided but not defined: -profile"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("fourlanes %v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, ExitUsage, tc.want)
		}
	}
}

// TestRepairJSON: repair prints dlq-repair's report indented, or with -json
// on one line; open repairs exit 3 either way.
func TestRepairJSON(t *testing.T) {
	awsFiles(t)
	endpoint, _ := fakeLambda(t, `{"fixed":1,"open":2,"complete":true,"sources":{}}`)
	t.Setenv("AWS_ENDPOINT_URL_LAMBDA", endpoint)
	code, out, stderr := runCLI(t, "repair", "-function", "dlq-repair")
	if code != ExitFinding || !strings.Contains(out, "\n  \"fixed\": 1") || !strings.Contains(stderr, "1 fixed, 2 open") {
		t.Errorf("repair: exit %d, %q %q; want exit %d and the report indented", code, out, stderr, ExitFinding)
	}
	code, out, _ = runCLI(t, "repair", "-function", "dlq-repair", "-json")
	var r struct{ Fixed, Open int }
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != ExitFinding || strings.Count(out, "\n") != 1 || r.Fixed != 1 || r.Open != 2 {
		t.Errorf("repair -json: exit %d, %q (%v); want one line with fixed 1, open 2", code, out, err)
	}
}

// devState writes a dev.json for a twin that is this process, in a folder
// of the test's own.
func devState(t *testing.T, st DevState) {
	t.Helper()
	t.Setenv(EnvTwinDir, t.TempDir())
	st.PID = os.Getpid()
	if _, err := WriteDevState(st); err != nil {
		t.Fatal(err)
	}
}

// TestEnvLocal: env -local prints, from the running twin's dev.json, the
// exports that reach it; a shell that evaluates them has each variable
// with its value, however it is quoted; -json is the same as one object.
func TestEnvLocal(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash: %v", err)
	}
	devState(t, DevState{
		StackName: "fourlanes-dev", Region: "us-east-1",
		CloudFormationEndpoint: "http://127.0.0.1:4704", LambdaEndpoint: "http://127.0.0.1:4704", ReconcileURL: "http://127.0.0.1:4705/",
		RepairFunction: "fourlanes-dev-Repair", DynamoDBEndpoint: "http://127.0.0.1:4700", SQSEndpoint: "http://127.0.0.1:4701",
		S3Endpoint: "http://127.0.0.1:4702", KMSEndpoint: "http://127.0.0.1:4703", EventsTable: "fourlanes-dev-Events",
		Outputs: map[string]string{keys.OutputStateTable: "fourlanes-dev-State", keys.OutputCheckpointBucket: "fourlanes-dev-checkpoints",
			keys.OutputCheckpointKey: "arn:aws:kms:us-east-1:000000000000:key/k1", keys.OutputDashboard: "(unresolved: no dashboards here)"},
		TableEnv: map[string]string{keys.EnvEventsTable: "fourlanes-dev-Events", "ORDERS_TABLE": "it's $HOME `x` \"q\"", "LOG_LEVEL": "debug"},
	})
	want := map[string]string{
		"AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "fourlanes", "AWS_SECRET_ACCESS_KEY": "local",
		"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:4700", "AWS_ENDPOINT_URL_DYNAMODB_STREAMS": "http://127.0.0.1:4700",
		"AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:4701", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:4702", "AWS_ENDPOINT_URL_KMS": "http://127.0.0.1:4703",
		"AWS_ENDPOINT_URL_LAMBDA": "http://127.0.0.1:4704", "AWS_ENDPOINT_URL_CLOUDFORMATION": "http://127.0.0.1:4704",
		keys.EnvEventsTable: "fourlanes-dev-Events", keys.EnvStateTable: "fourlanes-dev-State", "ORDERS_TABLE": "it's $HOME `x` \"q\"",
		keys.EnvCheckpointBucket: "fourlanes-dev-checkpoints", keys.EnvCheckpointKey: "arn:aws:kms:us-east-1:000000000000:key/k1",
		EnvReconcileURL: "http://127.0.0.1:4705/", EnvRepairFunction: "fourlanes-dev-Repair",
	}
	code, out, stderr := runCLI(t, "env", "-local")
	if code != ExitOK {
		t.Fatalf("env -local: exit %d: %s", code, stderr)
	}
	// Evaluate the exports in a shell that has none of them, and read back
	// what it then has.
	names := make([]string, 0, len(want))
	for k := range want {
		names = append(names, k)
	}
	sort.Strings(names)
	script := `eval "$(cat)"; for v in "$@"; do printf '%s=%s\0' "$v" "${!v-(unset)}"; done`
	sh := exec.Command(bash, append([]string{"-c", script, "bash"}, names...)...)
	sh.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/home/nobody"}
	sh.Stdin = strings.NewReader(out)
	got, err := sh.Output()
	if err != nil {
		t.Fatalf("bash eval of env -local's output: %v\n%s", err, out)
	}
	evaluated := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSuffix(string(got), "\x00"), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		evaluated[k] = v
	}
	if diff := cmp.Diff(want, evaluated); diff != "" {
		t.Errorf("a shell after eval \"$(fourlanes env -local)\" (-want +got):\n%s\noutput:\n%s", diff, out)
	}
	if strings.Contains(out, "LOG_LEVEL") || strings.Contains(out, "unresolved") {
		t.Errorf("env -local exports more than the endpoints and resources:\n%s", out)
	}

	code, out, _ = runCLI(t, "env", "-local", "-json")
	var asJSON map[string]string
	if err := json.Unmarshal([]byte(out), &asJSON); err != nil || code != ExitOK {
		t.Fatalf("env -local -json: exit %d, %q: %v", code, out, err)
	}
	if diff := cmp.Diff(want, asJSON); diff != "" {
		t.Errorf("env -local -json (-want +got):\n%s", diff)
	}

	if code, _, stderr := runCLI(t, "env"); code != ExitUsage || !strings.Contains(stderr, "pass -local") {
		t.Errorf("env without -local: exit %d, %q; want a usage error asking for -local", code, stderr)
	}
	t.Setenv(EnvTwinDir, t.TempDir())
	if code, _, stderr := runCLI(t, "env", "-local"); code != ExitError || !strings.Contains(stderr, "no running twin") {
		t.Errorf("env -local without a twin: exit %d, %q; want an error saying so", code, stderr)
	}
}
