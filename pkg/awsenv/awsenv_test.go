package awsenv_test

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/tracing"
)

// isolate keeps a developer's AWS settings out of the test.
func isolate(t *testing.T) {
	t.Helper()
	for _, n := range awsenv.Ignored {
		t.Setenv(n, "")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "")
	t.Setenv("AWS_CA_BUNDLE", "")
	t.Setenv("AWS_MAX_ATTEMPTS", "")
	t.Setenv("AWS_RETRY_MODE", "")
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
	if _, err := awsenv.Load(t.Context()); err == nil || !strings.Contains(err.Error(), "AWS_REGION") {
		t.Errorf("Load without a region: got %v, want an error naming AWS_REGION", err)
	}
	t.Setenv("AWS_DEFAULT_REGION", "eu-central-1")
	if cfg, err := awsenv.Load(t.Context()); err != nil || cfg.Region != "eu-central-1" {
		t.Errorf("Load with AWS_DEFAULT_REGION only: got %q, %v; want eu-central-1", cfg.Region, err)
	}
}

func TestLoadGlobalEndpoint(t *testing.T) {
	isolate(t)
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "")
	t.Setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:9324")
	cfg, err := awsenv.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(awsenv.DynamoDB(cfg).Options().BaseEndpoint); got != "http://127.0.0.1:4566" {
		t.Errorf("DynamoDB endpoint with AWS_ENDPOINT_URL only: got %q, want http://127.0.0.1:4566", got)
	}
	if got := aws.ToString(sqs.NewFromConfig(cfg).Options().BaseEndpoint); got != "http://127.0.0.1:9324" {
		t.Errorf("SQS endpoint: AWS_ENDPOINT_URL_SQS should win over AWS_ENDPOINT_URL, got %q", got)
	}
	t.Setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
	if cfg, err = awsenv.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(sqs.NewFromConfig(cfg).Options().BaseEndpoint); got != "" {
		t.Errorf("SQS endpoint with AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true: got %q, want none", got)
	}
	if got := aws.ToString(awsenv.DynamoDB(cfg).Options().BaseEndpoint); got != "" {
		t.Errorf("DynamoDB endpoint with AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true: got %q, want none", got)
	}
	t.Setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "yes")
	if _, err := awsenv.Load(t.Context()); err == nil || !strings.Contains(err.Error(), "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS") {
		t.Errorf("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=yes: got %v, want an error naming it", err)
	}
}

func TestLoadEnvCredentials(t *testing.T) {
	isolate(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDLAMBDA")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_SESSION_TOKEN", "token")
	cfg, err := awsenv.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfg.Credentials.Retrieve(t.Context())
	if err != nil || c.AccessKeyID != "AKIDLAMBDA" || c.SecretAccessKey != "secret" || c.SessionToken != "token" {
		t.Errorf("credentials: got %+v, %v; want the environment's", c, err)
	}
}

func TestLoadWithoutCredentials(t *testing.T) {
	isolate(t)
	for _, n := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY", "AWS_SECRET_KEY",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(n, "")
	}
	if _, err := awsenv.Load(t.Context()); err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("Load without credentials: got %v, want an error naming AWS_ACCESS_KEY_ID", err)
	}
}

func TestLoadContainerCredentials(t *testing.T) {
	isolate(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "")
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		_, _ = fmt.Fprintf(w, `{"AccessKeyId":"AKIDCONTAINER","SecretAccessKey":"s","Token":"t","Expiration":%q}`,
			time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	}))
	defer srv.Close()
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", srv.URL+"/creds")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("from-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "from-env")
	t.Setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", tokenFile)
	cfg, err := awsenv.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfg.Credentials.Retrieve(t.Context())
	if err != nil || c.AccessKeyID != "AKIDCONTAINER" || c.SessionToken != "t" {
		t.Fatalf("container credentials: got %+v, %v; want AKIDCONTAINER", c, err)
	}
	if auth != "from-file" {
		t.Errorf("Authorization header: got %q, want the token file's", auth)
	}
	// Over http, only loopback and the container agents' addresses.
	t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://192.0.2.1/creds")
	if _, err := awsenv.Load(t.Context()); err == nil || !strings.Contains(err.Error(), "AWS_CONTAINER_CREDENTIALS_FULL_URI") {
		t.Errorf("http credentials endpoint off loopback: got %v, want an error naming AWS_CONTAINER_CREDENTIALS_FULL_URI", err)
	}
}

