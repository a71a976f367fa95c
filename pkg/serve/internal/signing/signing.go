// Package signing builds what reconcile and the notary share about signed
// checkpoints: the verifying State (reconcile), and the bucket, log name,
// public key and KMS signer (the notary, the only signer).
package signing

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fourlanes/fourlanes/pkg/awsenv"
	"github.com/fourlanes/fourlanes/pkg/checkpoint"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/notary"
	"github.com/fourlanes/fourlanes/pkg/obs"
	rec "github.com/fourlanes/fourlanes/pkg/reconcile"
)

// State returns the signed-checkpoint State the stack configures
// (CHECKPOINT_BUCKET, CHECKPOINT_KEY_ID, CHECKPOINT_LOG), reading the key's
// public half once, in the background from cold start (Signed): reconcile
// reads and verifies checkpoints,
// the notary signs them. Without any of the three (a template from before
// signed checkpoints) it keeps the state table's unsigned row, and says so.
func State(ctx context.Context, cfg aws.Config, walks *rec.DynamoState, log *slog.Logger) (rec.State, error) {
	if os.Getenv(keys.EnvCheckpointBucket) == "" && os.Getenv(keys.EnvCheckpointKey) == "" && os.Getenv(keys.EnvCheckpointLog) == "" {
		log.WarnContext(ctx, "no checkpoint bucket and key configured: checkpoints are the state table's unsigned rows")
		return walks, nil
	}
	st, _, err := Signed(ctx, cfg, walks, log)
	return st, err
}

// Signed reads the checkpoint environment and returns the verifying
// State, and the key's signer (only the notary's role may use it). The
// key's public half (kms:GetPublicKey) is read in the background from now
// (State.Key, a checkpoint.PrefetchedKey): the KMS round trip overlaps the
// rest of the cold start and the runtime's first /next instead of preceding
// them. A failed read is logged at ERROR and tried again when a checkpoint
// is first signed or verified; that invocation fails naming the key if it
// fails again.
func Signed(ctx context.Context, cfg aws.Config, walks rec.State, log *slog.Logger) (*rec.SignedState, notary.KMSSigner, error) {
	env, err := awsenv.Require(keys.EnvCheckpointBucket, keys.EnvCheckpointKey, keys.EnvCheckpointLog)
	if err != nil {
		return nil, notary.KMSSigner{}, err
	}
	signer := notary.KMSSigner{KMS: kms.NewFromConfig(cfg), KeyID: env[keys.EnvCheckpointKey]}
	pub := checkpoint.Prefetch(ctx, signer.PublicKey, func(err error) {
		log.ErrorContext(ctx, "checkpoint signing key's public half not read at cold start; read again when first needed",
			slog.String(obs.KeyKey, signer.KeyID), obs.Err(err))
	})
	return &rec.SignedState{
		Walks:  walks,
		S3:     S3(cfg),
		Bucket: env[keys.EnvCheckpointBucket],
		Log:    env[keys.EnvCheckpointLog],
		Key:    pub.Get,
		Logger: log,
	}, signer, nil
}

// S3 is the checkpoint bucket's client.
func S3(cfg aws.Config) *s3.Client {
	// A local endpoint (the twin) serves buckets by path, not by host name.
	pathStyle := os.Getenv("AWS_ENDPOINT_URL_S3") != ""
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = pathStyle })
}

// Seeds adapts a SignedState to notary.Seeds: a chain the notary has no
// row for starts from its newest signed checkpoint.
type Seeds struct{ S *rec.SignedState }

func (s Seeds) Latest(ctx context.Context, chainName string) (int64, string, bool, error) {
	return s.S.LatestSeq(ctx, chainName)
}
