// Package awsenv builds the AWS SDK configuration and clients every function
// and the CLI use, from the standard environment, so one binary runs in AWS
// and against the local twin unchanged.
//
// Endpoints come from the SDK's own variables: AWS_ENDPOINT_URL_DYNAMODB,
// AWS_ENDPOINT_URL_DYNAMODB_STREAMS, AWS_ENDPOINT_URL_SQS,
// AWS_ENDPOINT_URL_LAMBDA (or AWS_ENDPOINT_URL for all). The local twin sets
// them; in AWS they are unset. Tracing is added by pkg/tracing, the one seam
// for it. Only the DynamoDB client, which every function uses, has a
// constructor here; a function that needs another builds it from Load's
// config (sqs.NewFromConfig), so no other function links it.
package awsenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/pkg/tracing"
)

// ErrMissingEnv matches every *MissingEnvError.
var ErrMissingEnv = errors.New("missing environment variables")

// MissingEnvError names every required environment variable that is unset
// or empty.
type MissingEnvError struct{ Names []string }

func (e *MissingEnvError) Error() string {
	return fmt.Sprintf("missing environment variables %s: set them (the CDK app sets them on each function; the local twin resolves them to local resources)",
		strings.Join(e.Names, ", "))
}

// Is matches ErrMissingEnv.
func (e *MissingEnvError) Is(target error) bool { return target == ErrMissingEnv }

// Require reads the named environment variables. Call it once at cold start:
// it returns every value, or a *MissingEnvError naming each one that is unset
// or empty, so a misconfigured function fails before its first invocation
// with one message that lists everything to fix.
func Require(names ...string) (map[string]string, error) {
	vals := make(map[string]string, len(names))
	var missing []string
	for _, n := range names {
		v, ok := os.LookupEnv(n)
		if !ok || v == "" {
			missing = append(missing, n)
			continue
		}
		vals[n] = v
	}
	if len(missing) > 0 {
		return nil, &MissingEnvError{Names: missing}
	}
	return vals, nil
}

// Load returns the SDK configuration from the environment
// (config.LoadDefaultConfig: region, credentials, endpoint variables), with
// tracing added when FOURLANES_TRACING asks for it. A missing region is an
// error here rather than on the first call.
func Load(ctx context.Context, optFns ...func(*config.LoadOptions) error) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx, optFns...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS config: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("load AWS config: no region; set AWS_REGION (Lambda sets it; the local twin sets it too)")
	}
	tracing.Instrument(&cfg)
	return cfg, nil
}

// DynamoDB returns a DynamoDB client.
func DynamoDB(cfg aws.Config, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, optFns...)
}
