// Package profile builds the CLI's AWS SDK configuration with the SDK's
// default chain (config.LoadDefaultConfig: the environment, the shared
// config and credentials files and their profiles, SSO, web identity), the
// tracing seam added as for the functions. The functions use awsenv.Load,
// which reads only the environment and links none of the chain's clients.
package profile

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/fourlanes/fourlanes/pkg/tracing"
)

// Load returns config.LoadDefaultConfig's configuration with optFns
// (--profile, --region), with tracing added when FOURLANES_TRACING asks for
// it. A missing region is an error here rather than on the first call.
func Load(ctx context.Context, optFns ...func(*config.LoadOptions) error) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx, optFns...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS config: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("load AWS config: no region; set AWS_REGION or --region, or a profile's region")
	}
	tracing.Instrument(&cfg)
	return cfg, nil
}
