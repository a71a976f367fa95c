// Command stream-filter is the events Pipe's enrichment for the example
// application (serve.StreamFilter).
package main

import (
	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/pkg/serve"
)

func main() { serve.StreamFilter(example.App) }
