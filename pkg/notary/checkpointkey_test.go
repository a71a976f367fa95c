package notary_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/checkpoint"
	"github.com/fourlanes/fourlanes/pkg/notary"
)

// TestCheckpointsKeyUnavailable: without the public key nothing is signed
// or written (S3 is nil: a write would panic), and the error is the key's.
func TestCheckpointsKeyUnavailable(t *testing.T) {
	fail := errors.New("kms: AccessDeniedException")
	c := &notary.Checkpoints{Bucket: "b", Log: "fourlanes/test",
		Key: func(context.Context) (*checkpoint.PublicKey, error) { return nil, fail }}
	if err := c.Sign(t.Context(), "acme", 3, "00"); !errors.Is(err, fail) {
		t.Errorf("Sign with the key unavailable: got %v, want the key's error", err)
	}
}
