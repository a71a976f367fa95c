package awsenv_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tracing"
)

// isolate keeps a developer's AWS profile out of the test.
func isolate(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv(keys.EnvTracing, "")
}

func TestRequire(t *testing.T) {
	t.Setenv("FOURLANES_TEST_A", "a")
	t.Setenv("FOURLANES_TEST_EMPTY", "")
	vals, err := awsenv.Require("FOURLANES_TEST_A")
	if err != nil || vals["FOURLANES_TEST_A"] != "a" {
		t.Fatalf("Require(set): got %v, %v; want a", vals, err)
	}
	_, err = awsenv.Require("FOURLANES_TEST_A", "FOURLANES_TEST_EMPTY", "FOURLANES_TEST_UNSET")
	var me *awsenv.MissingEnvError
	if !errors.As(err, &me) || !errors.Is(err, awsenv.ErrMissingEnv) {
		t.Fatalf("Require(missing): got %v, want *MissingEnvError", err)
	}
	if got, want := me.Names, []string{"FOURLANES_TEST_EMPTY", "FOURLANES_TEST_UNSET"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("missing names: got %v, want %v", got, want)
	}
}

func TestLoadEndpoints(t *testing.T) {
	for _, tc := range []struct {
		name, dynamo, streams, sqs string
	}{
		{"local twin", "http://127.0.0.1:8000", "http://127.0.0.1:8000", "http://localhost:9324"},
		{"localhost", "http://localhost:8000", "", ""},
		{"ipv6 loopback", "http://[::1]:8000", "", ""},
		{"aws", "", "", ""},
		{"remote endpoint", "https://dynamodb.eu-west-1.amazonaws.com", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", tc.dynamo)
			t.Setenv("AWS_ENDPOINT_URL_DYNAMODB_STREAMS", tc.streams)
			t.Setenv("AWS_ENDPOINT_URL_SQS", tc.sqs)
			cfg, err := awsenv.Load(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Region != "eu-west-1" {
				t.Errorf("region: got %q, want eu-west-1", cfg.Region)
			}
			db := awsenv.DynamoDB(cfg).Options()
			if got := aws.ToString(db.BaseEndpoint); got != tc.dynamo {
				t.Errorf("DynamoDB endpoint: got %q, want %q", got, tc.dynamo)
			}
			// The twin's DynamoDB sends x-amz-crc32 on every response, as AWS does:
			// the SDK checks it everywhere.
			if db.DisableValidateResponseChecksum {
				t.Error("DisableValidateResponseChecksum: got true, want false")
			}
			if got := aws.ToString(dynamodbstreams.NewFromConfig(cfg).Options().BaseEndpoint); got != tc.streams {
				t.Errorf("Streams endpoint: got %q, want %q", got, tc.streams)
			}
			if got := aws.ToString(sqs.NewFromConfig(cfg).Options().BaseEndpoint); got != tc.sqs {
				t.Errorf("SQS endpoint: got %q, want %q", got, tc.sqs)
			}
		})
	}
}

func TestLoadTracing(t *testing.T) {
	isolate(t)
	cfg, err := awsenv.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	base := len(cfg.APIOptions)
	t.Setenv(keys.EnvTracing, tracing.ModeOTel)
	t.Setenv(keys.EnvOTLPTracesEndpoint, "http://127.0.0.1:4318/v1/traces")
	cfg, err = awsenv.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !tracing.Available {
		if len(cfg.APIOptions) != base {
			t.Errorf("notrace build: got %d API options, want %d", len(cfg.APIOptions), base)
		}
		return
	}
	if len(cfg.APIOptions) <= base {
		t.Errorf("FOURLANES_TRACING=otel with an endpoint: got %d API options, want more than %d", len(cfg.APIOptions), base)
	}
}

func TestLoadWithoutRegion(t *testing.T) {
	isolate(t)
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	if _, err := awsenv.Load(t.Context()); err == nil {
		t.Error("Load without a region: got nil error, want one naming AWS_REGION")
	}
}
