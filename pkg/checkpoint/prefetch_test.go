package checkpoint_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/fourlanes/fourlanes/pkg/checkpoint"
)

func TestPrefetchedKey(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	want := checkpoint.LocalSigner{Key: k}.Public()
	var calls atomic.Int32
	fail := errors.New("kms unavailable")
	fetch := func(context.Context) (*checkpoint.PublicKey, error) {
		if calls.Add(1) == 1 {
			return nil, fail
		}
		return want, nil
	}
	var logged error
	p := checkpoint.Prefetch(context.Background(), fetch, func(err error) { logged = err })
	got, err := p.Get(context.Background()) // the background read failed: read again
	if err != nil || got != want {
		t.Fatalf("Get after a failed prefetch: got %v, %v; want the key", got, err)
	}
	if !errors.Is(logged, fail) {
		t.Errorf("onErr: got %v, want the prefetch's error", logged)
	}
	if got, err := p.Get(context.Background()); err != nil || got != want || calls.Load() != 2 {
		t.Errorf("second Get: got %v, %v after %d reads; want the key kept, 2 reads", got, err, calls.Load())
	}

	// Every read failing: each Get fails with the read's error.
	p = checkpoint.Prefetch(context.Background(), func(context.Context) (*checkpoint.PublicKey, error) { return nil, fail }, nil)
	if _, err := p.Get(context.Background()); !errors.Is(err, fail) {
		t.Errorf("Get when every read fails: got %v, want %v", err, fail)
	}

	// A caller whose context ends stops waiting.
	block := make(chan struct{})
	defer close(block)
	p = checkpoint.Prefetch(context.Background(), func(context.Context) (*checkpoint.PublicKey, error) { <-block; return want, nil }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Get(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a cancelled context while the read runs: got %v, want context.Canceled", err)
	}
}
