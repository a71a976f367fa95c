package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/awsenv/profile"
)

// addAWSFlags adds --profile and --region to the flags of a command that
// talks to AWS. They mean what the AWS CLI's do, with its precedence: a flag
// wins over the environment ($AWS_PROFILE, $AWS_REGION, $AWS_ACCESS_KEY_ID…),
// which wins over the shared config files. Run also takes them before the
// command name (globalFlags).
func addAWSFlags(fs *flag.FlagSet) {
	fs.String("profile", "", "the AWS profile of the shared config and credentials files, as the AWS CLI's --profile: "+
		"it wins over $AWS_PROFILE and over credentials in the environment")
	fs.String("region", "", "the AWS region, as the AWS CLI's --region: it wins over $AWS_REGION and the profile's region")
}

// awsOptions are the configuration --profile and --region of fs ask for;
// none when fs has neither or neither was given.
func awsOptions(fs *flag.FlagSet) []func(*config.LoadOptions) error {
	var opts []func(*config.LoadOptions) error
	// WithSharedConfigProfile, unlike $AWS_PROFILE, also wins over
	// credentials in the environment: the AWS CLI's --profile does too.
	if p := flagValue(fs, "profile"); p != "" {
		opts = append(opts, config.WithSharedConfigProfile(p))
	}
	if r := flagValue(fs, "region"); r != "" {
		opts = append(opts, config.WithRegion(r))
	}
	return opts
}

func flagValue(fs *flag.FlagSet, name string) string {
	if f := fs.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// checkLocal refuses --profile and --region beside -local: the twin takes
// its own region and any credentials, so either flag would be ignored.
func checkLocal(fs *flag.FlagSet, local bool) error {
	if !local {
		return nil
	}
	for _, name := range []string{"profile", "region"} {
		if flagValue(fs, name) != "" {
			return fmt.Errorf("%w: --%s and -local: the twin has its own region and takes any credentials; drop one", ErrUsage, name)
		}
	}
	return nil
}

// LocalCredentials are the credentials the twin's servers accept (any
// signature; these name where they come from).
type LocalCredentials struct{}

// Retrieve returns the fixed local credentials.
func (LocalCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{AccessKeyID: localAccessKey, SecretAccessKey: localSecretKey, Source: "fourlanes dev"}, nil
}

// The twin's region and the credentials its clients use (the functions get
// the same: twin/functions.go).
const (
	localRegion    = "us-east-1"
	localAccessKey = "fourlanes"
	localSecretKey = "local"
)

// awsConfig is a command's AWS configuration: the default chain with
// --profile and --region of fs, or with local the twin's region and
// LocalCredentials (a developer's own are not needed there).
func awsConfig(ctx context.Context, fs *flag.FlagSet, local bool) (aws.Config, error) {
	if local {
		return profile.Load(ctx, config.WithRegion(localRegion), config.WithCredentialsProvider(LocalCredentials{}))
	}
	return profile.Load(ctx, awsOptions(fs)...)
}

// dynamoDB is a DynamoDB client on AWS, or on endpoint (the twin's) when it
// is set.
func dynamoDB(ctx context.Context, fs *flag.FlagSet, endpoint string) (*dynamodb.Client, error) {
	cfg, err := awsConfig(ctx, fs, endpoint != "")
	if err != nil {
		return nil, err
	}
	return awsenv.DynamoDB(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = &endpoint
		}
	}), nil
}
