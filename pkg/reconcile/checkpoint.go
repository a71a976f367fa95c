package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/fourlanes/fourlanes/pkg/checkpoint"
	"github.com/fourlanes/fourlanes/pkg/keys"
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// KMSAPI is the part of the KMS API a KMSSigner uses.
type KMSAPI interface {
	Sign(ctx context.Context, in *kms.SignInput, optFns ...func(*kms.Options)) (*kms.SignOutput, error)
	GetPublicKey(ctx context.Context, in *kms.GetPublicKeyInput, optFns ...func(*kms.Options)) (*kms.GetPublicKeyOutput, error)
}

// KMSSigner signs checkpoint digests with a KMS asymmetric key
// (ECC_NIST_P256, ECDSA_SHA_256): the private key never leaves KMS.
type KMSSigner struct {
	KMS   KMSAPI
	KeyID string
}

var _ checkpoint.DigestSigner = KMSSigner{}

// SignDigest signs a SHA-256 digest (kms:Sign, MessageType DIGEST).
func (k KMSSigner) SignDigest(ctx context.Context, digest []byte) ([]byte, error) {
	out, err := k.KMS.Sign(ctx, &kms.SignInput{KeyId: aws.String(k.KeyID), Message: digest,
		MessageType: kmstypes.MessageTypeDigest, SigningAlgorithm: kmstypes.SigningAlgorithmSpecEcdsaSha256})
	if err != nil {
		return nil, fmt.Errorf("kms sign with key %s: %w", k.KeyID, err)
	}
	return out.Signature, nil
}

// PublicKey reads the key's public half (kms:GetPublicKey: DER
// SubjectPublicKeyInfo).
func (k KMSSigner) PublicKey(ctx context.Context) (*checkpoint.PublicKey, error) {
	out, err := k.KMS.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(k.KeyID)})
	if err != nil {
		return nil, fmt.Errorf("kms public key of %s: %w", k.KeyID, err)
	}
	return checkpoint.ParsePublicKey(out.PublicKey)
}

// CheckpointS3 is the part of the S3 API SignedState uses; reconcile's role
// is granted exactly these three actions on the checkpoint bucket.
type CheckpointS3 interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

// SignedState is a State whose checkpoints are signed notes (pkg/checkpoint)
// in an S3 bucket with Object Lock: reconcile trusts nothing else. The
// state table's checkpoint row is neither read nor written; walk rows stay
// in Walks.
type SignedState struct {
	Walks  State // keeps walk rows (SaveWalk, Walk); its checkpoints are ignored
	S3     CheckpointS3
	Bucket string
	Log    string // the key name, fourlanes/<stack>
	Signer checkpoint.DigestSigner
	Public *checkpoint.PublicKey
	Now    func() time.Time
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

// AdvanceCheckpoint signs cp and writes it, once: the put is conditional
// (If-None-Match: *), and the bucket's default retention locks it. A
// checkpoint already there with the same hash (a concurrent walk signed the
// same seq) is success; one with another hash is an error, never replaced.
func (s *SignedState) AdvanceCheckpoint(ctx context.Context, tenant string, cp Checkpoint) error {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	c := checkpoint.Checkpoint{Log: s.Log, Tenant: tenant, Seq: cp.Seq, Hash: cp.Hash, Time: now().UTC()}
	msg, err := checkpoint.Sign(ctx, c, s.Public, s.Signer)
	if err != nil {
		return fmt.Errorf("checkpoint of tenant %q at seq %d: %w", tenant, cp.Seq, err)
	}
	key := CheckpointKey(tenant, cp.Seq)
	_, err = s.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key),
		Body: bytes.NewReader(msg), IfNoneMatch: aws.String("*"), ContentType: aws.String("text/plain; charset=utf-8")})
	var ae smithy.APIError
	if errors.As(err, &ae) && (ae.ErrorCode() == "PreconditionFailed" || ae.ErrorCode() == "ConditionalRequestConflict") {
		have, _, rerr := s.read(ctx, tenant, key)
		if rerr != nil {
			return fmt.Errorf("checkpoint %s exists and does not verify: %w", key, rerr)
		}
		if have.Hash != cp.Hash {
			return fmt.Errorf("checkpoint %s already states hash %s at seq %d, not %s: the log changed under a signed checkpoint", key, have.Hash, cp.Seq, cp.Hash)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("write checkpoint %s: %w", key, err)
	}
	s.logger().InfoContext(ctx, "checkpoint signed", slog.Int64(obs.KeySeq, cp.Seq), slog.String("hash", cp.Hash),
		slog.String("bucket", s.Bucket), slog.String("key", key))
	return nil
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
