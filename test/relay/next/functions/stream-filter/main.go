// Command stream-filter is the relay's next release of its stream-filter function.
package main

import (
	"github.com/fourlanes/fourlanes/pkg/serve"
	"github.com/fourlanes/fourlanes/test/relay/next"
)

func main() { serve.StreamFilter(next.App) }
