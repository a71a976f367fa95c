// Command changefeed is the BEST_EFFORT lane of the example application
// (serve.Changefeed).
package main

import (
	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/pkg/serve"
)

func main() { serve.Changefeed(example.App) }
