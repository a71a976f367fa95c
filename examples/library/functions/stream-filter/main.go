// Command stream-filter is the library's stream-filter function (streamfilter.Run).
package main

import (
	"github.com/fourlanes/fourlanes/examples/library"
	"github.com/fourlanes/fourlanes/pkg/serve/streamfilter"
)

func main() { streamfilter.Run(library.App) }
