package reconcile_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/fourlanes/fourlanes/pkg/checkpoint"
	"github.com/fourlanes/fourlanes/pkg/reconcile"
)

// oneCheckpointS3 lists one checkpoint object version and serves body for it.
type oneCheckpointS3 struct{ key, body string }

func (o oneCheckpointS3) ListObjectVersions(context.Context, *s3.ListObjectVersionsInput, ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error) {
	return &s3.ListObjectVersionsOutput{Versions: []s3types.ObjectVersion{{Key: aws.String(o.key), VersionId: aws.String("v1")}}}, nil
}

func (o oneCheckpointS3) GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return &s3.GetObjectOutput{Body: io.NopCloser(strings.NewReader(o.body))}, nil
}

// TestSignedStateKeyUnavailable: when the public key cannot be read, a
// checkpoint is not judged at all: the read fails with the key's error, and
// the object is not reported as one that does not verify.
func TestSignedStateKeyUnavailable(t *testing.T) {
	fail := errors.New("kms: AccessDeniedException")
	s := &reconcile.SignedState{
		S3: oneCheckpointS3{key: reconcile.CheckpointKey("acme", 3), body: "fourlanes/test\nacme\n3\nhash\n"}, Bucket: "b", Log: "fourlanes/test",
		Key: func(context.Context) (*checkpoint.PublicKey, error) { return nil, fail },
	}
	_, _, err := s.Latest(t.Context(), "acme")
	if !errors.Is(err, fail) || errors.Is(err, checkpoint.ErrInvalid) {
		t.Fatalf("Latest with the key unavailable: got %v, want the key's error, not ErrInvalid", err)
	}
	if _, findings, err := s.CheckpointFindings(t.Context(), "acme"); !errors.Is(err, fail) || len(findings) != 0 {
		t.Errorf("CheckpointFindings with the key unavailable: got %v findings, %v; want none and the key's error", findings, err)
	}
}
