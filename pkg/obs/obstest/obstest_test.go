package obstest_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fourlanes/fourlanes/pkg/obs/obstest"
)

func TestBufferConcurrentWrites(t *testing.T) {
	var b obstest.Buffer
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				fmt.Fprintf(&b, "writer %d line %d\n", i, j)
				_ = b.String()
			}
		}(i)
	}
	wg.Wait()
	if got := len(b.Lines()); got != 800 {
		t.Fatalf("got %d lines, want 800", got)
	}
}

// WaitFor sees a line written after it started waiting, and gives up on
// one never written.
func TestWaitFor(t *testing.T) {
	var b obstest.Buffer
	go func() {
		time.Sleep(50 * time.Millisecond)
		fmt.Fprintln(&b, `{"msg":"late"}`)
	}()
	if !b.WaitFor(`"late"`, 5*time.Second) {
		t.Error("WaitFor missed a line written after it began")
	}
	if b.WaitFor(`"never"`, 30*time.Millisecond) {
		t.Error("WaitFor reported a line never written")
	}
}
