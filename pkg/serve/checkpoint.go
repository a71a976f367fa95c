package serve

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/notary"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
)

// checkpointState returns the signed-checkpoint State the stack configures
// (CHECKPOINT_BUCKET, CHECKPOINT_KEY_ID, CHECKPOINT_LOG), reading the key's
// public half once at cold start: reconcile reads and verifies checkpoints,
// the notary signs them. Without any of the three (a template from before
// signed checkpoints) it keeps the state table's unsigned row, and says so.
func checkpointState(ctx context.Context, cfg aws.Config, walks *reconcile.DynamoState, log *slog.Logger) (reconcile.State, error) {
	if os.Getenv(keys.EnvCheckpointBucket) == "" && os.Getenv(keys.EnvCheckpointKey) == "" && os.Getenv(keys.EnvCheckpointLog) == "" {
		log.WarnContext(ctx, "no checkpoint bucket and key configured: checkpoints are the state table's unsigned rows")
		return walks, nil
	}
	st, _, err := signedState(ctx, cfg, walks, log)
	return st, err
}

// signedState reads the checkpoint environment and returns the verifying
// State, and the key's signer (only the notary's role may use it).
func signedState(ctx context.Context, cfg aws.Config, walks reconcile.State, log *slog.Logger) (*reconcile.SignedState, notary.KMSSigner, error) {
	env, err := awsenv.Require(keys.EnvCheckpointBucket, keys.EnvCheckpointKey, keys.EnvCheckpointLog)
	if err != nil {
		return nil, notary.KMSSigner{}, err
	}
	signer := notary.KMSSigner{KMS: kms.NewFromConfig(cfg), KeyID: env[keys.EnvCheckpointKey]}
	pub, err := signer.PublicKey(ctx)
	if err != nil {
		return nil, notary.KMSSigner{}, err
	}
	return &reconcile.SignedState{
		Walks:  walks,
		S3:     checkpointS3(cfg),
		Bucket: env[keys.EnvCheckpointBucket],
		Log:    env[keys.EnvCheckpointLog],
		Public: pub,
		Logger: log,
	}, signer, nil
}

func checkpointS3(cfg aws.Config) *s3.Client {
	// A local endpoint (the twin) serves buckets by path, not by host name.
	pathStyle := os.Getenv("AWS_ENDPOINT_URL_S3") != ""
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = pathStyle })
}

// seeds adapts SignedState to notary.Seeds.
type seeds struct{ s *reconcile.SignedState }

func (s seeds) Latest(ctx context.Context, chainName string) (int64, string, bool, error) {
	return s.s.LatestSeq(ctx, chainName)
}
