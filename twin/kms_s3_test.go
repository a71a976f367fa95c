package twin_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/fourlanes/fourlanes/twin"
	"github.com/fourlanes/fourlanes/twin/localaws"
)

func kmsClient(t *testing.T) *kms.Client {
	t.Helper()
	srv := httptest.NewServer(twin.NewKMS())
	t.Cleanup(srv.Close)
	return kms.NewFromConfig(localaws.Config(), func(o *kms.Options) { o.BaseEndpoint = aws.String(srv.URL) })
}

// The twin's KMS through the AWS SDK: a P-256 key signs a digest and a raw
// message; the signatures verify with the public key from GetPublicKey
// (offline) and with Verify; a changed message does not.
func TestKMSSignVerify(t *testing.T) {
	ctx := context.Background()
	c := kmsClient(t)
	k, err := c.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: kmstypes.KeySpecEccNistP256, KeyUsage: kmstypes.KeyUsageTypeSignVerify})
	if err != nil {
		t.Fatal(err)
	}
	id := k.KeyMetadata.KeyId
	pk, err := c.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: k.KeyMetadata.Arn})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.ParsePKIXPublicKey(pk.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("fourlanes/demo/acme\n1\n")
	d := sha256.Sum256(msg)
	for _, in := range []*kms.SignInput{
		{KeyId: id, Message: d[:], MessageType: kmstypes.MessageTypeDigest, SigningAlgorithm: kmstypes.SigningAlgorithmSpecEcdsaSha256},
		{KeyId: id, Message: msg, MessageType: kmstypes.MessageTypeRaw, SigningAlgorithm: kmstypes.SigningAlgorithmSpecEcdsaSha256},
	} {
		out, err := c.Sign(ctx, in)
		if err != nil {
			t.Fatalf("Sign %s: %v", in.MessageType, err)
		}
		if !ecdsa.VerifyASN1(pub.(*ecdsa.PublicKey), d[:], out.Signature) {
			t.Errorf("Sign %s: signature does not verify offline", in.MessageType)
		}
		v, err := c.Verify(ctx, &kms.VerifyInput{KeyId: id, Message: msg, MessageType: kmstypes.MessageTypeRaw,
			Signature: out.Signature, SigningAlgorithm: kmstypes.SigningAlgorithmSpecEcdsaSha256})
		if err != nil || !v.SignatureValid {
			t.Errorf("Verify %s = %v, %v", in.MessageType, v, err)
		}
		_, err = c.Verify(ctx, &kms.VerifyInput{KeyId: id, Message: append(msg, 'x'), MessageType: kmstypes.MessageTypeRaw,
			Signature: out.Signature, SigningAlgorithm: kmstypes.SigningAlgorithmSpecEcdsaSha256})
		if !errors.As(err, new(*kmstypes.KMSInvalidSignatureException)) {
			t.Errorf("Verify of a changed message: %v, want KMSInvalidSignatureException", err)
		}
	}
	if _, err := c.Sign(ctx, &kms.SignInput{KeyId: aws.String("no-such-key"), Message: d[:], MessageType: kmstypes.MessageTypeDigest,
		SigningAlgorithm: kmstypes.SigningAlgorithmSpecEcdsaSha256}); !errors.As(err, new(*kmstypes.NotFoundException)) {
		t.Errorf("Sign with an unknown key: %v, want NotFoundException", err)
	}
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// Object Lock on the twin's S3, through the AWS SDK: a locked object cannot
// be overwritten or deleted (with or without a version), a conditional put
// of a new key works once, and an unlocked bucket behaves as plain S3.
func TestS3ObjectLock(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	fake := twin.NewS3(func() time.Time { return now })
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	c := s3.NewFromConfig(localaws.Config(), func(o *s3.Options) { o.BaseEndpoint = aws.String(srv.URL); o.UsePathStyle = true })
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("locked"), ObjectLockEnabledForBucket: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if err := fake.CreateBucket("plain", false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObjectLockConfiguration(ctx, &s3.PutObjectLockConfigurationInput{Bucket: aws.String("locked"),
		ObjectLockConfiguration: &s3types.ObjectLockConfiguration{ObjectLockEnabled: s3types.ObjectLockEnabledEnabled,
			Rule: &s3types.ObjectLockRule{DefaultRetention: &s3types.DefaultRetention{Mode: s3types.ObjectLockRetentionModeCompliance, Days: aws.Int32(30)}}}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.GetObjectLockConfiguration(ctx, &s3.GetObjectLockConfigurationInput{Bucket: aws.String("locked")})
	if err != nil || cfg.ObjectLockConfiguration.Rule.DefaultRetention.Mode != s3types.ObjectLockRetentionModeCompliance {
		t.Fatalf("GetObjectLockConfiguration = %+v, %v", cfg, err)
	}
	put := func(bucket, body string, ifNoneMatch bool) error {
		in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("checkpoints/acme/1.note"), Body: bytes.NewReader([]byte(body))}
		if ifNoneMatch {
			in.IfNoneMatch = aws.String("*")
		}
		_, err := c.PutObject(ctx, in)
		return err
	}
	if err := put("locked", "one", true); err != nil {
		t.Fatalf("first conditional put: %v", err)
	}
	if err := put("locked", "two", true); apiCode(err) != "PreconditionFailed" {
		t.Errorf("conditional overwrite: %v, want PreconditionFailed", err)
	}
	if err := put("locked", "two", false); apiCode(err) != "AccessDenied" {
		t.Errorf("plain overwrite: %v, want AccessDenied", err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("locked"), Key: aws.String("checkpoints/acme/1.note")}); apiCode(err) != "AccessDenied" {
		t.Errorf("delete: %v, want AccessDenied", err)
	}
	vs, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("locked")})
	if err != nil || len(vs.Versions) != 1 {
		t.Fatalf("ListObjectVersions = %+v, %v; want one version", vs, err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("locked"), Key: aws.String("checkpoints/acme/1.note"),
		VersionId: vs.Versions[0].VersionId}); apiCode(err) != "AccessDenied" {
		t.Errorf("delete of the version: %v, want AccessDenied", err)
	}
	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("locked"), Key: aws.String("checkpoints/acme/1.note")})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.ReadFrom(got.Body)
	if b.String() != "one" {
		t.Errorf("object = %q, want %q", b.String(), "one")
	}
	// After the retention, a delete of the version is S3's to allow.
	now = now.AddDate(0, 0, 31)
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("locked"), Key: aws.String("checkpoints/acme/1.note"),
		VersionId: vs.Versions[0].VersionId}); err != nil {
		t.Errorf("delete after retention: %v", err)
	}
	// A bucket without Object Lock: overwrite and delete work.
	if err := put("plain", "one", false); err != nil {
		t.Fatal(err)
	}
	if err := put("plain", "two", false); err != nil {
		t.Errorf("plain bucket overwrite: %v", err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("plain"), Key: aws.String("checkpoints/acme/1.note")}); err != nil {
		t.Errorf("plain bucket delete: %v", err)
	}
}
