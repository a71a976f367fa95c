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
// is granted exactly these on the checkpoint bucket: s3:GetObject and
// s3:GetObjectVersion, s3:ListBucketVersions (it reads; the notary alone
// writes).
//
// It lists object versions, not objects: a delete marker hides a key from
// ListObjectsV2 but not its versions, which Object Lock keeps. Reading the
// versions, a newer checkpoint hidden by a delete marker is still found,
// so a rollback of the log below it is still caught.
type CheckpointS3 interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	ListObjectVersions(ctx context.Context, in *s3.ListObjectVersionsInput, optFns ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error)
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
	// Key, when Public is nil, returns the public key (a
	// checkpoint.PrefetchedKey's Get): read when a checkpoint is first
	// verified.
	Key    func(context.Context) (*checkpoint.PublicKey, error)
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

// Latest returns the tenant's newest checkpoint object version that
// verifies, its note, or nil. Versions that do not verify are logged,
// counted and passed over: only a signature makes a checkpoint. A delete
// marker over a checkpoint (which the bucket policy denies to everyone) is
// logged and counted too, and the versions under it are read as if it were
// not there.
func (s *SignedState) Latest(ctx context.Context, tenant string) (*checkpoint.Checkpoint, []byte, error) {
	cp, msg, _, err := s.latest(ctx, tenant)
	return cp, msg, err
}

// latest is Latest, with the objects it passed over as findings.
func (s *SignedState) latest(ctx context.Context, tenant string) (*checkpoint.Checkpoint, []byte, []Finding, error) {
	var passed []Finding
	var keyMarker, versionMarker *string
	for {
		out, err := s.S3.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(s.Bucket),
			Prefix: aws.String(tenantPrefix(tenant)), KeyMarker: keyMarker, VersionIdMarker: versionMarker, MaxKeys: aws.Int32(16)})
		if err != nil {
			return nil, nil, passed, fmt.Errorf("list checkpoint versions of tenant %q: %w", tenant, err)
		}
		for _, d := range out.DeleteMarkers {
			s.Metrics.Count(keys.MetricCheckpointInvalid, 1, "Log", s.Log)
			s.logger().ErrorContext(ctx, "delete marker over a checkpoint; its versions are still read",
				slog.String(obs.KeyBucket, s.Bucket), slog.String(obs.KeyKey, aws.ToString(d.Key)), slog.String(obs.KeyVersion, aws.ToString(d.VersionId)))
		}
		// S3 lists versions by key (ascending: the newest checkpoint's key
		// first, as the seq is inverted), each key's newest version first.
		for _, o := range out.Versions {
			key := aws.ToString(o.Key)
			cp, msg, err := s.read(ctx, tenant, key, o.VersionId)
			if err != nil {
				if errors.Is(err, checkpoint.ErrInvalid) {
					s.invalid(ctx, key, err)
					passed = append(passed, Finding{Kind: FindingCheckpointInvalid, Key: key, Reason: err.Error()})
					continue
				}
				return nil, nil, passed, err
			}
			return cp, msg, passed, nil
		}
		if !aws.ToBool(out.IsTruncated) {
			return nil, nil, passed, nil
		}
		keyMarker, versionMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
}

// read reads one checkpoint object: version, or the current one when nil.
func (s *SignedState) read(ctx context.Context, tenant, key string, version *string) (*checkpoint.Checkpoint, []byte, error) {
	out, err := s.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key), VersionId: version})
	if err != nil {
		return nil, nil, fmt.Errorf("read checkpoint %s: %w", key, err)
	}
	defer out.Body.Close()
	msg, err := io.ReadAll(io.LimitReader(out.Body, 64<<10))
	if err != nil {
		return nil, nil, fmt.Errorf("read checkpoint %s: %w", key, err)
	}
	pub := s.Public
	if pub == nil && s.Key != nil {
		if pub, err = s.Key(ctx); err != nil {
			return nil, nil, fmt.Errorf("verify checkpoint %s: %w", key, err)
		}
	}
	cp, err := checkpoint.Open(msg, s.Log, pub)
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
	cp, _, err := s.CheckpointFindings(ctx, tenant)
	return cp, err
}

// CheckpointFindings is Checkpoint, with a CheckpointInvalid finding for
// each newer object it passed over because it does not verify.
func (s *SignedState) CheckpointFindings(ctx context.Context, tenant string) (*Checkpoint, []Finding, error) {
	cp, _, passed, err := s.latest(ctx, tenant)
	if err != nil || cp == nil {
		return nil, passed, err
	}
	return &Checkpoint{Seq: cp.Seq, Hash: cp.Hash}, passed, nil
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

// InvalidCheckpointError reports that the object at the key a checkpoint is
// to be written at is already there and does not verify (unsigned, signed by
// another key, or for another tenant or seq), so the checkpoint was not
// written. It wraps the reason, which matches checkpoint.ErrInvalid. A walk
// reports it as a CheckpointInvalid finding, never as a failed call.
type InvalidCheckpointError struct {
	Key string
	Err error
}

func (e *InvalidCheckpointError) Error() string {
	return "checkpoint object " + e.Key + " does not verify; the checkpoint at its seq is not signed: " + e.Err.Error()
}

// Unwrap returns the reason the object does not verify.
func (e *InvalidCheckpointError) Unwrap() error { return e.Err }

// invalid logs and counts a checkpoint object that does not verify.
func (s *SignedState) invalid(ctx context.Context, key string, err error) {
	// One dimension, as every EMF metric of the stack has: a directive with
	// no dimension set is not one to rely on.
	s.Metrics.Count(keys.MetricCheckpointInvalid, 1, "Log", s.Log)
	s.logger().ErrorContext(ctx, "checkpoint object does not verify; passed over",
		slog.String(obs.KeyBucket, s.Bucket), slog.String(obs.KeyKey, key), obs.Err(err))
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
