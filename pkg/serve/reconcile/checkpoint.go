package reconcile

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/keys"
	rec "github.com/fourlanes/fourlanes/pkg/reconcile"
)

// checkpointState returns the signed-checkpoint State the stack configures
// (CHECKPOINT_BUCKET, CHECKPOINT_KEY_ID, CHECKPOINT_LOG), reading the key's
// public half once at cold start. Without any of the three (a template from
// before signed checkpoints) it keeps the state table's unsigned row, and
// says so.
func checkpointState(ctx context.Context, cfg aws.Config, walks *rec.DynamoState, log *slog.Logger) (rec.State, error) {
	if os.Getenv(keys.EnvCheckpointBucket) == "" && os.Getenv(keys.EnvCheckpointKey) == "" && os.Getenv(keys.EnvCheckpointLog) == "" {
		log.WarnContext(ctx, "no checkpoint bucket and key configured: checkpoints are the state table's unsigned rows")
		return walks, nil
	}
	env, err := awsenv.Require(keys.EnvCheckpointBucket, keys.EnvCheckpointKey, keys.EnvCheckpointLog)
	if err != nil {
		return nil, err
	}
	signer := rec.KMSSigner{KMS: kms.NewFromConfig(cfg), KeyID: env[keys.EnvCheckpointKey]}
	pub, err := signer.PublicKey(ctx)
	if err != nil {
		return nil, err
	}
	// A local endpoint (the twin) serves buckets by path, not by host name.
	pathStyle := os.Getenv("AWS_ENDPOINT_URL_S3") != ""
	return &rec.SignedState{
		Walks:  walks,
		S3:     s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = pathStyle }),
		Bucket: env[keys.EnvCheckpointBucket],
		Log:    env[keys.EnvCheckpointLog],
		Signer: signer,
		Public: pub,
		Logger: log,
	}, nil
}
