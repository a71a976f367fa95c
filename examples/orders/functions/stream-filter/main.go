// Command stream-filter is the events Pipe's enrichment for the example
// application (streamfilter.Run).
package main

import (
	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/pkg/serve/streamfilter"
)

func main() { streamfilter.Run(example.App) }
