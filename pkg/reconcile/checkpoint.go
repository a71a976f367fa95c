package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fourlanes/fourlanes/pkg/checkpoint"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// CheckpointS3 is the part of the S3 API SignedState uses; reconcile's role
// is granted exactly these two actions on the checkpoint bucket (it reads;
// the notary alone writes).
type CheckpointS3 interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

// SignedState is a State whose checkpoints are signed notes (pkg/checkpoint)
// in an S3 bucket with Object Lock, signed by the notary (pkg/notary) from
// what it saw appended on the events stream: reconcile trusts nothing else,
// and never signs. The state table's checkpoint row is neither read nor
// written; walk rows stay in Walks.
type SignedState struct {
	Walks  State // keeps walk rows (SaveWalk, Walk); its checkpoints are ignored
	S3     CheckpointS3
	Bucket string
	Log    string // the key name, fourlanes/<stack>
	Public *checkpoint.PublicKey
	Logger *slog.Logger
	// Metrics counts checkpoint objects that do not verify.
	Metrics *obs.Metrics
}

var _ State = (*SignedState)(nil)

// CheckpointKey is the object key of tenant's checkpoint at seq
// (checkpoint.ObjectKey).
func CheckpointKey(tenant string, seq int64) string { return checkpoint.ObjectKey(tenant, seq) }

// CheckpointPrefix is the key prefix of tenant's checkpoint objects.
func CheckpointPrefix(tenant string) string { return checkpoint.ObjectPrefix(tenant) }

// CheckpointSeqOfKey reads the seq a checkpoint object key names.
func CheckpointSeqOfKey(key string) (int64, bool) { return checkpoint.SeqOfObjectKey(key) }

func tenantPrefix(tenant string) string { return checkpoint.ObjectPrefix(tenant) }

// Latest returns the tenant's newest checkpoint object that verifies, its
// note, or nil. Objects that do not verify are logged, counted and passed
// over: only a signature makes a checkpoint.
func (s *SignedState) Latest(ctx context.Context, tenant string) (*checkpoint.Checkpoint, []byte, error) {
	var token *string
	for {
		out, err := s.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s.Bucket),
			Prefix: aws.String(tenantPrefix(tenant)), ContinuationToken: token, MaxKeys: aws.Int32(16)})
		if err != nil {
			return nil, nil, fmt.Errorf("list checkpoints of tenant %q: %w", tenant, err)
		}
		for _, o := range out.Contents {
			key := aws.ToString(o.Key)
			cp, msg, err := s.read(ctx, tenant, key)
			if err != nil {
				if errors.Is(err, checkpoint.ErrInvalid) {
					// One dimension, as every EMF metric of the stack has: a
					// directive with no dimension set is not one to rely on.
					s.Metrics.Count(keys.MetricCheckpointInvalid, 1, "Log", s.Log)
					s.logger().ErrorContext(ctx, "checkpoint object does not verify; passed over",
						slog.String("bucket", s.Bucket), slog.String("key", key), slog.String(obs.KeyErr, err.Error()))
					continue
				}
				return nil, nil, err
			}
			return cp, msg, nil
		}
		if !aws.ToBool(out.IsTruncated) {
			return nil, nil, nil
		}
		token = out.NextContinuationToken
	}
}

func (s *SignedState) read(ctx context.Context, tenant, key string) (*checkpoint.Checkpoint, []byte, error) {
	out, err := s.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key)})
	if err != nil {
		return nil, nil, fmt.Errorf("read checkpoint %s: %w", key, err)
	}
	defer out.Body.Close()
	msg, err := io.ReadAll(io.LimitReader(out.Body, 64<<10))
	if err != nil {
		return nil, nil, fmt.Errorf("read checkpoint %s: %w", key, err)
	}
	cp, err := checkpoint.Open(msg, s.Log, s.Public)
	if err != nil {
		return nil, nil, err
	}
	if cp.Tenant != tenant || CheckpointKey(tenant, cp.Seq) != key {
		return nil, nil, fmt.Errorf("%w: object %s states tenant %q seq %d", checkpoint.ErrInvalid, key, cp.Tenant, cp.Seq)
	}
	return &cp, msg, nil
}

// Checkpoint returns the tenant's newest signed checkpoint, or nil.
func (s *SignedState) Checkpoint(ctx context.Context, tenant string) (*Checkpoint, error) {
	cp, _, err := s.Latest(ctx, tenant)
	if err != nil || cp == nil {
		return nil, err
	}
	return &Checkpoint{Seq: cp.Seq, Hash: cp.Hash}, nil
}

// AdvanceCheckpoint does nothing: the notary alone signs checkpoints, of
// what it saw appended; a walk of the table, which a writer's role can
// rewrite consistently, never does.
func (s *SignedState) AdvanceCheckpoint(context.Context, string, Checkpoint) error { return nil }

// Notarized reports that a walk never moves these checkpoints.
func (s *SignedState) Notarized() bool { return true }

// LatestSeq is the newest verified checkpoint's seq and hash, for the notary
// to start a chain from when it is added to a live stack (notary.Seeds).
func (s *SignedState) LatestSeq(ctx context.Context, chainName string) (int64, string, bool, error) {
	cp, _, err := s.Latest(ctx, chainName)
	if err != nil || cp == nil {
		return 0, "", false, err
	}
	return cp.Seq, cp.Hash, true, nil
}

// SaveWalk keeps walk rows in Walks.
func (s *SignedState) SaveWalk(ctx context.Context, w Walk) error { return s.Walks.SaveWalk(ctx, w) }

// Walk reads walk rows from Walks.
func (s *SignedState) Walk(ctx context.Context, tenant, id string) (*Walk, error) {
	return s.Walks.Walk(ctx, tenant, id)
}

func (s *SignedState) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}
