//go:build !notrace

package tracing

import "sync"

func reset() {
	providerOnce = sync.Once{}
	provider = nil
}
