package notary

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
	"github.com/fourlanes/fourlanes/pkg/obs"
)

// KMSAPI is the part of the KMS API a KMSSigner uses.
type KMSAPI interface {
	Sign(ctx context.Context, in *kms.SignInput, optFns ...func(*kms.Options)) (*kms.SignOutput, error)
	GetPublicKey(ctx context.Context, in *kms.GetPublicKeyInput, optFns ...func(*kms.Options)) (*kms.GetPublicKeyOutput, error)
}

// KMSSigner signs checkpoint digests with a KMS asymmetric key
// (ECC_NIST_P256, ECDSA_SHA_256): the private key never leaves KMS, and the
// key policy lets only the notary's role sign.
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

// CheckpointS3 is the part of the S3 API Checkpoints uses: the notary's role
// is granted s3:PutObject and s3:GetObject on the checkpoint objects.
type CheckpointS3 interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// Checkpoints signs checkpoints and writes them to the Object Lock bucket.
type Checkpoints struct {
	S3     CheckpointS3
	Bucket string
	Log    string // the key name, fourlanes/<stack>
	Signer checkpoint.DigestSigner
	Public *checkpoint.PublicKey
	// Key, when Public is nil, returns the public key (a
	// checkpoint.PrefetchedKey's Get): read when a checkpoint is first
	// signed or read.
	Key    func(context.Context) (*checkpoint.PublicKey, error)
	Now    func() time.Time
	Logger *slog.Logger
}

var _ Signer = (*Checkpoints)(nil)

// ErrOccupied: the checkpoint's key already holds another object (the
// bucket's Object Lock keeps it). The notary reports it and signs the
// chain's next advance under its own key.
var ErrOccupied = errors.New("checkpoint key occupied")

// Sign signs (chain, seq, hash) and writes it, once: the put is conditional
// (If-None-Match: *), and the bucket's default retention locks it. A
// checkpoint already there with the same hash (a retried batch signed the
// same seq) is success; one with another hash is an error, never replaced.
func (c *Checkpoints) Sign(ctx context.Context, chainName string, seq int64, hash string) error {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	cp := checkpoint.Checkpoint{Log: c.Log, Tenant: chainName, Seq: seq, Hash: hash, Time: now().UTC()}
	pub, err := c.public(ctx)
	if err != nil {
		return fmt.Errorf("checkpoint of chain %q at seq %d: %w", chainName, seq, err)
	}
	msg, err := checkpoint.Sign(ctx, cp, pub, c.Signer)
	if err != nil {
		return fmt.Errorf("checkpoint of chain %q at seq %d: %w", chainName, seq, err)
	}
	key := checkpoint.ObjectKey(chainName, seq)
	_, err = c.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(c.Bucket), Key: aws.String(key),
		Body: bytes.NewReader(msg), IfNoneMatch: aws.String("*"), ContentType: aws.String("text/plain; charset=utf-8")})
	var ae smithy.APIError
	if errors.As(err, &ae) && (ae.ErrorCode() == "PreconditionFailed" || ae.ErrorCode() == "ConditionalRequestConflict") {
		have, rerr := c.read(ctx, key)
		if errors.Is(rerr, checkpoint.ErrInvalid) {
			return fmt.Errorf("checkpoint key %s holds an object that does not verify: %w", key, ErrOccupied)
		}
		if rerr != nil {
			return fmt.Errorf("checkpoint %s exists and cannot be read: %w", key, rerr)
		}
		if have.Tenant != chainName || have.Seq != seq || have.Hash != hash {
			return fmt.Errorf("checkpoint %s already states chain %q seq %d hash %s, not hash %s: %w",
				key, have.Tenant, have.Seq, have.Hash, hash, ErrOccupied)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("write checkpoint %s: %w", key, err)
	}
	c.logger().InfoContext(ctx, "checkpoint written", slog.String(obs.KeyChain, chainName), slog.Int64(obs.KeySeq, seq),
		slog.String(obs.KeyBucket, c.Bucket), slog.String(obs.KeyKey, key))
	return nil
}

func (c *Checkpoints) read(ctx context.Context, key string) (checkpoint.Checkpoint, error) {
	out, err := c.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(c.Bucket), Key: aws.String(key)})
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	defer out.Body.Close()
	msg, err := io.ReadAll(io.LimitReader(out.Body, 64<<10))
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	pub, err := c.public(ctx)
	if err != nil {
		return checkpoint.Checkpoint{}, err
	}
	return checkpoint.Open(msg, c.Log, pub)
}

// public is Public, else Key's answer.
func (c *Checkpoints) public(ctx context.Context) (*checkpoint.PublicKey, error) {
	if c.Public != nil || c.Key == nil {
		return c.Public, nil
	}
	return c.Key(ctx)
}

func (c *Checkpoints) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}
