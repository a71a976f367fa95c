package obs

import "sync"

// ResetColdStart forgets the process's first invocation, so a test can play one.
func ResetColdStart() {
	first.once = sync.Once{}
	first.id = ""
}