// TestLoadWarnsOfIgnored: an SDK setting functions do not read is named in
// a WARN line, not silently dropped.
func TestLoadWarnsOfIgnored(t *testing.T) {
	isolate(t)
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	if _, err := awsenv.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Errorf("none of the ignored settings set: got %s, want no log line", buf.String())
	}
	t.Setenv("AWS_PROFILE", "dev")
	t.Setenv("AWS_USE_FIPS_ENDPOINT", "true")
	if _, err := awsenv.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); !strings.Contains(got, `"level":"WARN"`) || !strings.Contains(got, `"env":"AWS_PROFILE,AWS_USE_FIPS_ENDPOINT"`) {
		t.Errorf("AWS_PROFILE and AWS_USE_FIPS_ENDPOINT set: got %s, want a WARN naming both", got)
	}
}

func TestLoadBadSettings(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"AWS_MAX_ATTEMPTS", "0"},
		{"AWS_MAX_ATTEMPTS", "many"},
		{"AWS_RETRY_MODE", "eager"},
		{"AWS_CA_BUNDLE", filepath.Join(t.TempDir(), "absent.pem")},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			isolate(t)
			t.Setenv(tc.name, tc.value)
			if _, err := awsenv.Load(t.Context()); err == nil || !strings.Contains(err.Error(), tc.name) {
				t.Errorf("got %v, want an error naming %s", err, tc.name)
			}
		})
	}
	isolate(t)
	t.Setenv("AWS_MAX_ATTEMPTS", "5")
	t.Setenv("AWS_RETRY_MODE", "adaptive")
	cfg, err := awsenv.Load(t.Context())
	if err != nil || cfg.RetryMaxAttempts != 5 || cfg.RetryMode != aws.RetryModeAdaptive {
		t.Errorf("retry settings: got %d %q, %v; want 5 adaptive", cfg.RetryMaxAttempts, cfg.RetryMode, err)
	}
}

// TestLoadCABundle: AWS_CA_BUNDLE is trusted for TLS, as the SDK trusts
// it: a call to a server whose certificate only the bundle vouches for
// succeeds with it and fails without it; a bundle without a certificate
// stops Load, naming the variable.
func TestLoadCABundle(t *testing.T) {
	isolate(t)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		fmt.Fprint(w, `{"StreamDescription":{"StreamArn":"arn","StreamStatus":"ENABLED","Shards":[]}}`)
	}))
	defer srv.Close()
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB_STREAMS", srv.URL)
	t.Setenv("AWS_MAX_ATTEMPTS", "1")
	describe := func() error {
		t.Helper()
		cfg, err := awsenv.Load(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		_, err = dynamodbstreams.NewFromConfig(cfg).DescribeStream(t.Context(), &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String("arn")})
		return err
	}
	if err := describe(); err == nil {
		t.Fatal("without AWS_CA_BUNDLE: a call to a server of an unknown CA succeeded; the test proves nothing")
	}
	t.Setenv("AWS_CA_BUNDLE", bundle)
	if err := describe(); err != nil {
		t.Errorf("with AWS_CA_BUNDLE naming the server's certificate: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CA_BUNDLE", empty)
	if _, err := awsenv.Load(t.Context()); err == nil || !strings.Contains(err.Error(), "AWS_CA_BUNDLE") {
		t.Errorf("a bundle without a certificate: %v, want an error naming AWS_CA_BUNDLE", err)
	}
}
