// Command changefeed is the BEST_EFFORT lane of the example application
// (changefeed.Run).
package main

import (
	"github.com/fourlanes/fourlanes/examples/orders"
	"github.com/fourlanes/fourlanes/pkg/serve/changefeed"
)

func main() { changefeed.Run(example.App) }
