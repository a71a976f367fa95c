// Command stream-filter is the relay's stream-filter function.
package main

import (
	"github.com/fourlanes/fourlanes/pkg/serve"
	"github.com/fourlanes/fourlanes/test/relay"
)

func main() { serve.StreamFilter(relay.App) }
