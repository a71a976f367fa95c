package checkpoint

import (
	"context"
	"sync"
)

// PrefetchedKey is a public key read in the background from when it is
// made (a KMS GetPublicKey at cold start), so that the round trip overlaps
// the rest of a function's start and its first invocation instead of
// preceding them. Get waits for it; after a failed read, Get reads again,
// so a transient failure at cold start costs one retry, not the process.
type PrefetchedKey struct {
	fetch func(context.Context) (*PublicKey, error)
	done  chan struct{}

	mu  sync.Mutex
	pub *PublicKey
	err error
}

// Prefetch starts fetch in the background with ctx. onErr, when not nil, is
// told of a failed background read (to log it: Get reads again).
func Prefetch(ctx context.Context, fetch func(context.Context) (*PublicKey, error), onErr func(error)) *PrefetchedKey {
	p := &PrefetchedKey{fetch: fetch, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		pub, err := fetch(ctx)
		p.mu.Lock()
		p.pub, p.err = pub, err
		p.mu.Unlock()
		if err != nil && onErr != nil {
			onErr(err)
		}
	}()
	return p
}

// Get returns the key, waiting for the background read; when that failed,
// it reads again with ctx (and keeps the key once a read succeeds).
func (p *PrefetchedKey) Get(ctx context.Context) (*PublicKey, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pub == nil {
		p.pub, p.err = p.fetch(ctx)
	}
	return p.pub, p.err
}
