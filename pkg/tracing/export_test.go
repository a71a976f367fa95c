package tracing

import "sync"

// Reset forgets the process-wide decisions (Enabled, the provider), so one
// test process can try several environments.
func Reset() {
	warnOnce = sync.Once{}
	reset()
}

var (
	ParseXRay  = parseXRay
	FormatXRay = formatXRay
	NewIDs     = xrayIDs{}.NewIDs
)
