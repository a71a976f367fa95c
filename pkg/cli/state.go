package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// DevState is what a running 'fourlanes dev' tells the other commands
// (-local, and env -local for any process), in .cache/twin/dev.json under
// the module root.
type DevState struct {
	PID       int    `json:"pid"`
	StackName string `json:"stack_name"`
	// Region is the twin's (AWS_REGION for its clients); empty: us-east-1.
	Region string `json:"region,omitempty"`
	// CloudFormationEndpoint answers DescribeStacks for StackName: with
	// AWS_ENDPOINT_URL_CLOUDFORMATION set to it, -stack reads the twin's outputs.
	CloudFormationEndpoint string            `json:"cloudformation_endpoint"`
	ReconcileURL           string            `json:"reconcile_url"`
	RepairFunction         string            `json:"repair_function"`
	LambdaEndpoint         string            `json:"lambda_endpoint"`
	DynamoDBEndpoint       string            `json:"dynamodb_endpoint"`
	SQSEndpoint            string            `json:"sqs_endpoint"`
	S3Endpoint             string            `json:"s3_endpoint"`
	KMSEndpoint            string            `json:"kms_endpoint,omitempty"`
	EventsTable            string            `json:"events_table"`
	Outputs                map[string]string `json:"outputs"`
	// TableEnv are the environment variables naming the application's own
	// tables that the stack gives its functions (a demo workload writes them).
	TableEnv map[string]string `json:"table_env,omitempty"`
	// CheckpointLog is the log the twin's checkpoints are signed for
	// (reconcile's CHECKPOINT_LOG): what verify -origin takes.
	CheckpointLog string `json:"checkpoint_log,omitempty"`
}

// EnvTwinDir overrides where `fourlanes dev` keeps its files (binaries,
// synthesized template, logs, dev.json); default .cache/twin.
const EnvTwinDir = "FOURLANES_TWIN_DIR"

// TwinDir is where `fourlanes dev` keeps its files: $FOURLANES_TWIN_DIR, or
// .cache/twin under the module root (the nearest go.mod at or above the
// working directory).
func TwinDir() (string, error) {
	if d := os.Getenv(EnvTwinDir); d != "" {
		return filepath.Abs(d)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".cache", "twin"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod at or above the working directory: run in your module, or set $%s", EnvTwinDir)
		}
		dir = parent
	}
}

func statePath() (string, error) {
	dir, err := TwinDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "dev.json"), nil
}

// WriteDevState writes st for the other commands' -local and returns its path.
func WriteDevState(st DevState) (string, error) {
	p, err := statePath()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return "", err
	}
	return p, os.WriteFile(p, b, 0o644)
}

// RemoveDevState removes what WriteDevState wrote.
func RemoveDevState() {
	if p, err := statePath(); err == nil {
		_ = os.Remove(p)
	}
}

// readState reads the running twin's endpoints for -local.
func readState() (DevState, error) {
	var st DevState
	p, err := statePath()
	if err != nil {
		return st, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return st, fmt.Errorf("-local: no running twin (%s is missing): start one with `make dev` or `fourlanes dev`", p)
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("-local: %s: %w", p, err)
	}
	if st.PID > 0 {
		if proc, err := os.FindProcess(st.PID); err != nil || proc.Signal(syscall.Signal(0)) != nil {
			return st, fmt.Errorf("-local: the twin that wrote %s (pid %d) is not running: start one with `make dev`", p, st.PID)
		}
	}
	return st, nil
}
